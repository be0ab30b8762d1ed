"""Everything a headless run needs around the agent loop: a notebook file, a local kernel started
while the model is thinking, a loopback bridge server, and the session store in `.prime-agent/`."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from jupyter_client.kernelspec import NoSuchKernel
from jupyter_client.manager import AsyncKernelManager
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets
from tornado.web import Application

from .adapters.bridge_http import standalone_routes
from .adapters.file_notebook import FileNotebook
from .adapters.kernel_executor import KernelExecutor, bridge_setup_code
from .adapters.local_kernels import kernel_spec_manager as _kernel_spec_manager
from .core.agent import Agent, AgentConfig
from .core.bridge import BridgeService
from .core.events import Event, EventBus
from .core.ports import (
    CellState,
    ExecutionResult,
    KernelPort,
    KernelUnavailable,
    ModelProvider,
    NotebookPort,
    OutputEvent,
)
from .core.redaction import SECRET_ENV_VARS, kernel_environment
from .core.runtime import AgentRuntime, RuntimeSettings
from .core.sessions import SessionLog, SessionRepository
from .providers import make_provider

NOTEBOOK_OUTPUT_CAP = 10_000_000


class KernelStartError(RuntimeError):
    """The kernel cannot be started; found before the first model request."""


class HeadlessRun:
    def __init__(
        self,
        *,
        cwd: Path,
        notebook: str,
        provider: str,
        model: str | None,
        script: str | None,
        stream: bool,
        kernel_name: str,
        config: AgentConfig,
        session_id: str | None = None,
        resume: bool = False,
        fenced_code: bool = False,
        kernel_env_strip: Sequence[str] = SECRET_ENV_VARS,
    ) -> None:
        self.cwd = cwd
        self.notebook_path = cwd / notebook
        self.repository = SessionRepository(cwd / ".prime-agent" / "sessions")
        self._provider_args = (provider, model, script, stream)
        self._fenced_code = fenced_code
        self._kernel_env_strip = tuple(kernel_env_strip)
        self._kernel_name = kernel_name
        self._config = config
        self._session_id = session_id
        self._resume = resume
        self.session_dir: Path | None = None
        self.kernel_id = uuid.uuid4().hex
        self._km: AsyncKernelManager | None = None
        self._kernel: _StartingKernel | None = None
        self._server: HTTPServer | None = None
        self._agent: Agent | None = None
        self._notebook: FileNotebook | None = None
        self.recovered_turn: int | None = None  # a turn cut by a crash, closed on start
        self.runtime = AgentRuntime(
            self.repository, _LocalEnvironment(self), RuntimeSettings(agent=config)
        )
        self.runtime.mailbox.recover()  # messages queued by an earlier run wait again

    @property
    def agent(self) -> Agent:
        assert self._agent is not None, "start() first"
        return self._agent

    async def start(self, listener: Callable[[Event], None]) -> None:
        self._km = self._kernel_manager()  # a bad kernel name fails here, before anything else
        # Launch the kernel process first: it boots on the other core while this process imports
        # the model SDK (up to a second) and the model writes its first answer.
        env = kernel_environment(self._kernel_env_strip)
        try:
            await self._km.start_kernel(cwd=str(self.cwd), env=env)
        except Exception as exc:
            raise KernelStartError(
                f"the kernel {self._kernel_name!r} could not start: {type(exc).__name__}: {exc}"
            ) from exc
        provider = self.make_provider(None)
        spec = self._km.kernel_spec
        notebook = self._notebook = FileNotebook(
            self.notebook_path,
            NOTEBOOK_OUTPUT_CAP,
            kernel_name=self._kernel_name,
            kernel_display_name=spec.display_name if spec else self._kernel_name,
            kernel_language=spec.language if spec else "python",
        )
        session = self._open_session(provider)
        self.session_dir = session.directory
        # The kernel boots while the model writes its first answer.
        bridge_url = self._start_bridge_server(self.runtime.bridge)
        setup = bridge_setup_code(bridge_url, self.kernel_id)
        self._kernel = _StartingKernel(self._km, self.kernel_id, setup)
        events = EventBus(session.session_id)
        events.add_listener(listener)
        self._agent, self.recovered_turn = await self.runtime.start_agent(
            session, provider, notebook, self._kernel, events
        )

    def make_provider(self, model: str | None) -> ModelProvider:
        name, default_model, script, stream = self._provider_args
        return make_provider(
            name,
            model or default_model,
            script_path=script,
            stream=stream,
            fenced_code=self._fenced_code,
        )

    def _kernel_manager(self) -> AsyncKernelManager:
        km = AsyncKernelManager(
            kernel_name=self._kernel_name, kernel_spec_manager=_kernel_spec_manager()
        )
        try:
            km.kernel_spec  # noqa: B018  (reading it looks the spec up)
        except NoSuchKernel:
            installed = ", ".join(sorted(km.kernel_spec_manager.find_kernel_specs())) or "none"
            raise KernelStartError(
                f"cannot start kernel {self._kernel_name!r}: no such kernel spec "
                f"(installed: {installed}; see `jupyter kernelspec list`)"
            ) from None
        return km

    def _open_session(self, provider: ModelProvider) -> SessionLog:
        try:
            notebook = self.notebook_path.resolve().relative_to(self.cwd.resolve()).as_posix()
        except ValueError:
            notebook = str(self.notebook_path.resolve())
        session_id = self._session_id
        if session_id is None and self._resume:
            session_id = self.repository.latest_for_notebook(notebook)
            if session_id is None:
                raise FileNotFoundError(f"cannot continue: no session for {notebook} yet")
        if session_id is not None:
            return self.repository.load(session_id)
        return self.runtime.create_session(notebook, provider)

    def kernel_key(self, kernel_id: str) -> bytes | None:
        if kernel_id != self.kernel_id or self._km is None:
            return None
        return bytes(self._km.session.key)

    def _start_bridge_server(self, bridge: BridgeService) -> str:
        sockets = bind_sockets(0, "127.0.0.1", family=socket.AF_INET)
        port = sockets[0].getsockname()[1]
        self._server = HTTPServer(Application(standalone_routes(bridge)))
        self._server.add_sockets(sockets)
        return f"http://127.0.0.1:{port}/prime-agent/bridge"

    async def close(self) -> None:
        await self.runtime.shutdown()
        if self._notebook is not None:
            self._notebook.flush()
        if self._kernel is not None:
            await self._kernel.shutdown()
        elif self._km is not None and self._km.has_kernel:  # start() failed after the launch
            await self._km.shutdown_kernel(now=True)
        if self._server is not None:
            self._server.stop()


class _LocalEnvironment:
    """The CLI's side of the runtime: local kernels, notebook files, the CLI's provider."""

    def __init__(self, run: HeadlessRun) -> None:
        self._run = run

    def provider(self, model: str | None) -> ModelProvider:
        return self._run.make_provider(model)

    def kernel_key(self, kernel_id: str) -> bytes | None:
        return self._run.kernel_key(kernel_id)

    async def create_child_notebook(
        self, path: str, cells: list[dict[str, object]]
    ) -> NotebookPort:
        raise NotImplementedError("sub-agents arrive with the agent tree")

    async def start_child_kernel(self, notebook_path: str, cwd: str) -> KernelPort:
        raise NotImplementedError("sub-agents arrive with the agent tree")

    async def release_kernel(self, kernel: KernelPort) -> None:
        return None


class _StartingKernel:
    """The kernel port for a kernel that is still booting: the first execute waits for it."""

    def __init__(self, km: AsyncKernelManager, kernel_id: str, setup: str) -> None:
        self.kernel_id = kernel_id
        self._km = km
        self._executor = KernelExecutor(km, kernel_id, lambda: setup)
        self._boot = asyncio.ensure_future(self._executor.prepare())  # launched: wait till ready
        self._stop_during_boot: asyncio.Event | None = None

    async def _booted(self) -> None:
        """Wait for the boot; a boot that failed ends the turn (KernelUnavailable) instead of
        failing every cell the model writes."""
        try:
            await self._boot
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise KernelUnavailable(
                f"the kernel {self._km.kernel_name!r} could not start: {type(exc).__name__}: {exc}"
            ) from exc

    async def execute(
        self,
        code: str,
        on_event: Callable[[OutputEvent], None],
        timeout: float,
        on_state: Callable[[CellState], None] | None = None,
    ) -> ExecutionResult:
        if not self._boot.done():
            self._stop_during_boot = asyncio.Event()
            stopped = asyncio.ensure_future(self._stop_during_boot.wait())
            try:
                await asyncio.wait({self._boot, stopped}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stopped.cancel()
                self._stop_during_boot = None
            if not self._boot.done():
                return ExecutionResult(
                    status="skipped",
                    note="[not run] The user stopped the turn while the kernel was starting.",
                )
        await self._booted()
        return await self._executor.execute(code, on_event, timeout, on_state)

    def stop_cell(self) -> None:
        if self._stop_during_boot is not None:
            self._stop_during_boot.set()
        self._executor.stop_cell()

    async def shutdown(self) -> None:
        if not self._boot.done():
            self._boot.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._boot
        await self._executor.close()
        if self._km.has_kernel:
            await self._km.shutdown_kernel(now=True)
