"""Everything a headless run needs around the agent loop: notebook files, a kernel started while
the model is thinking, a bridge server (loopback unless `--bridge-listen` says otherwise), and the
session store in `.prime-agent/`. Kernels are the fleet's (adapters/kernel_fleet.py), over the
CLI's `LocalBackend`, or a `GatewayBackend` when a gateway URL is set (`--gateway-url`,
`JUPYTER_GATEWAY_URL`)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tornado.httpserver import HTTPServer
from tornado.log import access_log
from tornado.netutil import bind_sockets
from tornado.web import Application, RequestHandler

from .adapters.bridge_http import standalone_routes
from .adapters.file_notebook import FileNotebook, FileNotebooks
from .adapters.host_environment import HostEnvironment
from .adapters.kernel_fleet import KernelFleet
from .adapters.kernel_source import KernelStartFailed
from .adapters.local_kernels import LocalBackend, LocalKernels
from .adapters.model_choice import ModelChoice
from .core.agent import Agent, TurnOutcome
from .core.autonomy_config import Budgets
from .core.entry_types import autonomy_line, plural
from .core.events import Event, EventBus
from .core.fingerprint import own_output_files
from .core.host_port import host_and_port
from .core.pending_kernel import PendingKernel
from .core.ports import KernelPort, ModelProvider
from .core.runtime import AgentRuntime
from .core.session_trust import sign_session
from .core.sessions import SessionLog, SessionRepository
from .core.settings import CLI, DECLARED, Settings

if TYPE_CHECKING:
    from .adapters.gateway_kernels import GatewayBackend


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
        trust_project: bool = False,
        **overrides: Any,
    ) -> None:
        """`settings` (the defaults when None) with `overrides` of declared settings
        (`cell_timeout=60`), spelled for the CLI in messages. `keys`: provider keys held outside
        the environment (cli.py). `trust`: the user trusts the continued session's folder
        (docs/trust.md). `trust_project`: the user trusts the project files found
        (docs/project-context.md)."""
        unknown = sorted(set(overrides) - set(DECLARED))
        if unknown:
            raise TypeError(f"HeadlessRun: no such setting: {', '.join(unknown)}")
        self.settings = dataclasses.replace(settings or Settings(), host=CLI, **overrides)
        self.cwd = cwd
        self._trust = trust
        self._trust_project = trust_project
        self.project_lines: list[str] = []  # about the project files, for stderr
        self._notebook_name = notebook
        self.notebook_path = cwd / notebook
        self.repository = SessionRepository(cwd / ".prime-agent" / "sessions")
        self._session_id = session_id
        self._resume = resume
        self.session_dir: Path | None = None
        self.snapshot_failures: list[str] = []  # snapshots that could not be saved at the end
        self.kernel_id = ""  # the root's kernel, once launched
        self._kernel: PendingKernel | None = None  # the root's kernel, booting at first
        self._server: HTTPServer | None = None
        self._agent: Agent | None = None
        self.recovered_turn: int | None = None  # a turn cut by a crash, closed on start
        self.bridge_url = ""
        self.backend = kernel_backend(self.settings, cwd)
        self.fleet = KernelFleet(
            self.backend, lambda: self.bridge_url, self.settings.kernel_pool_size
        )
        self.notebooks = FileNotebooks(cwd, self._file_notebook)  # flushed at the end
        self.choice = ModelChoice(lambda: self.settings, keys or {})
        environment = HostEnvironment(self.fleet, self.choice, self.notebooks)
        self.runtime = AgentRuntime(self.repository, environment, self.settings)
        self.runtime.autonomy.root = cwd  # gates run in the run's folder
        self.runtime.project.root = cwd  # context files up to here
        self.runtime.project.notify = False  # the CLI names untrusted files on stderr
        self.runtime.autonomy.recorded = False  # the flags say whether a run is autonomous
        self.fleet.serve(self.runtime)
        self.runtime.start()  # messages queued by an earlier run wait again

    @property
    def agent(self) -> Agent:
        assert self._agent is not None, "start() first"
        return self._agent

    async def start(
        self,
        listener: Callable[[Event], None],
        on_session: Callable[[ModelProvider, SessionLog], None] | None = None,
    ) -> None:
        """`on_session`: told the provider and the session before the agent's first event."""
        # Launch the kernel process first (a bad kernel name fails here, before anything else):
        # it boots on the other core while this process imports the model SDK (up to a second)
        # and the model writes its first answer.
        try:
            self.kernel_id = await self.backend.launch()
        except KernelStartFailed as exc:
            raise KernelStartError(str(exc)) from exc.__cause__
        provider = self.choice.default()
        notebook = await self.notebooks.open(self._notebook_name)
        session = self._open_session(provider)
        self.session_dir = session.directory
        if on_session is not None:
            on_session(provider, session)
        if self._trust:
            await asyncio.to_thread(sign_session, self.runtime, session.session_id)
        self.project_lines = await asyncio.to_thread(
            self.runtime.project.cli_lines, session.notebook_path, self._trust_project
        )
        self.bridge_url = self._start_bridge_server()
        self._kernel = self._root_kernel(session.session_id)
        events = EventBus(session.session_id)
        events.add_listener(listener)
        self._agent, self.recovered_turn = await self.runtime.start_agent(
            session, provider, notebook, self._kernel, events
        )
        self.runtime.deliver_recovered()

    def _root_kernel(self, session_id: str) -> PendingKernel:
        """The root's kernel port: the kernel was launched first thing and boots while the
        model writes its first answer; the first cell waits for it."""
        executor = self.fleet.executor(self.kernel_id)

        async def boot() -> KernelPort:
            await executor.prepare()
            return executor

        return PendingKernel(
            boot(),
            on_ready=lambda kernel: self.runtime.kernel_ready(session_id, kernel),
            what=f"the kernel {self.settings.kernel_name!r}",
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

    def start_autonomy(self) -> None:
        """The task runs as an autonomous run with the settings' budgets and gates, not recorded
        in the session (a later run without `--autonomous` is not autonomous). The files this
        process's output goes to (`> out.jsonl` in the folder) are no change of the workspace."""
        self.runtime.autonomy.unwatched = own_output_files()
        self.runtime.autonomy.configure(
            self.agent,
            True,
            Budgets.of(self.settings),
            list(self.settings.autonomous_gates),
            persist=False,
        )

    def autonomy_end(self) -> dict[str, Any] | None:
        """How the autonomous run ended: its `reason`, what it `used` and the `line` that says
        so with the budgets; None when no run ended."""
        ended = self.runtime.autonomy.run(self.agent.session_id)
        entry = self.agent.session.last_of("autonomy")
        if ended is None or not ended.ended or entry is None:
            return None
        budgets = ended.config.budgets
        turns = plural(budgets.max_turns, "turn")
        line = (
            f"{autonomy_line(entry)} (reason {ended.reason}; budgets {turns}, "
            f"{budgets.max_tokens:,} tokens, {budgets.timeout_minutes:g} min)"
        )
        used = dict(entry.get("used") or {})
        return {"reason": ended.reason, "used": used, "line": line[0].lower() + line[1:]}

    def _file_notebook(self, file: Path) -> FileNotebook:
        spec = self.backend.spec()
        return FileNotebook(
            file,
            self.settings.notebook_output_cap,
            kernel_name=self.settings.kernel_name,
            kernel_display_name=spec.display_name,
            kernel_language=spec.language,
        )

    def _open_session(self, provider: ModelProvider) -> SessionLog:
        notebook = session_notebook(self.cwd, self.notebook_path)
        session_id = self._session_id
        if session_id is None and self._resume:
            session_id = self.repository.latest_for_notebook(notebook)
            if session_id is None:
                raise FileNotFoundError(f"cannot continue: no session for {notebook} yet")
        if session_id is not None:
            return self.repository.load(session_id)
        return self.runtime.create_session(notebook, provider)

    def kernel_source(self) -> dict[str, str]:
        """Where the run's kernels come from: `{"source": "local"}`, or `"gateway"` and its
        `url` (without user info or query, which may hold a credential)."""
        name = self.settings.kernel_name
        if isinstance(self.backend, LocalBackend):
            return {"source": "local", "kernel_name": name}
        return {"source": "gateway", "url": self.backend.url, "kernel_name": name}

    def _start_bridge_server(self) -> str:
        try:
            host, port = host_and_port(self.settings.bridge_listen)
        except ValueError as exc:
            raise ValueError(f"{self.settings.spell('bridge_listen')} {exc}") from None
        try:
            sockets = bind_sockets(port, host)
        except OSError as exc:
            listen = self.settings.spell("bridge_listen")
            raise OSError(f"the bridge cannot listen on {host}:{port} ({listen}): {exc}") from exc
        bound_port = sockets[0].getsockname()[1]
        app = Application(standalone_routes(self.runtime.bridge), log_function=_log_request)
        self._server = HTTPServer(app)
        self._server.add_sockets(sockets)
        if self.settings.bridge_url:
            return self.settings.bridge_url.rstrip("/")
        reached = "127.0.0.1" if host in ("", "0.0.0.0", "::") else host
        if ":" in reached:
            reached = f"[{reached}]"
        return f"http://{reached}:{bound_port}/prime-agent/bridge"

    async def close(self) -> None:
        """Everything is closed even when a notebook cannot be saved (a full disk); the first
        such failure is raised at the end."""
        # a debounced snapshot would not fire in time; what fails is reported by the caller
        self.snapshot_failures = (await self.runtime.close()).failures()
        if self._kernel is not None:  # a root that never started: its boot is not waited for
            await self._kernel.release()
        unsaved = self.notebooks.flush()
        if self._server is not None:
            self._server.stop()
        if unsaved:
            raise unsaved[0]


def kernel_backend(settings: Settings, cwd: Path) -> LocalBackend | GatewayBackend:
    """The run's kernels: on the gateway when a URL is set (the flag, else
    JUPYTER_GATEWAY_URL), else local processes started in `cwd`."""
    if settings.gateway_url or os.environ.get("JUPYTER_GATEWAY_URL"):
        # jupyter_server's gateway code is imported only for a gateway run
        from .adapters.gateway_kernels import GatewayBackend, configure_gateway

        gateway = configure_gateway(settings.gateway_url, settings.gateway_auth_token)
        if gateway is not None:
            return GatewayBackend(gateway, settings.kernel_name, settings.kernel_env_strip)
    kernels = LocalKernels(settings.kernel_name, cwd, settings.kernel_env_strip)
    return LocalBackend(kernels)


def session_notebook(cwd: Path, notebook_path: Path) -> str:
    """How a session names its notebook: relative to the run's folder when inside it."""
    try:
        return notebook_path.resolve().relative_to(cwd.resolve()).as_posix()
    except ValueError:
        return str(notebook_path.resolve())


def _log_request(handler: RequestHandler) -> None:
    """Tornado's access log, but a refused bridge call (4xx) at debug: the cell got the refusal
    (an unknown MCP server, say), the CLI's stderr need not say it again."""
    status = handler.get_status()
    level = logging.DEBUG if status < 500 else logging.ERROR
    request = handler.request
    access_log.log(
        level, "%d %s %.2fms", status, handler._request_summary(), 1000 * request.request_time()
    )
