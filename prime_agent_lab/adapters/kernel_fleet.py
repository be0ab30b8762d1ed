"""One kernel fleet for both hosts (the Jupyter server and the CLI).

Per kernel: its executor (one client, the agent's cells one at a time), the working directory a
sub-agent's kernel keeps over restarts, and the setup every new kernel process gets (the kernel
package and the bridge address, loaded as it starts and by a silent cell); for sub-agents, a pool
of prepared kernels; and the bookkeeping that tells an agent of a restart nobody in its loop
caused. A host supplies only a `KernelBackend`: how it starts, finds, reaches and shuts down its
kernels (`jupyter/server_kernels.py`: jupyter_server's kernel manager; `adapters/local_kernels.py`:
the CLI's local processes).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..core.ports import KernelPort
from .kernel_calls import Run, set_working_directory, working_directory_code
from .kernel_executor import KernelExecutor, bridge_setup_code
from .kernel_pool import KernelPool
from .kernel_secret import KernelSetup, draw_secret, secret_setup_code
from .kernel_source import KernelSourceTraits
from .kernel_startup import load_package_at_start

if TYPE_CHECKING:
    from ..core.runtime import AgentRuntime

log = logging.getLogger(__name__)


class HandOutFailed(RuntimeError):
    """A pooled kernel could not become the notebook's kernel; the message says why."""


class KernelBackend(Protocol):
    """A host's kernels, each named by an id the host chose."""

    traits: KernelSourceTraits  # what the source of these kernels allows

    def manager(self, kernel_id: str) -> Any:
        """The jupyter_client kernel manager of a kernel (KeyError: not one of the host's)."""
        ...

    def managed(self, kernel_id: str) -> bool:
        """The kernel still runs under the host (nobody shut it down)."""
        ...

    async def start(self) -> str:
        """A new kernel that answered `kernel_info` (for the pool)."""
        ...

    async def alive(self, kernel_id: str) -> bool: ...

    async def shut_down(self, kernel_id: str) -> None:
        """Stop the kernel and forget what the host kept for it (a Jupyter session)."""
        ...

    def directory(self, cwd: str) -> str:
        """The absolute directory of `cwd` (relative, posix) a sub-agent's kernel works in."""
        ...

    async def notebook_kernel(self, notebook_path: str) -> str | None:
        """The kernel the notebook runs on already (a user opened it), else None."""
        ...

    async def hand_out(self, kernel_id: str, notebook_path: str, directory: str, run: Run) -> None:
        """Make a pooled kernel the notebook's, working in `directory` (`run` runs code on it
        through the agent's own client); HandOutFailed when that cannot be."""
        ...

    def follow_restarts(self, restarted: Callable[[str], None]) -> None:
        """Call `restarted(kernel_id)` after every restart of a kernel the host sees, whoever
        asked for it (a host that sees none never calls it)."""
        ...

    def follow_deaths(self, kernel_id: str, died: Callable[[], None]) -> None:
        """Call `died` as the host restarts the kernel after it died (before `restarted`)."""
        ...

    async def close(self) -> None:
        """The fleet is done: stop what the host must not leave running."""
        ...


