"""Which process of a kernel the host talks to, for a kernel source without local restarts
(`KernelSourceTraits.local_restarts` false: a Jupyter gateway's kernels have no provisioner pid
here and no jupyter_client restarter calls back).

The kernel package makes a random `PROCESS_TOKEN` as it is imported, once per kernel process.
The executor reads it with a user expression before each agent cell and at each setup, so a
restart is noticed whoever made it (the gateway's API, its auto-restart after a death, another
client). The websocket's iopub `status: starting` / `restarting` (docs/gateway.md 1.3) feed the
same record, so a cell running while its kernel is replaced ends as a death instead of waiting out
its timeout. A kernel without the package answers no token; its restarts go unnoticed here.
"""

from __future__ import annotations

from typing import Any

TOKEN = "prime_agent_process_token"
TOKEN_EXPRESSION = "__import__('prime_agent_kernel').PROCESS_TOKEN"


def token_of(reply_content: dict[str, Any]) -> str | None:
    """The process token in an execute reply's user expressions (None: not answered)."""
    value = (reply_content.get("user_expressions") or {}).get(TOKEN) or {}
    if value.get("status") != "ok":
        return None
    text = (value.get("data") or {}).get("text/plain")
    return str(text) if text else None


class KernelProcess:
    """The executor's view of the kernel process: `current` is a new object for every process
    seen, so it serves as the executor's generation."""

    def __init__(self) -> None:
        self.current: object = object()
        self._token: str | None = None  # the token of `current`, once read
        self.told = True  # whoever must hear of the process change has heard of it
        self.died = False  # the change was an auto-restart after a death (iopub `restarting`)

    def seen(self, token: str | None) -> None:
        """A token read from the kernel: a new process when it is not the one of `current`."""
        if token is None:
            return
        if self._token is None:  # the first read since this process began (or ever)
            self._token = token
        elif token != self._token:
            self._replace(token, told=False, died=False)

    def replaced(self, *, died: bool = False, told: bool = False) -> None:
        """The kernel process was replaced (iopub status, or the executor's own restart). A
        second status of the same restart (`restarting`, then `starting`) changes nothing."""
        if self._token is None and not told:
            return
        self._replace(None, told=told, died=died)

    def _replace(self, token: str | None, *, told: bool, died: bool) -> None:
        self.current = object()
        self._token = token
        self.told = told
        self.died = died
