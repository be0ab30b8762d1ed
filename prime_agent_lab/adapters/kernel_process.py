"""Which process of a kernel the host talks to, for a kernel source without local restarts
(`KernelSourceTraits.local_restarts` false: a Jupyter gateway's kernels have no provisioner pid
here and no jupyter_client restarter calls back).

The kernel package makes a random `PROCESS_TOKEN` as it is imported, once per kernel process.
The executor reads it with a user expression before each agent cell and at each setup, so a
restart is noticed whoever made it (the gateway's API, its auto-restart after a death, another
client). The websocket's iopub `status: starting` / `restarting` (docs/gateway.md 1.3) feed the
same record, so a cell running while its kernel is replaced ends as a death instead of waiting out
its timeout. The new kernel's own `starting` can arrive after its token was read: the kernel's
session id (in the header of everything a kernel process sends) tells that it is the process
seen already. A kernel without the package answers no token; its restarts go unnoticed here.
"""

from __future__ import annotations

import time
from typing import Any

from ..core.user_expressions import expression_text

TOKEN = "prime_agent_process_token"
TOKEN_EXPRESSION = "__import__('prime_agent_kernel').PROCESS_TOKEN"
# The gateway's `restarting` can arrive after the new process's token was read (seen on KG 3.0.1):
# within this many seconds of a change no `restarting` was matched to yet, it is that change's.
RESTARTING_ECHO = 30.0


def token_of(reply_content: dict[str, Any]) -> str | None:
    """The process token in an execute reply's user expressions (None: not answered)."""
    return expression_text(reply_content, TOKEN) or None


class KernelProcess:
    """The executor's view of the kernel process: `current` is a new object for every process
    seen, so it serves as the executor's generation."""

    def __init__(self) -> None:
        self.current: object = object()
        self._token: str | None = None  # the token of `current`, once read
        self._session: str | None = None  # the kernel session id of `current`, once seen
        self.told = True  # whoever must hear of the process change has heard of it
        self.died = False  # the change was an auto-restart after a death (iopub `restarting`)
        self._unmatched_since: float | None = None  # a token change no `restarting` matched yet

    def seen(self, token: str | None, session: str | None = None) -> None:
        """A token read from the kernel (and the session id of the reply that carried it): a new
        process when it is not the one of `current`."""
        if token is None:
            return
        if self._token is None:  # the first read since this process began (or ever)
            self._token = token
            self._session = session or self._session
        elif token != self._token:
            self._replace(token, session, told=False, died=False)
            self._unmatched_since = time.monotonic()

    def restarting(self) -> None:
        """The gateway's `restarting` (it replaced a dead kernel): a new process, unless it is
        the late news of the change a token read found (then that change was a death, which
        is kept for its telling if it was not told yet)."""
        since, self._unmatched_since = self._unmatched_since, None
        if since is not None and time.monotonic() - since < RESTARTING_ECHO:
            self.died = self.died or not self.told
            return
        self.replaced(died=True)

    def replaced(
        self, *, died: bool = False, told: bool = False, session: str | None = None
    ) -> None:
        """The kernel process was replaced (iopub status; `session`: the new kernel's, in its
        own `starting`), or the executor restarted it (`told`). A second status of the same
        restart (`restarting`, then `starting`), or the `starting` of the process whose token
        was read already, changes nothing."""
        if session is not None and session == self._session:
            return
        if self._token is None and not told:  # no read since the last change: this is it
            self._session = session or self._session
            self.died = self.died or died
            return
        self._replace(None, session, told=told, died=died)

    def _replace(self, token: str | None, session: str | None, *, told: bool, died: bool) -> None:
        self.current = object()
        self._token = token
        self._session = session
        self.told = told
        self.died = died
