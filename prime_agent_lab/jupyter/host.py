"""The agent host inside jupyter_server: which agent is on which notebook and kernel.

It resolves a notebook's live document and kernel, keeps one kernel executor per kernel, starts
turns, and answers bridge calls from agent kernels.
"""

from __future__ import annotations

import asyncio
import logging
import posixpath
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..adapters.kernel_executor import KernelExecutor, bridge_setup_code
from ..core.agent import Agent, AgentConfig, TurnInProgress
from ..core.bridge import BridgeService
from ..core.bridge_ops import register_session_operations
from ..core.events import EventBus
from ..core.ports import ModelProvider
from ..core.recovery import close_interrupted_turn
from ..core.redaction import SECRET_ENV_VARS, kernel_environment
from ..core.sessions import SessionError, SessionRepository
from .live_notebook import LiveNotebook

log = logging.getLogger(__name__)


class HostError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class HostSettings:
    provider_name: str
    model: str | None
    agent: AgentConfig
    notebook_output_cap: int
    kernel_name: str
    bridge_url: Callable[[], str]
    kernel_env_strip: tuple[str, ...] = SECRET_ENV_VARS


def normalize_notebook_path(path: str) -> str:
    """A clean API path relative to the server root; path tricks are refused."""
    if not isinstance(path, str) or not path.strip():
        raise HostError(400, "notebook_path is required")
    cleaned = path.strip().replace("\\", "/")
    if cleaned.startswith("/") or "\x00" in cleaned:
        raise HostError(400, f"notebook_path must be relative to the server root: {path!r}")
    parts = [p for p in cleaned.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise HostError(400, f"notebook_path may not leave the server root: {path!r}")
    normalized = posixpath.join(*parts) if parts else ""
    if not normalized.endswith(".ipynb"):
        raise HostError(400, f"not a notebook (.ipynb): {path!r}")
    return normalized


class AgentHost:
    def __init__(
        self,
        serverapp: Any,
        repository: SessionRepository,
        settings: HostSettings,
        provider_factory: Any,
    ) -> None:
        self.serverapp = serverapp
        self.repository = repository
        self.settings = settings
        self._provider_factory = provider_factory
        self.agents: dict[str, Agent] = {}
        self.bindings: dict[str, str] = {}  # notebook path -> kernel id, reported by the UI
        self._kernel_session: dict[str, str] = {}  # kernel id -> session id
        self._executors: dict[str, KernelExecutor] = {}
        self._attach_lock = asyncio.Lock()
        self._background: set[asyncio.Task[Any]] = set()
        self.bridge = BridgeService(self._kernel_key, self._kernel_session.get)
        register_session_operations(self.bridge, lambda sid: self.agent(sid).session)

    # ------------------------------------------------------------ kernels

    @property
    def _kernel_manager(self) -> Any:
        return self.serverapp.kernel_manager

    def _kernel_key(self, kernel_id: str) -> bytes | None:
        if kernel_id not in self._kernel_manager:
            return None
        key = self._kernel_manager.get_kernel(kernel_id).session.key
        return bytes(key) if key else None

    def bind(self, path: str, kernel_id: str) -> None:
        path = normalize_notebook_path(path)
        if kernel_id not in self._kernel_manager:
            raise HostError(404, f"no running kernel {kernel_id!r}")
        self.bindings[path] = kernel_id

    async def resolve_kernel(self, path: str, hint: str | None = None) -> str:
        """The notebook's kernel: the UI's report first, then the sessions API, else a new one."""
        for candidate in (hint, self.bindings.get(path)):
            if candidate and candidate in self._kernel_manager:
                self.bindings[path] = candidate
                return candidate
        sessions = await self.serverapp.session_manager.list_sessions()
        for session in sessions:
            kernel = session.get("kernel") or {}
            if session.get("path") == path and kernel.get("id") in self._kernel_manager:
                self.bindings[path] = kernel["id"]
                return str(kernel["id"])
        kernel_id = await self._start_notebook_kernel(path)
        self.bindings[path] = kernel_id
        return kernel_id

    async def _start_notebook_kernel(self, path: str) -> str:
        """Start the notebook's kernel (as its Jupyter session, which the browser later reuses)
        without the provider key variables in its environment."""
        sessions = self.serverapp.session_manager
        name = posixpath.basename(path)
        env = {
            **kernel_environment(self.settings.kernel_env_strip),
            "JPY_SESSION_NAME": sessions.get_kernel_env(path, name)["JPY_SESSION_NAME"],
        }
        kernel_path = await _maybe_await(self.serverapp.contents_manager.get_kernel_path(path))
        kernel_id = await self._kernel_manager.start_kernel(
            path=kernel_path, kernel_name=self.settings.kernel_name, env=env
        )
        model = await sessions.create_session(
            path=path, name=name, type="notebook", kernel_id=kernel_id
        )
        return str(model["kernel"]["id"])

    def executor(self, kernel_id: str) -> KernelExecutor:
        executor = self._executors.get(kernel_id)
        if executor is None:
            km = self._kernel_manager.get_kernel(kernel_id)
            executor = KernelExecutor(
                km,
                kernel_id,
                lambda: self._setup_code(kernel_id),
                is_managed=lambda: kernel_id in self._kernel_manager,
            )
            self._executors[kernel_id] = executor
        return executor

    def _setup_code(self, kernel_id: str) -> str:
        return bridge_setup_code(self.settings.bridge_url(), kernel_id)

    def _forget_dead_executors(self) -> None:
        for kernel_id in [k for k in self._executors if k not in self._kernel_manager]:
            executor = self._executors.pop(kernel_id)
            self._spawn(executor.close())
            self._kernel_session.pop(kernel_id, None)

    # ------------------------------------------------------------ agents

    def _provider(self) -> ModelProvider:
        return self._provider_factory()

    async def attach(
        self,
        notebook_path: str,
        kernel_id: str | None = None,
        session_id: str | None = None,
        new: bool = False,
    ) -> Agent:
        path = normalize_notebook_path(notebook_path)
        contents = self.serverapp.contents_manager
        if not await _maybe_await(contents.file_exists(path)):
            raise HostError(404, f"no notebook at {path!r}")
        async with self._attach_lock:
            self._forget_dead_executors()
            agent = self._find_agent(path, session_id, new)
            opened = agent is None
            if agent is None:
                agent = self._open_agent(path, session_id, new)
                await close_interrupted_turn(
                    agent.session,
                    agent.notebook,
                    output_cap=agent.config.output_cap,
                    accepts_images=agent.config.accepts_images,
                    redactor=agent.redactor,
                )
            if not agent.running:  # a turn in flight keeps the kernel it started on
                try:
                    self._use_kernel(agent, await self.resolve_kernel(path, kernel_id))
                except HostError:
                    if opened:
                        self.agents.pop(agent.session_id, None)
                    raise
            return agent

    def _find_agent(self, path: str, session_id: str | None, new: bool) -> Agent | None:
        if session_id is not None:
            agent = self.agents.get(session_id)
            if agent is not None and agent.notebook.path != path:
                raise HostError(409, f"session {session_id} belongs to {agent.notebook.path}")
            return agent
        if new:
            return None
        current = [a for a in self.agents.values() if a.notebook.path == path]
        return max(
            current,
            key=lambda a: a.session.entries[-1]["ts"] if a.session.entries else "",
            default=None,
        )

    def _open_agent(self, path: str, session_id: str | None, new: bool) -> Agent:
        provider = self._provider()
        if session_id is None and not new:
            session_id = self.repository.latest_for_notebook(path)
        if session_id is not None:
            try:
                session = self.repository.load(session_id)
            except SessionError as exc:
                raise HostError(404, str(exc)) from None
            if session.header.get("notebook_path") != path:
                raise HostError(
                    409, f"session {session_id} belongs to {session.header.get('notebook_path')}"
                )
        else:
            session = self.repository.create(
                notebook_path=path, provider=provider.name, model=provider.model
            )
        notebook = LiveNotebook(self._ydoc_extension(), path, self.settings.notebook_output_cap)
        agent = Agent(
            session,
            provider,
            notebook,
            kernel=_NoKernelYet(),
            config=self.settings.agent,
            events=EventBus(session.session_id),
        )
        self.agents[session.session_id] = agent
        return agent

    def _use_kernel(self, agent: Agent, kernel_id: str) -> None:
        """Make `agent` the one agent of this kernel (bridge calls from it act as its session)."""
        holder = self.agents.get(self._kernel_session.get(kernel_id, ""))
        if holder is not None and holder is not agent:
            if holder.running:
                raise HostError(
                    409,
                    f"session {holder.session_id} is running a turn on this notebook's kernel; "
                    "stop it before switching sessions",
                )
            self._detach(holder)
        current = getattr(agent.kernel, "kernel_id", None)
        if current and current != kernel_id:
            self._kernel_session.pop(current, None)
        executor = self.executor(kernel_id)
        agent.kernel = executor
        self._kernel_session[kernel_id] = agent.session_id
        # Connect and load the kernel package now, while the user is still typing.
        self._spawn(self._prepare(executor))

    def _detach(self, agent: Agent) -> None:
        """Forget an idle agent; its session stays on disk and can be attached again."""
        self.agents.pop(agent.session_id, None)
        kernel_id = getattr(agent.kernel, "kernel_id", "")
        if self._kernel_session.get(kernel_id) == agent.session_id:
            del self._kernel_session[kernel_id]
        agent.events.emit("status", status="inactive")
        self._spawn(_close_provider(agent.provider))

    async def _prepare(self, executor: KernelExecutor) -> None:
        try:
            await executor.prepare()
        except Exception:
            log.warning(
                "preparing kernel %s failed; retried at the first cell",
                executor.kernel_id,
                exc_info=True,
            )

    def _ydoc_extension(self) -> Any:
        ext = self.serverapp.web_app.settings.get("jupyter_server_ydoc")
        if ext is None:
            raise HostError(
                500,
                "jupyter-collaboration is not enabled: Prime Agent Lab writes agent cells into the "
                "live notebook through it (pip install jupyter-collaboration)",
            )
        return ext

    def agent(self, session_id: str) -> Agent:
        agent = self.agents.get(session_id)
        if agent is None:
            raise HostError(404, f"no attached session {session_id!r}; attach it first")
        return agent

    async def send(self, session_id: str, text: str) -> int:
        if not isinstance(text, str) or not text.strip():
            raise HostError(400, "message text is required")
        agent = self.agent(session_id)
        if agent.running:
            raise HostError(409, "the agent is already working on a turn; stop it or wait")
        kernel_id = getattr(agent.kernel, "kernel_id", None)
        if not kernel_id or kernel_id not in self._kernel_manager:
            # The user shut the kernel down or switched it: find the notebook's kernel again.
            async with self._attach_lock:
                self._forget_dead_executors()
                self._use_kernel(agent, await self.resolve_kernel(agent.notebook.path))
        try:
            turn, _task = agent.start_turn(text)
        except TurnInProgress as exc:
            raise HostError(409, str(exc)) from None
        return turn

    async def stop(self, session_id: str) -> bool:
        return await self.agent(session_id).stop()

    def info(self, agent: Agent) -> dict[str, Any]:
        provider, model = agent.provider.name, agent.provider.model
        entries = agent.session.entries
        return {
            "session_id": agent.session_id,
            "notebook_path": agent.notebook.path,
            "kernel_id": getattr(agent.kernel, "kernel_id", None),
            "provider": provider,
            "model": model,
            "status": "running" if agent.running else "idle",
            "turns": agent.session.turns(),
            "created": agent.session.header.get("created"),
            "updated": entries[-1]["ts"] if entries else agent.session.header.get("created"),
            "seq": agent.events.seq,
        }

    def list_sessions(self) -> list[dict[str, Any]]:
        out = []
        for summary in self.repository.summaries():
            agent = self.agents.get(summary.session_id)
            if agent is not None:
                out.append(self.info(agent))
                continue
            out.append(
                {
                    "session_id": summary.session_id,
                    "notebook_path": summary.notebook_path,
                    "kernel_id": None,
                    "provider": summary.provider,
                    "model": summary.model,
                    "status": "inactive",
                    "turns": summary.turns,
                    "created": summary.created,
                    "updated": summary.updated,
                }
            )
        return out

    # ------------------------------------------------------------ shutdown

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def shutdown(self) -> None:
        for agent in list(self.agents.values()):
            await agent.stop()
            await _close_provider(agent.provider)
        for executor in self._executors.values():
            await executor.close()
        self._executors.clear()


class _NoKernelYet:
    """Placeholder until attach() resolves the notebook's kernel (never executes)."""

    kernel_id = ""

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("no kernel resolved for this agent yet")

    async def interrupt(self) -> None:
        return None


async def _close_provider(provider: ModelProvider) -> None:
    """Providers with an SDK client hold HTTP connections; release them."""
    close = getattr(provider, "aclose", None)
    if close is not None:
        await close()


async def _maybe_await(value: Any) -> Any:
    if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future):
        return await value
    return value
