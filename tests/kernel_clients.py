"""A second client on a test's kernel, like a browser tab running the user's cells."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from jupyter_client.manager import AsyncKernelManager

WAIT = 60.0


class UserClient:
    """The user's client: `start` returns once the kernel runs the user's cell (its busy status
    for that request), so a test orders the agent's cell after it without sleeping."""

    def __init__(self, km: AsyncKernelManager) -> None:
        self.client = km.client_factory(parent=km)
        self.client.load_connection_info(km.get_connection_info())

    async def __aenter__(self) -> UserClient:
        self.client.start_channels()
        await self.client.wait_for_ready(timeout=WAIT)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.client.stop_channels()

    async def run(self, code: str) -> dict[str, Any]:
        """Run `code` to the end; its execute reply's content."""
        reply = await self.client.execute_interactive(
            code, output_hook=lambda m: None, timeout=WAIT
        )
        return reply["content"]

    async def start(self, code: str) -> asyncio.Future[dict[str, Any]]:
        """Send `code` and return once the kernel is busy with it; the future is its reply."""
        msg_id = self.client.execute(code)
        while True:
            msg = await self.client.get_iopub_msg(timeout=WAIT)
            if (
                msg["parent_header"].get("msg_id") == msg_id
                and msg["msg_type"] == "status"
                and msg["content"]["execution_state"] == "busy"
            ):
                break
        return asyncio.ensure_future(self._reply(msg_id))

    async def _reply(self, msg_id: str) -> dict[str, Any]:
        while True:
            msg = await self.client.get_shell_msg(timeout=WAIT)
            if msg["parent_header"].get("msg_id") == msg_id:
                return dict(msg["content"])


def wait_for_file(flag: Path) -> str:
    """Cell code that waits until the test creates `flag`."""
    return f"import os, time\nwhile not os.path.exists({str(flag)!r}):\n    time.sleep(0.02)\n"
