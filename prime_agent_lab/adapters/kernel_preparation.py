"""Setting up each process of an agent's kernel, for the executor that owns its client
(adapters/kernel_executor.py): the silent setup cell that loads the kernel package and points its
bridge at the host, the check of the package's version (adapters/kernel_package_check.py), the
per-kernel secret of a kernel whose connection key the host does not hold (adapters/
kernel_secret.py), and, for a kernel without local restarts (a gateway's), the process token that
tells its processes apart (adapters/kernel_process.py).

The token is read by the setup's own request, by a silent request before each harness run, and by
the agent cell's own request (`ran_in_new_process`): an agent cell costs one round trip, and a
cell that ran in a process not seen before it is told so, with the process set up after it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from .kernel_package_check import VERSIONS, VERSIONS_EXPRESSION, KernelPackageProblem, problem
from .kernel_process import TOKEN, TOKEN_EXPRESSION, KernelProcess, token_of
from .kernel_secret import KernelSetup, SecretNotTaken, hand_secret

log = logging.getLogger(__name__)

READY_TIMEOUT = 3600.0  # a new client's first reply, or a setup's, can wait behind a user's cell
UNPREPARED_PROCESS_NOTE = (
    "[kernel restarted] The kernel was restarted before this cell ran: variables and imports "
    "from before are gone, and this cell ran before the kernel package was set up again "
    "(`rlm`, `history` were missing in it). They are back for the next cell."
)


def bridge_setup_code(bridge_url: str, kernel_id: str) -> str:
    """The silent cell that loads the kernel package and points its bridge at the host."""
    return (
        "import prime_agent_kernel as _prime_agent_kernel\n"
        f"_prime_agent_kernel.configure({bridge_url!r}, {kernel_id!r})\n"
        "del _prime_agent_kernel\n"
    )


class KernelLink(Protocol):
    """What the preparation uses of the executor: its client, its view of the kernel's activity
    and the set of its own requests, under the executor's lock."""

    @property
    def own(self) -> set[str]: ...

    @property
    def generation(self) -> object: ...

    def observe(self, msg: dict[str, Any]) -> None: ...

    async def ensure_client(self) -> Any: ...

    async def drain_activity(self, client: Any) -> bool: ...

    async def wait_reply(self, client: Any, msg_id: str, timeout: float) -> dict[str, Any]: ...

    def process_followed(self) -> None:
        """The client stays: it was the kernel that changed process (a gateway's websocket
        outlives it)."""


