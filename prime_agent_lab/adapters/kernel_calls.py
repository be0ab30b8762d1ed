"""Short one-off requests to a kernel, over a client of their own (made with `new_client`, so it
never shares an identity with the agent's or the browser's client).

Used by the kernel sources behind the kernel pool: wait until a new kernel answers, and point a
pre-started kernel at the directory of the notebook it is handed to.
"""

from __future__ import annotations

import os
import queue
import time
from collections.abc import Awaitable, Callable
from typing import Any

from .kernel_source import new_client

READY_TIMEOUT = 60.0  # seconds a new kernel may take to answer kernel_info
CALL_TIMEOUT = 30.0  # seconds a one-off execution on an idle kernel may take


class KernelCallFailed(RuntimeError):
    """A one-off request to a kernel failed; the message says what and why."""


async def wait_until_ready(manager: Any, timeout: float = READY_TIMEOUT) -> None:
    """Return once the kernel answers `kernel_info` (it has booted). A gateway answers the
    websocket handshake only once the kernel answered its own `kernel_info`, so the handshake
    gets the same time."""
    client = await new_client(manager, connect_timeout=timeout)
    try:
        await client.wait_for_ready(timeout=timeout)
    finally:
        client.stop_channels()


def working_directory_code(directory: str | None, session_name: str | None = None) -> str:
    """Code that moves the kernel to `directory` (None: it stays where it is); with
    `session_name`, also what jupyter_server gives a notebook's kernel at start
    (`JPY_SESSION_NAME`, IPython's `__session__`)."""
    lines = ["import os as _prime_agent_os"]
    if directory is not None:
        lines.append(f"_prime_agent_os.chdir({directory!r})")
    if session_name is not None:
        lines += [
            f"_prime_agent_os.environ['JPY_SESSION_NAME'] = {session_name!r}",
            f"__session__ = {session_name!r}",
        ]
    lines.append("del _prime_agent_os")
    return "\n".join(lines) + "\n"


Run = Callable[[str, float], Awaitable[dict[str, Any]]]
"""Runs code silently on a kernel and returns the reply content (`KernelExecutor.run_silently`)."""


async def set_working_directory(
    manager: Any,
    directory: str | None,
    session_name: str | None = None,
    timeout: float = CALL_TIMEOUT,
    run: Run | None = None,
) -> None:
    """Move a running kernel to `directory` (a silent execution; nothing enters its history);
    None: only the session name is set (a gateway's kernel cannot enter the host's folders).
    `run`: through the agent's own client (one already connected would otherwise take this for
    another client's cell and wait out its quiet period before the agent's first cell)."""
    if directory is not None and not os.path.isabs(directory):
        raise KernelCallFailed(f"the kernel's working directory must be absolute: {directory!r}")
    code = working_directory_code(directory, session_name)
    if run is not None:
        reply = await run(code, timeout)
    else:
        reply = await _execute_silently(manager, code, timeout)
    if reply.get("status") != "ok":
        raise KernelCallFailed(
            f"cannot {'set up' if directory is None else 'move'} the kernel"
            f"{'' if directory is None else ' to ' + directory}: "
            f"{reply.get('ename', 'error')}: {reply.get('evalue', reply.get('status'))}"
        )


async def _execute_silently(manager: Any, code: str, timeout: float) -> dict[str, Any]:
    client = await new_client(manager)
    try:
        msg_id = client.execute(code, silent=True, store_history=False, allow_stdin=False)
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise KernelCallFailed(f"the kernel did not answer within {timeout:g} s")
            try:
                msg = await client.get_shell_msg(timeout=min(remaining, 1.0))
            except queue.Empty:
                if not await manager.is_alive():
                    raise KernelCallFailed("the kernel died") from None
                continue
            if msg["parent_header"].get("msg_id") == msg_id:
                return dict(msg["content"])
    finally:
        client.stop_channels()
