"""Kernels of the headless CLI: local processes through jupyter_client's `AsyncKernelManager`.

`LocalKernels` starts them (`launch`: at once; `start`: booted, for a pool) and `hand_out` moves a
pooled kernel to the directory its notebook lives in; `LocalBackend` is what the kernel fleet
(adapters/kernel_fleet.py) knows of them, by id.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from jupyter_client.kernelspec import KernelSpec, KernelSpecManager, NoSuchKernel
from jupyter_client.manager import AsyncKernelManager
from jupyter_core.paths import jupyter_path

from ..core.redaction import kernel_environment
from .kernel_calls import READY_TIMEOUT, Run, set_working_directory, wait_until_ready
from .kernel_source import LOCAL_KERNELS, KernelSourceTraits, KernelStartFailed


def kernel_spec_manager() -> KernelSpecManager:
    """Kernel specs from where jupyter_client looks for them, without its default's import of
    IPython (about 0.2 s) just to learn where `~/.ipython/kernels` is."""
    home = os.path.expanduser("~")
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    ipython_dirs = [
        os.path.expanduser(os.environ.get("IPYTHONDIR") or os.path.join(home, ".ipython")),
        os.path.join(xdg, "ipython"),  # IPython's older location, still honoured by it
    ]
    return KernelSpecManager(
        kernel_dirs=[*jupyter_path("kernels"), *(os.path.join(d, "kernels") for d in ipython_dirs)]
    )


def ipc_transport() -> dict[str, str]:
    """Manager settings that make a local kernel talk over Unix sockets in a private directory.

    Over TCP, jupyter_client picks free ports and the kernel binds them a moment later; another
    process can take one in between and the kernel dies at start ("Address already in use").
    Socket files in a directory of our own cannot clash, and the kernel no longer warns about
    TCP without encryption. (Windows has no Unix sockets there: it keeps TCP.)
    """
    if os.name == "nt":
        return {}
    directory = tempfile.mkdtemp(prefix="pal-")  # short: socket paths have a ~107 byte limit
    if not _ipc_directories:
        atexit.register(_remove_ipc_directories)  # whatever a kernel that died left behind
    _ipc_directories.add(directory)
    return {"transport": "ipc", "ip": os.path.join(directory, "k")}


_ipc_directories: set[str] = set()


def _remove_ipc_directories() -> None:
    for directory in list(_ipc_directories):
        shutil.rmtree(directory, ignore_errors=True)


def remove_ipc_directory(manager: AsyncKernelManager) -> None:
    """The private socket directory of a stopped kernel (its socket files are removed by
    jupyter_client's own clean-up)."""
    if manager.transport == "ipc":
        directory = os.path.dirname(manager.ip)
        shutil.rmtree(directory, ignore_errors=True)
        _ipc_directories.discard(directory)


class LocalKernelStartFailed(KernelStartFailed):
    """A local kernel could not be started; the message names the kernel spec and the cause."""


@dataclass(eq=False)
class LocalKernel:
    """One started local kernel. `kernel_id` is ours (the bridge names kernels by it)."""

    manager: AsyncKernelManager
    kernel_id: str = field(default_factory=lambda: uuid.uuid4().hex)


class LocalKernels:
    """Starts ready local kernels (booted: they answered `kernel_info`) without the provider key
    variables in their environment."""

    def __init__(
        self,
        kernel_name: str = "python3",
        cwd: Path | str | None = None,
        env_strip: Sequence[str] | None = None,  # None: the providers' key variables
        ready_timeout: float = READY_TIMEOUT,
    ) -> None:
        self.kernel_name = kernel_name
        self.cwd = str(cwd) if cwd is not None else os.getcwd()
        self._env_strip = None if env_strip is None else tuple(env_strip)
        self._ready_timeout = ready_timeout
        self._specs = kernel_spec_manager()
        self._spec: KernelSpec | None = None

    def _manager(self) -> AsyncKernelManager:
        return AsyncKernelManager(
            kernel_name=self.kernel_name, kernel_spec_manager=self._specs, **ipc_transport()
        )

    def spec(self) -> KernelSpec:
        """The kernel spec; LocalKernelStartFailed naming the installed ones when there is none."""
        if self._spec is not None:
            return self._spec
        try:
            self._spec = self._specs.get_kernel_spec(self.kernel_name)
            return self._spec
        except NoSuchKernel:
            installed = ", ".join(sorted(self._specs.find_kernel_specs())) or "none"
            raise LocalKernelStartFailed(
                f"cannot start kernel {self.kernel_name!r}: no such kernel spec "
                f"(installed: {installed}; see `jupyter kernelspec list`)"
            ) from None

    async def launch(self) -> LocalKernel:
        """A kernel launched and not waited for: it boots while the caller goes on (its first
        use waits for it)."""
        self.spec()
        return LocalKernel(await self._started(ready=False))

    async def start(self) -> LocalKernel:
        """A kernel that answered `kernel_info` (for a pool)."""
        return LocalKernel(await self._started(ready=True))

    async def _started(self, ready: bool) -> AsyncKernelManager:
        manager = self._manager()
        try:
            await manager.start_kernel(cwd=self.cwd, env=kernel_environment(self._env_strip))
            if ready:
                await wait_until_ready(manager, self._ready_timeout)
        except NoSuchKernel:
            raise LocalKernelStartFailed(
                f"no kernel spec {self.kernel_name!r} (see `jupyter kernelspec list`)"
            ) from None
        except Exception as exc:
            await _clean_up(manager)
            raise LocalKernelStartFailed(
                f"the kernel {self.kernel_name!r} could not start: {type(exc).__name__}: {exc}"
            ) from exc
        return manager

    async def discard(self, kernel: LocalKernel) -> None:
        if kernel.manager.has_kernel:
            await kill_now(kernel.manager)
        remove_ipc_directory(kernel.manager)

    async def alive(self, kernel: LocalKernel) -> bool:
        return bool(await kernel.manager.is_alive())


class LocalBackend:
    """The CLI's kernels as the kernel fleet knows them: by id, started in `cwd`, all shut down
    when the fleet closes. No restart is seen from outside: the CLI's cells report their own."""

    def __init__(self, kernels: LocalKernels) -> None:
        self.kernels = kernels
        self._running: dict[str, LocalKernel] = {}
        self.traits: KernelSourceTraits = LOCAL_KERNELS

    def spec(self) -> KernelSpec:
        return self.kernels.spec()

    def _add(self, kernel: LocalKernel) -> str:
        self._running[kernel.kernel_id] = kernel
        return kernel.kernel_id

    async def launch(self) -> str:
        return self._add(await self.kernels.launch())

    async def start(self) -> str:
        return self._add(await self.kernels.start())

    def manager(self, kernel_id: str) -> AsyncKernelManager:
        return self._running[kernel_id].manager

    def managed(self, kernel_id: str) -> bool:
        return kernel_id in self._running

    async def alive(self, kernel_id: str) -> bool:
        kernel = self._running.get(kernel_id)
        return kernel is not None and await self.kernels.alive(kernel)

    async def shut_down(self, kernel_id: str) -> None:
        kernel = self._running.pop(kernel_id, None)
        if kernel is not None:
            await self.kernels.discard(kernel)

    def directory(self, cwd: str) -> str:
        return str((Path(self.kernels.cwd) / cwd).resolve())

    async def notebook_kernel(self, notebook_path: str) -> str | None:
        return None  # a notebook file has no kernel of its own

    async def hand_out(self, kernel_id: str, notebook_path: str, directory: str, run: Run) -> None:
        await hand_out(self._running[kernel_id], directory, run=run)

    def follow_restarts(self, restarted: Callable[[str], None]) -> None:
        return None

    def follow_deaths(self, kernel_id: str, died: Callable[[], None]) -> None:
        return None

    async def close(self) -> None:
        for kernel_id in list(self._running):
            with contextlib.suppress(Exception):
                await self.shut_down(kernel_id)


async def hand_out(
    kernel: LocalKernel, directory: Path | str, run: Run | None = None
) -> LocalKernel:
    """Prepare a pooled kernel for its notebook: run it in `directory` (pooled kernels all start
    in one place; an agent's cells run where its notebook lives)."""
    await set_working_directory(kernel.manager, os.path.abspath(directory), run=run)
    return kernel


KILL_WAIT = 5.0  # seconds for a killed kernel process to be gone (jupyter_client waits as long)


async def kill_now(manager: AsyncKernelManager) -> None:
    """Kill the kernel process at once, then let jupyter_client clean up. Its
    `shutdown_kernel(now=True)` interrupts first: a kernel still starting (importing `site`)
    takes the SIGINT as a KeyboardInterrupt and prints "Fatal Python error" into the
    terminal the CLI's one-line error goes to."""
    provisioner = manager.provisioner
    if provisioner is not None:
        await provisioner.kill()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(provisioner.wait(), KILL_WAIT)
    await manager.shutdown_kernel(now=True)


async def _clean_up(manager: AsyncKernelManager) -> None:
    """After a failed start: stop what was launched and remove its connection file."""
    with contextlib.suppress(Exception):
        if manager.has_kernel:
            await kill_now(manager)
        else:
            await manager.cleanup_resources()
    remove_ipc_directory(manager)