class KernelPreparation:
    def __init__(
        self,
        kernel_id: str,
        setup_code: Callable[[], KernelSetup | str | None] | None,
        on_new_process: Callable[[bool], None] | None,
        kernel: KernelLink,
    ) -> None:
        """`on_new_process(died)`: see `KernelExecutor`; given, the kernel's processes are told
        apart by their token (`process`)."""
        self.kernel_id = kernel_id
        self._setup_code = setup_code
        self._on_new_process = on_new_process
        self._kernel = kernel
        self.process = KernelProcess() if on_new_process is not None else None
        self._set_up: object = None  # the generation the setup last ran for
        self._reply_session: str | None = None
        self.problem: KernelPackageProblem | None = None
        self._problem_told = True

    @property
    def lacks_package(self) -> bool:
        """The kernel has no kernel package (told once already: no snapshots there either)."""
        return self.problem is not None and self.problem.missing

    def untold_problem(self) -> KernelPackageProblem | None:
        """The package's problem, once: for the first agent cell after the setup found it."""
        if self.problem is None or self._problem_told:
            return None
        self._problem_told = True
        return self.problem

    async def ensure(self, check_process: bool = True) -> None:
        """Load the kernel package once per kernel process, and check its version.

        A kernel whose environment lacks the package (or has another version of it) still runs
        agent cells; the first cell tells what is wrong, in its observation and in the chat
        (`kernel_package_check`), so the model and the user know `rlm` and `history` are absent.
        `check_process` false: the process token is not read first (an agent cell reads it in
        its own request, `ran_in_new_process`).
        """
        if self._setup_code is None:
            return
        kernel = self._kernel
        if self.process is not None and check_process:
            await self.check_process(await kernel.ensure_client())
        if self._set_up == kernel.generation:
            return
        if self._set_up is not None:
            self._tell_new_process()
        setup = self._setup_code()
        if isinstance(setup, str):
            setup = KernelSetup(setup)
        if setup is None or not setup.code:
            self._set_up = kernel.generation
            return
        client = await kernel.ensure_client()
        content = await self._run_setup(client, setup.code)
        if content.get("status") == "aborted":
            return  # skipped because a user cell failed just before; try again next cell
        if content.get("status") == "ok" and setup.secret is not None:
            try:
                await hand_secret(client, setup.secret, READY_TIMEOUT, kernel.own, kernel.observe)
            except SecretNotTaken as exc:
                content = {"status": "error", "ename": "SecretNotTaken", "evalue": str(exc)}
        if self.process is not None:
            self.process.seen(token_of(content), self._reply_session)
        self._set_up = kernel.generation
        if content.get("status") == "ok":
            versions = content.get("user_expressions", {}).get(VERSIONS)
        else:  # a failed execution evaluates no expression: ask on its own
            versions = (await self._run_setup(client, "")).get("user_expressions", {}).get(VERSIONS)
        self.problem = problem(content, versions)
        self._problem_told = self.problem is None
        if self.problem is not None:  # told in the chat and the observation (warnings
            # reach the CLI's stderr: it would be said twice there)
            log.info("kernel %s: %s", self.kernel_id, self.problem.text)

    async def check_process(self, client: Any) -> None:
        """Read the process token (a kernel without local restarts): a new one is a restart,
        told to the host unless an agent cell reports it."""
        assert self.process is not None
        await self._kernel.drain_activity(client)  # iopub `restarting` first: a death
        content = await self._run_setup(client, "", versions=False)
        self.process.seen(token_of(content), self._reply_session)
        self._kernel.process_followed()

    async def ran_in_new_process(
        self, client: Any, reply: dict[str, Any] | None, status: str
    ) -> bool:
        """Whether the agent's cell ran in a kernel process not seen before it (a kernel without
        local restarts, replaced with no iopub status reaching us): the token its request read
        (`reply`), or a token read now when the cell raised (`status` error: a failed execution
        evaluates no expression). Such a process is told to the host and set up now, for the
        next cell."""
        if self.process is None or reply is None or self._setup_code is None:
            return False
        before = self._kernel.generation
        token = token_of(reply["content"])
        if token is not None:
            self.process.seen(token, reply["header"].get("session") or None)
            self._kernel.process_followed()
        elif status == "error" and self.problem is None:
            await self.check_process(client)
        if self._kernel.generation == before:
            return False
        await self.ensure(check_process=False)
        return True

    def _tell_new_process(self) -> None:
        process = self.process
        if process is None or process.told or self._on_new_process is None:
            return
        process.told = True
        self._on_new_process(process.died)

    async def _run_setup(self, client: Any, code: str, versions: bool = True) -> dict[str, Any]:
        """The reply content of a silent setup execution, with the kernel package's versions
        and (a kernel without local restarts) its process token."""
        expressions = {VERSIONS: VERSIONS_EXPRESSION} if versions else {}
        if self.process is not None:
            expressions[TOKEN] = TOKEN_EXPRESSION
        msg_id = client.execute(
            code,
            silent=True,
            store_history=False,
            allow_stdin=False,
            user_expressions=expressions,
        )
        own = self._kernel.own
        own.add(msg_id)
        try:
            reply = await self._kernel.wait_reply(client, msg_id, READY_TIMEOUT)
        finally:
            own.discard(msg_id)
        self._reply_session = reply["header"].get("session") or None  # the kernel process's
        return dict(reply["content"])