class KernelFleet:
    def __init__(
        self, backend: KernelBackend, bridge_address: Callable[[], str], pool_size: int
    ) -> None:
        self.backend = backend
        self._bridge_address = bridge_address  # known once the host listens
        self._pool_size = pool_size
        self._pool: KernelPool[str] | None = None  # made when first asked for
        self._executors: dict[str, KernelExecutor] = {}
        # kernel id -> the secret its bridge calls are signed with, when the backend does not
        # hold the kernels' connection keys (held only here, in memory; adapters/kernel_secret.py)
        self._secrets: dict[str, bytes] = {}
        # kernel id -> a sub-agent's working directory, set again whenever its kernel restarts
        self.directories: dict[str, str] = {}
        self._children: set[str] = set()  # kernels handed to sub-agents (theirs to shut down)
        self._auto_restarting: set[str] = set()  # kernels the host restarts after a death
        self._runtime: AgentRuntime | None = None
        # background work: preparations (cancelled at close) and executor closes (awaited)
        self._preparing: set[asyncio.Future[Any]] = set()
        self._closing: set[asyncio.Future[Any]] = set()
        backend.follow_restarts(self._restarted)

    @property
    def shares_disk(self) -> bool:
        """The one switch between the two ways snapshot bytes and skill modules reach a kernel
        (docs/gateway.md 2.3, 2.4): True, the kernels see the host's session folders and read
        and write them directly (local kernels, the fast path); False, they go over the bridge
        (a gateway kernel). It is the kernel source's `shares_disk` trait."""
        return self.backend.traits.shares_disk

    def serve(self, runtime: AgentRuntime) -> None:
        """Restarts of a kernel are told to the agent `runtime` has on it."""
        self._runtime = runtime

    # ------------------------------------------------------------ executors

    def manager(self, kernel_id: str) -> Any:
        return self.backend.manager(kernel_id)

    def executor(self, kernel_id: str) -> KernelExecutor:
        """The one executor of a kernel of the host's (made at the first use)."""
        executor = self._executors.get(kernel_id)
        if executor is None:
            executor = KernelExecutor(
                self.backend.manager(kernel_id),
                kernel_id,
                lambda: self._setup(kernel_id),
                is_managed=lambda: self.backend.managed(kernel_id),
                shares_disk=lambda: self.shares_disk,
                on_new_process=None
                if self.backend.traits.local_restarts
                else lambda died: self._new_process_seen(kernel_id, died),
            )
            self._executors[kernel_id] = executor
            self.backend.follow_deaths(kernel_id, lambda: self._auto_restarting.add(kernel_id))
        return executor

    def key(self, kernel_id: str) -> bytes | None:
        """The signing key of a kernel of the host's (None: not one, or not set up yet): its
        connection key, or the secret handed to it at setup when the host does not hold that."""
        if not self.backend.managed(kernel_id):
            return None
        if not self.backend.traits.holds_connection_key:
            return self._secrets.get(kernel_id)
        key = self.backend.manager(kernel_id).session.key
        return bytes(key) if key else None

    def prepare_soon(self, kernel_id: str) -> None:
        """Connect and load the kernel package in the background (a failure is retried at the
        first cell)."""
        self._spawn(self._prepare(self.executor(kernel_id)), self._preparing)

    async def _prepare(self, executor: KernelExecutor) -> None:
        try:
            await executor.prepare()
        except Exception:
            log.warning(
                "preparing kernel %s failed; retried at the first cell",
                executor.kernel_id,
                exc_info=True,
            )

    def forget(self, kernel_id: str) -> None:
        """Drop the kernel's executor (the kernel itself is left as it is)."""
        executor = self._executors.pop(kernel_id, None)
        if executor is not None:
            self._spawn(executor.close(), self._closing)

    def forget_gone(self) -> list[str]:
        """Drop the executors of kernels shut down meanwhile; their ids."""
        gone = [kernel_id for kernel_id in self._executors if not self.backend.managed(kernel_id)]
        for kernel_id in gone:
            self.forget(kernel_id)
            self._secrets.pop(kernel_id, None)
        return gone

    # ------------------------------------------------------------ kernel setup

    def set_directory(self, kernel_id: str, directory: str) -> None:
        """A sub-agent's kernel works in `directory`, in this process (the caller moves it) and
        in every later one: a pooled kernel was set up before it had a folder."""
        self.directories[kernel_id] = directory
        self._arrange_next_start(kernel_id)

    def _setup(self, kernel_id: str) -> KernelSetup:
        """The silent cell that sets up this kernel process, and a new secret for it when the
        host does not hold its connection key. Later processes of a kernel with that key (after
        any restart) also bind the kernel API as they start, before anyone's first cell."""
        self._arrange_next_start(kernel_id)
        directory = self.directories.get(kernel_id)
        moves = directory and self.backend.traits.shares_disk  # a gateway's kernel cannot
        chdir = working_directory_code(directory) if moves else ""
        bridge = self._bridge_address()
        if self.backend.traits.holds_connection_key:
            return KernelSetup(bridge_setup_code(bridge, kernel_id) + chdir)
        secret = self._secrets[kernel_id] = draw_secret()
        return KernelSetup(secret_setup_code(bridge, kernel_id) + chdir, secret)

    def _arrange_next_start(self, kernel_id: str) -> None:
        if not self.backend.traits.holds_connection_key:
            return  # a start-time setup could not know the secret: the setup cell binds the API
        directory = self.directories.get(kernel_id)
        with contextlib.suppress(KeyError):  # a kernel shut down meanwhile: no next start
            manager = self.backend.manager(kernel_id)
            load_package_at_start(manager, self._bridge_address(), kernel_id, directory)

    # ------------------------------------------------------------ sub-agents' kernels

    @property
    def pool(self) -> KernelPool[str]:
        """Prepared kernels for sub-agents; filled at the first spawn."""
        if self._pool is None:
            if self._pool_size == 0:
                log.warning("kernel pool disabled: kernel_pool_size is 0")
            self._pool = KernelPool(
                self._start_prepared,
                self._shut_down,
                size=self._pool_size,
                alive=self.backend.alive,
            )
        return self._pool

    async def _start_prepared(self) -> str:
        """Started, connected and loaded with the kernel package while it waits in the pool."""
        try:
            kernel_id = await self.backend.start()
        except Exception as exc:
            if refuses_more_kernels(exc):
                self.pool.disable(f"the kernel source refused another kernel ({exc})")
            raise
        try:
            await self.executor(kernel_id).prepare()
        except BaseException:
            await self._shut_down(kernel_id)
            raise
        return kernel_id

    async def child_kernel(self, notebook_path: str, cwd: str) -> KernelPort:
        """A kernel for a sub-agent's notebook, working in `cwd` (relative, posix): the one the
        notebook runs on already, else one from the pool."""
        directory = self.backend.directory(cwd)
        opened = await self._opened_kernel(notebook_path, directory)
        if opened is not None:
            return opened
        self.pool.fill()
        kernel_id = await self.pool.take()
        self._children.add(kernel_id)
        try:
            self.set_directory(kernel_id, directory)
            executor = self.executor(kernel_id)
            await self.backend.hand_out(kernel_id, notebook_path, directory, executor.run_silently)
            await executor.prepare()  # done in the pool already, unless it restarted since
        except HandOutFailed:
            await self._shut_down(kernel_id)
            # A user opened the notebook while the pooled kernel was on its way.
            opened = await self._opened_kernel(notebook_path, directory)
            if opened is None:
                raise
            return opened
        except BaseException:
            await self._shut_down(kernel_id)
            raise
        return executor

    async def _opened_kernel(self, notebook_path: str, directory: str) -> KernelPort | None:
        """The notebook's own kernel, moved to the sub-agent's working directory; None when the
        notebook has none."""
        kernel_id = await self.backend.notebook_kernel(notebook_path)
        if kernel_id is None:
            return None
        self.set_directory(kernel_id, directory)
        try:
            if self.backend.traits.shares_disk:
                await set_working_directory(self.backend.manager(kernel_id), directory)
        except Exception as exc:  # the user's kernel still serves; relative paths differ
            log.warning("could not move the kernel of %s to %s: %s", notebook_path, directory, exc)
        executor = self.executor(kernel_id)
        await executor.prepare()
        return executor

    async def release(self, kernel_id: str) -> None:
        """Shut down a kernel handed to a sub-agent (a notebook's own kernel stays)."""
        if kernel_id in self._children:
            await self._shut_down(kernel_id)

    async def _shut_down(self, kernel_id: str) -> None:
        self._children.discard(kernel_id)
        self.directories.pop(kernel_id, None)
        self._secrets.pop(kernel_id, None)
        executor = self._executors.pop(kernel_id, None)
        with contextlib.suppress(Exception):
            if executor is not None:
                await executor.close()
            await self.backend.shut_down(kernel_id)

    # ------------------------------------------------------------ restarts

    def _restarted(self, kernel_id: str) -> None:
        """A restart of the kernel finished, whoever asked for it (JupyterLab's Kernel menu,
        another client, the host's auto-restart after a death): the agent on it hears of it,
        unless an agent cell of its own reports it."""
        died = kernel_id in self._auto_restarting
        self._auto_restarting.discard(kernel_id)
        runtime = self._runtime
        agent = runtime.agent_on_kernel(kernel_id) if runtime is not None else None
        executor = self._executors.get(kernel_id)
        if agent is None or runtime is None:
            return
        if executor is not None:
            # The researcher's own cells use `rlm`, `history`, ... and the Harness view waits
            # for them: load the kernel package into the new process now, not at the next
            # agent cell (a no-op when that process has it already). On a gateway's kernel
            # this is what reads the new process token, and tells the restart from there.
            self._spawn(self._prepare(executor), self._preparing)
            if executor.executing or executor.knows_current_process():
                return  # the cell that saw it reports it, or this event came in late
        self._tell_restart(kernel_id, died)

    def _new_process_seen(self, kernel_id: str, died: bool) -> None:
        """A gateway's kernel runs a new process that no agent cell reports (its executor read a
        new process token, or iopub said so): told as the host's restart event is locally."""
        self._auto_restarting.discard(kernel_id)
        self._tell_restart(kernel_id, died)

    def _tell_restart(self, kernel_id: str, died: bool) -> None:
        runtime = self._runtime
        agent = runtime.agent_on_kernel(kernel_id) if runtime is not None else None
        if agent is None or runtime is None:
            return
        executor = self._executors.get(kernel_id)
        restored = runtime.snapshots.has_snapshot(agent.session_id)
        if executor is not None and executor.restarting:
            agent.notice("kernel_restarted", stopped_restart_notice(restored))
        elif died:
            agent.notice("kernel_died", death_notice(restored))
        else:
            agent.notice(
                "kernel_restarted_externally",
                "The kernel was restarted (Kernel menu or another client): all variables and "
                "imports are gone.",
            )

    # ------------------------------------------------------------ lifetime

    def _spawn(self, awaitable: Awaitable[Any], into: set[asyncio.Future[Any]]) -> None:
        task = asyncio.ensure_future(awaitable)
        into.add(task)
        task.add_done_callback(into.discard)

    async def close(self) -> None:
        """Preparations under way stop, the pool's kernels and every executor go; then whatever
        the backend stops. Nothing of the fleet's is left pending for a closed event loop."""
        for task in self._preparing:
            task.cancel()
        await asyncio.gather(*self._preparing, *self._closing, return_exceptions=True)
        if self._pool is not None:
            await self._pool.close()
        for executor in list(self._executors.values()):
            await executor.close()
        self._executors.clear()
        await self.backend.close()


def refuses_more_kernels(exc: BaseException) -> bool:
    """A start refused by a gateway at its limit (Kernel Gateway's `max_kernels`: 403; a
    gateway's failure to place one more: 500), from the HTTP error behind the host's."""
    seen: BaseException | None = exc
    while seen is not None:
        if getattr(seen, "status_code", None) in (403, 500):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def stopped_restart_notice(restored: bool) -> str:
    why = "The agent restarted the kernel because its stopped cell ignored the interrupt"
    if restored:  # the restore notice that follows lists what came back
        return (
            f"{why}: its variables and imports are being restored from the last kernel "
            "snapshot; what was set after it is gone."
        )
    return f"{why}: all variables and imports are gone (yours too)."


def death_notice(restored: bool) -> str:
    if restored:  # the restore notice that follows lists what came back
        return (
            "The kernel died and was restarted: its variables and imports are being "
            "restored from the last kernel snapshot; what was set after it is gone."
        )
    return "The kernel died and was restarted: all variables and imports are gone."
