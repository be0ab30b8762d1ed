"""A browser's kernel websocket opens at once while an agent's cell runs on that kernel.

jupyter_server holds a kernel websocket's upgrade until the kernel answers `kernel_info` on its
shell channel, which a running cell holds up; only a kernel no websocket ever reached before is
affected (the answer is cached per kernel), which is exactly an agent's kernel: the pool starts it
and the agent runs cells on it through its own client. Measured before the fix: the upgrade came
when the cell ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from prime_agent_lab.jupyter.kernel_websocket import NonBlockingKernelWebsocketConnection
from prime_agent_lab.jupyter.server_kernels import ServerKernels

CELL_SECONDS = 20
BUSY_CELL = (
    "import time\n"
    f"for i in range({CELL_SECONDS * 4}):\n"
    "    print('tick', i, flush=True)\n"
    "    time.sleep(0.25)\n"
)
OPENS_WITHIN = 3.0  # seconds; the cell runs for CELL_SECONDS


@contextlib.asynccontextmanager
async def running_cell(manager: Any, wait_until_it_prints: bool = True) -> AsyncIterator[None]:
    """BUSY_CELL runs on the kernel, sent by a client of the server's own (as the agent's
    executor sends its cells), for the duration of the block."""
    client = manager.client_factory(parent=manager)
    client.load_connection_info(manager.get_connection_info())
    client.start_channels()
    try:
        await client.wait_for_ready(timeout=30)
        msg_id = client.execute(BUSY_CELL)
        while wait_until_it_prints:
            msg = await client.get_iopub_msg(timeout=30)
            parent = msg["parent_header"].get("msg_id")
            wait_until_it_prints = not (parent == msg_id and msg["msg_type"] == "stream")
        yield
    finally:
        client.stop_channels()


async def open_timed(jp_ws_fetch: Any, kernel_id: str) -> tuple[Any, float]:
    started = time.monotonic()
    ws = await jp_ws_fetch("api", "kernels", kernel_id, "channels")
    return ws, time.monotonic() - started


async def next_tick(ws: Any, timeout: float) -> str:
    """The next line of the running cell's output that reaches the websocket."""
    async with asyncio.timeout(timeout):
        while True:
            raw = await ws.read_message()
            assert raw is not None, "the websocket closed"
            msg = json.loads(raw)
            if msg.get("channel") == "iopub" and msg["header"]["msg_type"] == "stream":
                return str(msg["content"]["text"])


@pytest.fixture
def pool_kernel(jp_serverapp: Any, jp_asyncio_loop: Any) -> Iterator[str]:
    """A kernel started the way the pool starts a sub-agent's (no websocket ever reached it)."""
    source = ServerKernels(jp_serverapp, "python3")
    kernel_id = jp_asyncio_loop.run_until_complete(source.start())
    try:
        yield kernel_id
    finally:
        jp_asyncio_loop.run_until_complete(source.discard(kernel_id))


async def test_the_server_uses_the_connection_that_does_not_wait_on_a_busy_shell(
    jp_serverapp: Any,
) -> None:
    settings = jp_serverapp.web_app.settings
    assert settings["kernel_websocket_connection_class"] is NonBlockingKernelWebsocketConnection


@pytest.mark.parametrize("when", ["busy before the connect", "sent just before the connect"])
async def test_a_websocket_to_a_kernel_running_an_agent_cell_opens_at_once_with_live_output(
    jp_serverapp: Any, jp_ws_fetch: Any, pool_kernel: str, when: str
) -> None:
    manager = jp_serverapp.kernel_manager.get_kernel(pool_kernel)
    async with running_cell(manager, wait_until_it_prints=when == "busy before the connect"):
        ws, took = await open_timed(jp_ws_fetch, pool_kernel)
        try:
            assert took < OPENS_WITHIN, f"the websocket took {took:.1f} s to open"
            assert (await next_tick(ws, OPENS_WITHIN)).startswith("tick")
        finally:
            ws.close()


async def test_a_websocket_to_a_kernel_restarted_while_busy_opens_at_once(
    jp_serverapp: Any, jp_ws_fetch: Any, pool_kernel: str
) -> None:
    manager = jp_serverapp.kernel_manager.get_kernel(pool_kernel)
    async with running_cell(manager):
        await jp_serverapp.kernel_manager.restart_kernel(pool_kernel, now=True)
    async with running_cell(manager):
        ws, took = await open_timed(jp_ws_fetch, pool_kernel)
        try:
            assert took < OPENS_WITHIN, f"the websocket took {took:.1f} s to open"
            assert (await next_tick(ws, OPENS_WITHIN)).startswith("tick")
        finally:
            ws.close()


async def test_an_idle_kernel_still_answers_kernel_info_before_the_websocket_opens(
    jp_serverapp: Any, jp_ws_fetch: Any, pool_kernel: str
) -> None:
    """The stock behaviour where it costs nothing: the reply is cached for later connections."""
    manager = jp_serverapp.kernel_manager.get_kernel(pool_kernel)
    ws, _ = await open_timed(jp_ws_fetch, pool_kernel)
    ws.close()
    cached = manager._kernel_info_future
    assert cached.done() and "protocol_version" in cached.result()
