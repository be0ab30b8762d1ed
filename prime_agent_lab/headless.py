"""Everything a headless run needs around the agent loop: a notebook file, a local kernel started
while the model is thinking, a loopback bridge server, and the session store in `.prime-agent/`."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import socket
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from jupyter_client.kernelspec import NoSuchKernel
from jupyter_client.manager import AsyncKernelManager
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets
from tornado.web import Application

from .adapters.bridge_http import standalone_routes
from .adapters.file_notebook import FileNotebook, NotebookNotSaved
from .adapters.kernel_calls import working_directory_code
from .adapters.kernel_executor import KernelExecutor, bridge_setup_code
from .adapters.kernel_pool import KernelPool
from .adapters.local_kernels import (
    LocalKernel,
    LocalKernels,
    hand_out,
    ipc_transport,
    remove_ipc_directory,
)
from .adapters.local_kernels import kernel_spec_manager as _kernel_spec_manager
from .core.agent import Agent, TurnOutcome
from .core.bridge import BridgeService
from .core.events import Event, EventBus
from .core.pending_kernel import PendingKernel
from .core.ports import (
    KernelPort,
    ModelProvider,
    NotebookPort,
)
from .core.redaction import kernel_environment
from .core.runtime import AgentRuntime, choose_model
from .core.session_trust import sign_session
from .core.sessions import SessionLog, SessionRepository
from .core.settings import CLI, DECLARED, Settings
from .providers import make_provider


class KernelStartError(RuntimeError):
    """The kernel cannot be started; found before the first model request."""


class HeadlessRun:
    def __init__(
        self,
        *,
        cwd: Path,
        notebook: str,
        settings: Settings | None = None,
        session_id: str | None = None,
        resume: bool = False,
        keys: Mapping[str, str] | None = None,
        trust: bool = False,
        **overrides: Any,
    ) -> None:
        """`settings` (the defaults when None) with `overrides` of declared settings
        (`cell_timeout=60`), spelled for the CLI in messages. `keys`: provider keys held outside
        the environment (cli.py). `trust`: the user trusts the continued session's folder
        (docs/trust.md)."""
        unknown = sorted(set(overrides) - set(DECLARED))
        if unknown:
            raise TypeError(f"HeadlessRun: no such setting: {', '.join(unknown)}")
        self.settings = dataclasses.replace(settings or Settings(), host=CLI, **overrides)
        self.cwd = cwd
        self._trust = trust
        self.notebook_path = cwd / notebook
        self.repository = SessionRepository(cwd / ".prime-agent" / "sessions")
        self._keys = keys or {}
        self._kernel_name = self.settings.kernel_name
        self._kernel_env_strip = self.settings.kernel_env_strip
        self._session_id = session_id
        self._resume = resume
        self.session_dir: Path | None = None
        self.snapshot_failures: list[str] = []  # snapshots that could not be saved at the end
        self.kernel_id = uuid.uuid4().hex
        self._km: AsyncKernelManager | None = None
        self._kernel: PendingKernel | None = None  # the root's kernel, booting at first
        self._executor: KernelExecutor | None = None
        self._server: HTTPServer | None = None
        self._agent: Agent | None = None
        self._notebook: FileNotebook | None = None
        self.notebooks: list[FileNotebook] = []  # sub-agents' notebooks, flushed at the end
        self.recovered_turn: int | None = None  # a turn cut by a crash, closed on start
        self._environment = _LocalEnvironment(self, self.settings.kernel_pool_size)
        self.runtime = AgentRuntime(self.repository, self._environment, self.settings)
        self.bridge_url = ""
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
        spec = self.kernel_spec
        notebook = self._notebook = FileNotebook(
            self.notebook_path,
            self.settings.notebook_output_cap,
            kernel_name=self._kernel_name,
            kernel_display_name=spec.display_name if spec else self._kernel_name,
            kernel_language=spec.language if spec else "python",
        )
        session = self._open_session(provider)
        self.session_dir = session.directory
        if self._trust:
            await asyncio.to_thread(sign_session, self.runtime, session.session_id)
        # The kernel boots while the model writes its first answer.
        bridge_url = self.bridge_url = self._start_bridge_server(self.runtime.bridge)
        setup = bridge_setup_code(bridge_url, self.kernel_id)
        self._kernel = self._root_kernel(setup, session.session_id)
        events = EventBus(session.session_id)
        events.add_listener(listener)
        self._agent, self.recovered_turn = await self.runtime.start_agent(
            session, provider, notebook, self._kernel, events
        )
        self.runtime.mailbox.deliver_recovered()

    def _root_kernel(self, setup: str, session_id: str) -> PendingKernel:
        """The root's kernel port: the kernel was launched first thing and boots while the
        model writes its first answer; the first cell waits for it."""
        assert self._km is not None
        executor = self._executor = KernelExecutor(self._km, self.kernel_id, lambda: setup)

        async def boot() -> KernelPort:
            await executor.prepare()
            return executor

        return PendingKernel(
            boot(),
            on_ready=lambda kernel: self.runtime.kernel_ready(session_id, kernel),
            what=f"the kernel {self._kernel_name!r}",
        )

    async def settle(self, outcome: TurnOutcome) -> TurnOutcome:
        """After the root's turn: wait until the whole tree is quiet (sub-agents done, their
        replies answered), then the root's last turn's outcome. Agents that keep messaging each
        other are stopped once the tree has run `max_turns` turns in this run."""
        max_turns = self.settings.max_turns
        quiet = asyncio.ensure_future(self.runtime.wait_quiet())
        limit = asyncio.ensure_future(self.runtime.turns_reached(max_turns))
        await asyncio.wait({quiet, limit}, return_when=asyncio.FIRST_COMPLETED)
        if not quiet.done():
            await self.runtime.stop_all()
            await quiet
            return TurnOutcome(
                turn=outcome.turn,
                stop_reason="max_iterations",
                final_text="",
                error=f"the agent tree ran {max_turns} turns in this run "
                f"({self.settings.spell('max_turns')}); "
                "every agent was stopped",
            )
        limit.cancel()
        last = self.agent.session.last_of("turn_end")
        if last is None or last.get("turn") == outcome.turn:
            return outcome
        return TurnOutcome(
            turn=int(last.get("turn", outcome.turn)),
            stop_reason=str(last.get("stop_reason", "")),
            final_text=str(last.get("final_text", "")),
        )

    @property
    def kernel_spec(self) -> Any:
        return self._km.kernel_spec if self._km is not None else None

    def make_provider(self, model: str | None) -> ModelProvider:
        settings = self.settings
        return make_provider(
            settings.provider,
            model or settings.model,
            held_keys=self._keys,
            script_path=settings.script_path,
            stream=settings.stream,
            timeout=settings.request_timeout,
            fenced_code=settings.fenced_code_fallback,
            step_delay=settings.step_delay,
        )

    def _kernel_manager(self) -> AsyncKernelManager:
        km = AsyncKernelManager(
            kernel_name=self._kernel_name,
            kernel_spec_manager=_kernel_spec_manager(),
            **ipc_transport(),
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

    def root_kernel_key(self, kernel_id: str) -> bytes | None:
        if kernel_id == self.kernel_id and self._km is not None:
            return bytes(self._km.session.key)
        return None

    def _start_bridge_server(self, bridge: BridgeService) -> str:
        sockets = bind_sockets(0, "127.0.0.1", family=socket.AF_INET)
        port = sockets[0].getsockname()[1]
        self._server = HTTPServer(Application(standalone_routes(bridge)))
        self._server.add_sockets(sockets)
        return f"http://127.0.0.1:{port}/prime-agent/bridge"

    async def close(self) -> None:
        """Everything is closed even when a notebook cannot be saved (a full disk); the first
        such failure is raised at the end."""
        # a debounced snapshot would not fire in time; what fails is reported by the caller
        self.snapshot_failures = await self.runtime.flush_snapshots()
        await self.runtime.shutdown()
        await self._environment.close()
        unsaved: list[NotebookNotSaved] = []
        for notebook in [self._notebook, *self.notebooks]:
            if notebook is not None:
                try:
                    notebook.flush()
                except NotebookNotSaved as exc:
                    unsaved.append(exc)
        await self._close_processes()
        if unsaved:
            raise unsaved[0]

    async def _close_processes(self) -> None:
        if self._kernel is not None:
            await self._kernel.release()
        if self._executor is not None:
            await self._executor.close()
        if self._km is not None:
            if self._km.has_kernel:
                await self._km.shutdown_kernel(now=True)
            remove_ipc_directory(self._km)
        if self._server is not None:
            self._server.stop()


class _LocalEnvironment:
    """The CLI's side of the runtime: local kernels (sub-agents' from a pool), notebook files,
    the CLI's provider."""

    def __init__(self, run: HeadlessRun, pool_size: int) -> None:
        self._run = run
        self._kernels = LocalKernels(run._kernel_name, run.cwd, run._kernel_env_strip)
        # Pooled kernels are started, connected and loaded with the kernel package while they
        # wait, so a spawn only moves one to its folder.
        self._pool = KernelPool(
            self._start_prepared, self._shut_down, size=pool_size, alive=self._kernels.alive
        )
        self._children: dict[str, LocalKernel] = {}  # kernel id -> a pooled or child kernel
        self._executors: dict[str, KernelExecutor] = {}
        # kernel id -> a child's working directory, set again when its kernel restarts
        self._directories: dict[str, str] = {}

    def models(self) -> list[str]:
        provider = self._run.make_provider(None)
        return [f"{provider.name}/{provider.model}"]

    def provider(self, model: str | None) -> ModelProvider:
        if model is None:
            return self._run.make_provider(None)
        name, chosen = choose_model(model, self.models())
        if name != self._run.settings.provider:
            raise ValueError(f"the CLI runs sub-agents on its own provider only ({model!r})")
        return self._run.make_provider(chosen)

    def kernel_key(self, kernel_id: str) -> bytes | None:
        kernel = self._children.get(kernel_id)
        if kernel is not None:
            return bytes(kernel.manager.session.key)
        return self._run.root_kernel_key(kernel_id)

    async def create_child_notebook(self, path: str, cells: list[dict[str, Any]]) -> NotebookPort:
        file = self._run.cwd / path
        if file.exists():
            raise FileExistsError(path)
        file.parent.mkdir(parents=True, exist_ok=True)
        notebook = self._file_notebook(file)
        notebook.nb["cells"].extend(cells)
        notebook.changed()
        notebook.flush()
        self._run.notebooks.append(notebook)
        return notebook

    async def open_notebook(self, path: str) -> NotebookPort:
        notebook = self._file_notebook(self._run.cwd / path)
        self._run.notebooks.append(notebook)
        return notebook

    def _file_notebook(self, file: Path) -> FileNotebook:
        spec = self._run.kernel_spec
        return FileNotebook(
            file,
            self._run.settings.notebook_output_cap,
            kernel_name=self._run._kernel_name,
            kernel_display_name=spec.display_name if spec else self._run._kernel_name,
            kernel_language=spec.language if spec else "python",
        )

    async def start_child_kernel(self, notebook_path: str, cwd: str) -> KernelPort:
        self._pool.fill()
        kernel = await self._pool.take()
        executor = self._executors[kernel.kernel_id]
        try:
            await hand_out(kernel, self._run.cwd / cwd, run=executor.run_silently)
            self._directories[kernel.kernel_id] = str((self._run.cwd / cwd).resolve())
        except BaseException:
            await self._shut_down(kernel)
            raise
        return executor

    async def _start_prepared(self) -> LocalKernel:
        kernel = await self._kernels.start()
        self._children[kernel.kernel_id] = kernel
        setup = bridge_setup_code(self._run.bridge_url, kernel.kernel_id)

        def setup_code() -> str:
            directory = self._directories.get(kernel.kernel_id)
            return setup + (working_directory_code(directory) if directory else "")

        executor = self._executors[kernel.kernel_id] = KernelExecutor(
            kernel.manager, kernel.kernel_id, setup_code
        )
        try:
            await executor.prepare()
        except BaseException:
            await self._shut_down(kernel)
            raise
        return kernel

    def has_client(self, session_id: str, kernel_id: str) -> bool:
        return False  # nothing attaches to a headless run's agents

    async def release_kernel(self, kernel: KernelPort) -> None:
        child = self._children.get(kernel.kernel_id)
        if child is not None:
            await self._shut_down(child)

    async def _shut_down(self, kernel: LocalKernel) -> None:
        self._children.pop(kernel.kernel_id, None)
        self._directories.pop(kernel.kernel_id, None)
        executor = self._executors.pop(kernel.kernel_id, None)
        with contextlib.suppress(Exception):
            if executor is not None:
                await executor.close()
            await self._kernels.discard(kernel)

    async def close(self) -> None:
        await self._pool.close()
        for kernel in list(self._children.values()):
            await self._shut_down(kernel)
