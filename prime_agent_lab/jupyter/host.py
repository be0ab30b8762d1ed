"""The agent host inside jupyter_server: which agent is on which notebook and kernel.

It resolves a notebook's live document and kernel, keeps one kernel executor per kernel, starts
turns, and answers bridge calls from agent kernels.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import posixpath
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from tornado import web

from ..adapters.kernel_calls import set_working_directory, working_directory_code
from ..adapters.kernel_executor import KernelExecutor, bridge_setup_code
from ..adapters.kernel_pool import KernelPool
from ..adapters.kernel_startup import load_package_at_start
from ..core import branching
from ..core.agent import Agent, TurnInProgress
from ..core.bridge import BridgeService
from ..core.events import EventBus
from ..core.harness.refiner import RefineError, Refiner
from ..core.jsonfile import MAX_NOTEBOOK_BYTES, too_large
from ..core.pending_kernel import PendingKernel
from ..core.ports import KernelPort, ModelProvider, NotebookPort, NotebookUnavailable
from ..core.redaction import kernel_environment
from ..core.runtime import AgentRuntime, choose_model, close_provider
from ..core.sessions import (
    BrokenSession,
    SessionError,
    SessionLog,
    SessionRepository,
    SessionSummary,
)
from ..core.settings import Settings
from ..core.shutdown import stop_and_snapshot
from ..core.stop_cause import SERVER_SHUTDOWN, USER_STOP, StopCause
from ..core.text import shorten
from ..core.wire import TrustState
from .live_notebook import LiveNotebook
from .server_kernels import HandOutFailed, ServerKernels, hand_to_notebook

log = logging.getLogger(__name__)

KERNEL_ACTIONS_SCHEMA = "https://events.jupyter.org/jupyter_server/kernel_actions/v1"


class HostError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True, kw_only=True)
class HostSettings(Settings):
    """The declared settings (`provider` and `model` as the provider resolved them, `harness_dir`
    resolved) and what the server works out for itself."""

    bridge_address: Callable[[], str]  # the URL kernels call the host on, once the server listens
    provider_for: Callable[[str, str], ModelProvider] | None = None  # (provider, model)


def normalize_notebook_path(path: str) -> str:
    """A clean API path relative to the server root; path tricks are refused."""
    if not isinstance(path, str) or not path.strip():
        raise HostError(400, "notebook_path is required")
    cleaned = path.strip().replace("\\", "/")
    if cleaned.startswith("/") or "\x00" in cleaned:
        raise HostError(400, f"notebook_path must be relative to the server root: {shorten(path)}")
    parts = [p for p in cleaned.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise HostError(400, f"notebook_path may not leave the server root: {shorten(path)}")
    normalized = posixpath.join(*parts) if parts else ""
    if not normalized.endswith(".ipynb"):
        raise HostError(400, f"not a notebook (.ipynb): {shorten(path)}")
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
        self._provider_factory = provider_factory
        self._environment = _ServerEnvironment(self, settings.kernel_pool_size)
        self.runtime = AgentRuntime(repository, self._environment, settings)
        self.settings = settings
        self.bindings: dict[str, str] = {}  # notebook path -> kernel id, reported by the UI
        self._executors: dict[str, KernelExecutor] = {}
        # kernel id -> a child's working directory, set again when its kernel restarts
        self.kernel_directories: dict[str, str] = {}
        # One lock per notebook: attaching one notebook (which may start its kernel) never
        # holds up another notebook's agent.
        self._notebook_locks: dict[str, asyncio.Lock] = {}
        self._auto_restarting: set[str] = set()  # kernels the server restarts after a death
        self._watch_kernel_restarts()

    # ------------------------------------------------------------ kernel restarts

    def _watch_kernel_restarts(self) -> None:
        """Tell the agent of a kernel whenever that kernel restarts and no agent cell of its
        will report it: JupyterLab's Kernel menu, another client, the server's auto-restart."""
        logger = getattr(self.serverapp, "event_logger", None)
        if logger is None:
            return
        logger.add_listener(schema_id=KERNEL_ACTIONS_SCHEMA, listener=self._on_kernel_action)

    async def _on_kernel_action(self, logger: Any, schema_id: str, data: dict[str, Any]) -> None:
        if data.get("action") != "restart" or data.get("status") != "success":
            return
        kernel_id = str(data.get("kernel_id", ""))
        auto = kernel_id in self._auto_restarting
        self._auto_restarting.discard(kernel_id)
        agent = self.runtime.agent_on_kernel(kernel_id)
        executor = self._executors.get(kernel_id)
        if agent is not None and executor is not None:
            # The researcher's own cells use `rlm`, `history`, ... and the Harness view waits
            # for them: load the kernel package into the new process now, not at the next
            # agent cell (a no-op when that process has it already).
            self.runtime.spawn(self._prepare(executor))
        if agent is None or (executor is not None and executor.executing):
            return
        if executor is not None and executor.knows_current_process():
            return  # the cell that saw the death reported it; this event came in late
        if executor is not None and executor.restarting:
            kind, text = "kernel_restarted", self._stopped_restart_notice(agent.session_id)
        elif auto:
            kind, text = "kernel_died", self._death_notice(agent.session_id)
        else:
            kind, text = (
                "kernel_restarted_externally",
                (
                    "The kernel was restarted (Kernel menu or another client): all variables and "
                    "imports are gone."
                ),
            )
        agent.notice(kind, text)

    def _stopped_restart_notice(self, session_id: str) -> str:
        why = "The agent restarted the kernel because its stopped cell ignored the interrupt"
        if self.runtime.snapshots.has_snapshot(session_id):
            # the restore notice that follows lists what came back
            return (
                f"{why}: its variables and imports are being restored from the last kernel "
                "snapshot; what was set after it is gone."
            )
        return f"{why}: all variables and imports are gone (yours too)."

    def _death_notice(self, session_id: str) -> str:
        if self.runtime.snapshots.has_snapshot(session_id):
            # the restore notice that follows lists what came back
            return (
                "The kernel died and was restarted: its variables and imports are being "
                "restored from the last kernel snapshot; what was set after it is gone."
            )
        return "The kernel died and was restarted: all variables and imports are gone."

    def _track_auto_restarts(self, kernel_id: str) -> None:
        km = self._kernel_manager.get_kernel(kernel_id)
        km.add_restart_callback(lambda: self._auto_restarting.add(kernel_id), "restart")

    # ------------------------------------------------------------ kernels

    @property
    def _kernel_manager(self) -> Any:
        return self.serverapp.kernel_manager

    @property
    def settings(self) -> HostSettings:
        return self._settings

    @settings.setter
    def settings(self, settings: HostSettings) -> None:
        self._settings = self.runtime.settings = settings

    @property
    def agents(self) -> dict[str, Agent]:
        return self.runtime.agents

    @property
    def bridge(self) -> BridgeService:
        return self.runtime.bridge

    def kernel_key(self, kernel_id: str) -> bytes | None:
        if kernel_id not in self._kernel_manager:
            return None
        key = self._kernel_manager.get_kernel(kernel_id).session.key
        return bytes(key) if key else None

    def bind(self, path: str, kernel_id: str) -> None:
        path = normalize_notebook_path(path)
        if kernel_id not in self._kernel_manager:
            raise HostError(404, f"no running kernel {shorten(kernel_id)}")
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
            self._track_auto_restarts(kernel_id)
        return executor

    def forget_executor(self, kernel_id: str) -> None:
        executor = self._executors.pop(kernel_id, None)
        if executor is not None:
            self.runtime.spawn(executor.close())

    def _setup_code(self, kernel_id: str) -> str:
        """The silent cell that sets up this kernel process. Later processes (after any
        restart) also bind the kernel API as they start, before anyone's first cell."""
        self._arrange_next_start(kernel_id)
        directory = self.kernel_directories.get(kernel_id)
        chdir = working_directory_code(directory) if directory else ""
        return bridge_setup_code(self.settings.bridge_address(), kernel_id) + chdir

    def set_kernel_directory(self, kernel_id: str, directory: str) -> None:
        """A child's kernel works in `directory`, in this process (the caller moves it) and in
        every later one: a pooled kernel was set up before it had a folder."""
        self.kernel_directories[kernel_id] = directory
        self._arrange_next_start(kernel_id)

    def _arrange_next_start(self, kernel_id: str) -> None:
        directory = self.kernel_directories.get(kernel_id)
        with contextlib.suppress(KeyError):  # a kernel shut down meanwhile: no next start
            manager = self._kernel_manager.get_kernel(kernel_id)
            load_package_at_start(manager, self.settings.bridge_address(), kernel_id, directory)

    def _forget_dead_executors(self) -> None:
        for kernel_id in [k for k in self._executors if k not in self._kernel_manager]:
            executor = self._executors.pop(kernel_id)
            self.runtime.spawn(executor.close())
            self.runtime.unbind_kernel(kernel_id)

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
        await self._check_notebook(path)
        async with self._notebook_lock(path):
            self._forget_dead_executors()
            for attached in self.agents.values():
                if isinstance(attached.notebook, LiveNotebook):
                    attached.notebook.follow_move()
            agent = self._find_agent(path, session_id, new)
            if agent is None:
                return await self._open_agent(path, session_id, new, kernel_id)
            if not agent.running and not _kernel_arriving(agent):
                # a turn in flight keeps the kernel it started on
                self._use_kernel(agent, await self.resolve_kernel(path, kernel_id))
            return agent

    def _notebook_lock(self, path: str) -> asyncio.Lock:
        return self._notebook_locks.setdefault(path, asyncio.Lock())

    async def _check_notebook(self, path: str) -> None:
        """Refuse what the contents manager would refuse later, before any kernel starts."""
        contents = self.serverapp.contents_manager
        if not await _maybe_await(contents.file_exists(path)):
            raise HostError(404, f"no notebook at {shorten(path)}")
        if not contents.allow_hidden and await _maybe_await(contents.is_hidden(path)):
            raise HostError(
                403,
                f"{shorten(path)} is hidden, and this server does not serve hidden files "
                "(ContentsManager.allow_hidden)",
            )
        try:
            size = (await _maybe_await(contents.get(path, content=False))).get("size")
            if isinstance(size, int) and size > MAX_NOTEBOOK_BYTES:  # not read at all
                raise web.HTTPError(413, f"it {too_large(size, MAX_NOTEBOOK_BYTES)}")
            await _maybe_await(contents.get(path, content=True, type="notebook"))
        except web.HTTPError as exc:
            reason = http_error_text(exc)
            raise HostError(400, f"cannot open {shorten(path)} as a notebook: {reason}") from None

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

    async def _open_agent(
        self, path: str, session_id: str | None, new: bool, kernel_hint: str | None
    ) -> Agent:
        """An agent on a session from disk (or a new one). Nothing is written and no provider
        is left open unless the attach succeeds."""
        session = await self._existing_session(path, session_id, new)
        skipped = (
            []
            if session_id is not None or new
            else await asyncio.to_thread(
                self.repository.unreadable_newer,
                path,
                session.session_id if session is not None else None,
            )
        )
        ydoc = self._ydoc_extension()
        kernel_id = await self.resolve_kernel(path, kernel_hint)
        self._refuse_busy_kernel(kernel_id)
        provider = self._provider()
        agent: Agent | None = None
        try:
            if session is None:
                session = self.runtime.create_session(path, provider)
            notebook = self.live_notebook(path, ydoc)
            agent, _ = await self.runtime.start_agent(
                session, provider, notebook, _NoKernelYet(), EventBus(session.session_id)
            )
            self._follow_notebook(agent, notebook)
            self._use_kernel(agent, kernel_id)
            for damaged in skipped:  # never a silent switch to another session
                agent.notice(
                    "session_unreadable",
                    f"The session {damaged.session_id} of this notebook cannot be read "
                    f"({shorten(str(damaged.broken), 300)}); it is kept on disk as it is and "
                    "this is another session. Open it by id once the file is fixed.",
                )
        except BaseException:
            if agent is not None and self.agents.get(agent.session_id) is agent:
                del self.agents[agent.session_id]
            await close_provider(provider)
            raise
        return agent

    async def _existing_session(
        self, path: str, session_id: str | None, new: bool
    ) -> SessionLog | None:
        """The session to continue (read off the event loop), or None for a new one."""
        if session_id is None and not new:
            session_id = await asyncio.to_thread(self.repository.latest_for_notebook, path)
        if session_id is None:
            return None
        try:
            session = await asyncio.to_thread(self.repository.load, session_id)
        except BrokenSession as exc:
            raise HostError(409, f"{exc}; start a new session (its log is kept as it is)") from None
        except SessionError as exc:
            raise HostError(404, str(exc)) from None
        if session.notebook_path != path:
            owner = shorten(session.notebook_path)
            raise HostError(409, f"session {session_id} belongs to {owner}")
        return session

    def _refuse_busy_kernel(self, kernel_id: str) -> None:
        holder = self.runtime.agent_on_kernel(kernel_id)
        if holder is not None and holder.running:
            raise HostError(
                409,
                f"session {holder.session_id} is running a turn on this notebook's kernel; "
                "stop it before switching sessions",
            )

    def live_notebook(self, path: str, ydoc: Any = None) -> LiveNotebook:
        return LiveNotebook(
            ydoc if ydoc is not None else self._ydoc_extension(),
            path,
            self.settings.notebook_output_cap,
            file_ids=self.serverapp.web_app.settings.get("file_id_manager"),
            contents=self.serverapp.contents_manager,
        )

    def _follow_notebook(self, agent: Agent, notebook: LiveNotebook) -> None:
        """Renames move the agent along; what the notebook has to report reaches the session."""

        def moved(old: str, new: str) -> None:
            if old in self.bindings:
                self.bindings[new] = self.bindings.pop(old)
            agent.session.append("notebook_moved", old_path=old, path=new)
            agent.events.emit("notebook_moved", old_path=old, path=new)

        def notice(turn: int | None, kind: str, text: str) -> None:
            agent.notice(kind, text, turn=turn)

        notebook.on_moved = moved
        notebook.on_notice = notice
        notebook.turn_running = lambda: agent.running

    def _use_kernel(self, agent: Agent, kernel_id: str) -> None:
        """Make `agent` the one agent of this kernel (bridge calls from it act as its session)."""
        holder = self.runtime.agent_on_kernel(kernel_id)
        if holder is not None and holder is not agent:
            self._refuse_busy_kernel(kernel_id)
            self.runtime.detach(holder)
        executor = self.executor(kernel_id)
        self.runtime.bind_kernel(agent, executor)
        # Connect and load the kernel package now, while the user is still typing.
        self.runtime.spawn(self._prepare(executor))

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
            raise HostError(404, f"no attached session {shorten(session_id)}; attach it first")
        return agent

    async def send(self, session_id: str, text: str) -> int:
        if not isinstance(text, str) or not text.strip():
            raise HostError(400, "message text is required")
        limit = self.settings.max_message_chars
        if len(text) > limit:
            raise HostError(
                413,
                f"the message has {len(text):,} characters; the limit is {limit:,} "
                f"({self.settings.spell('max_message_chars')}). Put long input in a file or a "
                "variable and ask the agent to read it.",
            )
        agent = self.agent(session_id)
        if agent.running:
            raise HostError(409, "the agent is already working on a turn; stop it or wait")
        kernel_id = getattr(agent.kernel, "kernel_id", None)
        if not _kernel_arriving(agent) and (not kernel_id or kernel_id not in self._kernel_manager):
            # The user shut the kernel down or switched it: find the notebook's kernel again.
            async with self._notebook_lock(agent.notebook.path):
                self._forget_dead_executors()
                self._use_kernel(agent, await self.resolve_kernel(agent.notebook.path))
        try:
            turn, _task = agent.start_turn(text)
        except TurnInProgress as exc:
            raise HostError(409, str(exc)) from None
        return turn

    async def stop(self, session_id: str, tree: bool = False) -> bool:
        """Stop the agent's turn; with `tree`, its sub-agents' turns too ("stop all")."""
        agent = self.agent(session_id)
        return await (self.runtime.stop_tree(session_id) if tree else agent.stop())

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
            **self._family_info(agent.session_id),
        }

    def _family_info(self, session_id: str) -> dict[str, Any]:
        member = self.runtime.family.member(session_id)
        if member is None or member.parent_session_id is None:
            return {}
        return {"parent_session_id": member.parent_session_id, "name": member.name}

    async def list_sessions(self) -> list[dict[str, Any]]:
        """Every session on disk, newest first; damaged ones have status `broken` and a reason."""
        summaries = await asyncio.to_thread(self.repository.summaries)
        out = []
        for summary in summaries:
            agent = self.agents.get(summary.session_id)
            if agent is not None:
                out.append(self.info(agent))
            else:
                out.append({**_stored_info(summary), **self._family_info(summary.session_id)})
        return out

    # ------------------------------------------------------------ branching (docs/branching.md)

    async def session_tree(self, session_id: str) -> dict[str, Any]:
        session, _ = await self._branchable(session_id)
        return branching.tree(session)

    async def move_leaf(self, session_id: str, entry_id: object) -> dict[str, Any]:
        """Branch to an earlier point; the notebook's cells of other branches are marked."""
        session, agent = await self._branchable(session_id)
        running = agent is not None and agent.running
        with _branch_errors():
            move = branching.move_leaf(session, entry_id, running=running)
        marked = await self._mark_branches(session, agent)
        out: dict[str, Any] = {"leaf_id": move.leaf_id, "marked_cells": marked}
        if move.text is not None:
            out["text"] = move.text
        if agent is not None:
            # A page loaded later must not replay the abandoned turns' events over the transcript.
            agent.events.forget_replay()
            agent.events.emit("branch_moved", **out)
        return out

    async def fork(self, session_id: str, entry_id: object) -> dict[str, Any]:
        session, agent = await self._branchable(session_id)
        with _branch_errors():
            plan = branching.plan_fork(session, entry_id)
        return await self._write_copy(plan, agent)

    async def clone(self, session_id: str) -> dict[str, Any]:
        session, agent = await self._branchable(session_id)
        if agent is not None and agent.running:
            raise HostError(409, "the agent is working on a turn; stop it or wait before cloning")
        with _branch_errors():
            plan = branching.plan_clone(session)
        return await self._write_copy(plan, agent)

    async def _branchable(self, session_id: str) -> tuple[SessionLog, Agent | None]:
        """The attached agent's own log (it holds the leaf), else the log read from disk."""
        agent = self.agents.get(session_id)
        if agent is not None:
            return agent.session, agent
        try:
            return await asyncio.to_thread(self.repository.read, session_id), None
        except SessionError as exc:
            raise HostError(404, str(exc)) from None

    def _notebook_of(self, session: SessionLog, agent: Agent | None) -> LiveNotebook:
        if agent is not None and isinstance(agent.notebook, LiveNotebook):
            return agent.notebook
        return self.live_notebook(session.notebook_path)

    async def _mark_branches(self, session: SessionLog, agent: Agent | None) -> int:
        on, off = branching.cells_by_branch(session)
        try:
            return await self._notebook_of(session, agent).mark_branches(
                session.session_id, on, off
            )
        except NotebookUnavailable as exc:  # the record moved; the notebook is gone
            log.warning("cells of session %s not marked: %s", session.session_id, exc)
            return 0

    async def _write_copy(self, plan: branching.CopyPlan, agent: Agent | None) -> dict[str, Any]:
        try:
            cells = await self._notebook_of(plan.source, agent).cells()
        except NotebookUnavailable:
            cells = []
        return await branching.write_copy(
            self.repository, plan, cells, self._environment.create_child_notebook
        )

    # ------------------------------------------------------------ refine (docs/harness.md)

    def _refiner(self, session_id: str) -> Refiner:
        agent = self.agent(session_id)
        refiner = self.runtime.refiners.get(agent.session_id)
        if refiner is None:
            raise HostError(409, f"session {shorten(session_id)} cannot refine its harness")
        return refiner

    def refine(self, session_id: str, instructions: str | None, global_: bool) -> dict[str, Any]:
        """`/refine`: plan a refinement in the background; it applies at a turn boundary."""
        with _refine_errors():
            return self._refiner(session_id).schedule(instructions, global_, trigger="user")

    def _known_session(self, session_id: str) -> None:
        if session_id not in self.runtime.agents and not self.repository.exists(session_id):
            raise HostError(404, f"no session {shorten(session_id, 80)}")

    async def untrusted(self, session_id: str) -> TrustState:
        """What in the session's folder (and its sub-agents') this user did not sign."""
        self._known_session(session_id)
        items = await asyncio.to_thread(self.runtime.untrusted, session_id)
        return {"trusted": not items, "untrusted": [item.as_dict() for item in items]}

    async def trust(self, session_id: str) -> TrustState:
        """Trust the session and its sub-agents as they are now, and load what was held back."""
        self._known_session(session_id)
        signed = await self.runtime.trust(session_id)
        return {"trusted": True, "untrusted": [], "signed": [i.as_dict() for i in signed]}

    async def refinements(self, session_id: str) -> dict[str, Any]:
        """The refinement records of the session's local and the global store, oldest first,
        and what could not be read (`RefinementList`)."""
        records, problems = await asyncio.to_thread(self._refiner(session_id).read_history)
        answer: dict[str, Any] = {"refinements": records}
        if problems:
            answer["problems"] = problems
        return answer

    async def rollback_refinement(self, session_id: str, refinement_id: str) -> dict[str, Any]:
        with _refine_errors():
            return await self._refiner(session_id).rollback(refinement_id)

    async def delete_harness_entry(
        self, session_id: str, kind: str, entry_id: str, global_: bool = False
    ) -> dict[str, Any]:
        """A delete from the panel: applied at the next turn boundary (at once when idle) and
        recorded as a refinement, so it can be rolled back."""
        with _refine_errors():
            return await self._refiner(session_id).delete(kind, entry_id, global_)

    # ------------------------------------------------------------ shutdown

    async def shutdown(self) -> None:
        """The server stops: running turns end as `shutdown` and every loaded agent's kernel is
        snapshotted (within `shutdown_timeout`), then the agents and their kernels go."""
        report = await stop_and_snapshot(
            self.runtime, SERVER_SHUTDOWN, self.settings.shutdown_timeout
        )
        if report.stopped or report.snapshotted or report.skipped:
            logger = getattr(self.serverapp, "log", log)  # the server's log, shown at INFO
            logger.info("Prime Agent Lab shutdown: %s", report.summary())
        await self.runtime.shutdown()
        await self._environment.close()
        for executor in self._executors.values():
            await executor.close()
        self._executors.clear()


class _ServerEnvironment:
    """The server's side of the runtime: live documents, kernels of jupyter_server (sub-agents'
    from a pool), the configured providers."""

    def __init__(self, host: AgentHost, pool_size: int) -> None:
        self._host = host
        self._pool_size = pool_size
        self._pool: KernelPool[str] | None = None  # made at the first spawn
        self._children: set[str] = set()  # kernel ids handed to sub-agents

    @property
    def _settings(self) -> HostSettings:
        return self._host.settings

    def models(self) -> list[str]:
        settings = self._settings
        default = f"{settings.provider}/{settings.model}"
        return [default, *(m for m in settings.subagent_models if m != default)]

    def provider(self, model: str | None) -> ModelProvider:
        if model is None:
            return self._host._provider()
        name, chosen = choose_model(model, self.models())
        settings = self._settings
        if (name, chosen) == (settings.provider, settings.model):
            return self._host._provider()
        if settings.provider_for is None:
            raise ValueError(f"this server runs sub-agents on {settings.model!r} only")
        return settings.provider_for(name, chosen)

    def kernel_key(self, kernel_id: str) -> bytes | None:
        return self._host.kernel_key(kernel_id)

    async def create_child_notebook(self, path: str, cells: list[dict[str, Any]]) -> NotebookPort:
        contents = self._host.serverapp.contents_manager
        if await _maybe_await(contents.file_exists(path)):
            raise FileExistsError(path)
        folder = posixpath.dirname(path)
        if folder and not await _maybe_await(contents.dir_exists(folder)):
            await _maybe_await(contents.save({"type": "directory"}, folder))
        notebook = {
            "nbformat": 4,
            "nbformat_minor": 5,
            "metadata": {
                "kernelspec": {
                    "name": self._settings.kernel_name,
                    "display_name": self._settings.kernel_name,
                    "language": "python",
                },
                "language_info": {"name": "python"},
            },
            "cells": cells,
        }
        await _maybe_await(
            contents.save({"type": "notebook", "format": "json", "content": notebook}, path)
        )
        return self._host.live_notebook(path)

    async def open_notebook(self, path: str) -> NotebookPort:
        return self._host.live_notebook(path)

    async def start_child_kernel(self, notebook_path: str, cwd: str) -> KernelPort:
        serverapp = self._host.serverapp
        directory = serverapp.kernel_manager.cwd_for_path(cwd or "")
        opened = await self._opened_kernel(notebook_path, directory)
        if opened is not None:
            return opened
        kernel_id = await self._kernel_pool().take()
        self._children.add(kernel_id)
        try:
            self._host.set_kernel_directory(kernel_id, directory)
            executor = self._host.executor(kernel_id)
            await hand_to_notebook(
                serverapp, kernel_id, notebook_path, directory, run=executor.run_silently
            )
            self._host.bindings[notebook_path] = kernel_id
            await executor.prepare()  # done in the pool already, unless it restarted since
        except HandOutFailed:
            await self._shut_down(kernel_id)
            # A browser opened the notebook while the pooled kernel was on its way.
            opened = await self._opened_kernel(notebook_path, directory)
            if opened is None:
                raise
            return opened
        except BaseException:
            await self._shut_down(kernel_id)
            raise
        return executor

    async def _opened_kernel(self, notebook_path: str, directory: str) -> KernelPort | None:
        """The kernel of the notebook's Jupyter session (a user opened it), moved to the
        child's working directory; None when the notebook has no session."""
        sessions = self._host.serverapp.session_manager
        if not await sessions.session_exists(path=notebook_path):
            return None
        model = await sessions.get_session(path=notebook_path)
        kernel_id = model["kernel"]["id"]
        manager = self._host.serverapp.kernel_manager.get_kernel(kernel_id)
        self._host.set_kernel_directory(kernel_id, directory)
        try:
            await set_working_directory(manager, directory)
        except Exception as exc:  # the user's kernel still serves; relative paths differ
            log.warning("could not move the kernel of %s to %s: %s", notebook_path, directory, exc)
        executor = self._host.executor(kernel_id)
        await executor.prepare()
        return executor

    def _kernel_pool(self) -> KernelPool[str]:
        if self._pool is None:
            kernels = ServerKernels(
                self._host.serverapp, self._settings.kernel_name, self._settings.kernel_env_strip
            )

            async def start_prepared() -> str:
                """Started, connected and loaded with the kernel package while it waits."""
                kernel_id = await kernels.start()
                try:
                    await self._host.executor(kernel_id).prepare()
                except BaseException:
                    await self._shut_down(kernel_id)
                    raise
                return kernel_id

            self._pool = KernelPool(
                start_prepared, self._shut_down, size=self._pool_size, alive=kernels.alive
            )
        self._pool.fill()
        return self._pool

    def has_client(self, session_id: str, kernel_id: str) -> bool:
        """A chat subscribed to the agent's events, or a notebook tab on its kernel."""
        agent = self._host.agents.get(session_id)
        if agent is not None and agent.events.subscribers:
            return True
        connections = getattr(self._host.serverapp.kernel_manager, "_kernel_connections", {})
        return bool(kernel_id and connections.get(kernel_id, 0))

    async def release_kernel(self, kernel: KernelPort) -> None:
        if kernel.kernel_id in self._children:
            await self._shut_down(kernel.kernel_id)

    async def _shut_down(self, kernel_id: str) -> None:
        """A sub-agent's kernel goes with its Jupyter session."""
        self._children.discard(kernel_id)
        self._host.kernel_directories.pop(kernel_id, None)
        self._host.forget_executor(kernel_id)
        sessions = self._host.serverapp.session_manager
        with contextlib.suppress(Exception):
            for model in await sessions.list_sessions():
                if (model.get("kernel") or {}).get("id") == kernel_id:
                    await sessions.delete_session(model["id"])  # shuts the kernel down too
        kernels = self._host.serverapp.kernel_manager
        if kernel_id in kernels:
            with contextlib.suppress(Exception):
                await kernels.shutdown_kernel(kernel_id)

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()


class _NoKernelYet:
    """Placeholder until attach() resolves the notebook's kernel (never executes)."""

    kernel_id = ""

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("no kernel resolved for this agent yet")

    def stop_cell(self, cause: StopCause = USER_STOP) -> None:
        return None


@contextlib.contextmanager
def _branch_errors() -> Iterator[None]:
    try:
        yield
    except branching.BranchError as exc:
        raise HostError(exc.status, exc.message) from None


@contextlib.contextmanager
def _refine_errors() -> Iterator[None]:
    try:
        yield
    except RefineError as exc:
        raise HostError(exc.status, exc.message) from None


def _kernel_arriving(agent: Agent) -> bool:
    """A sub-agent's kernel is still being taken from the pool: the runtime hands it over."""
    return isinstance(agent.kernel, PendingKernel) and agent.kernel.kernel is None


def _stored_info(summary: SessionSummary) -> dict[str, Any]:
    """SessionInfo of a session on disk that no agent is attached to."""
    info: dict[str, Any] = {
        "session_id": summary.session_id,
        "notebook_path": summary.notebook_path,
        "kernel_id": None,
        "provider": summary.provider,
        "model": summary.model,
        "status": "inactive" if summary.broken is None else "broken",
        "turns": summary.turns,
        "created": summary.created,
        "updated": summary.updated,
    }
    if summary.broken is not None:
        info["reason"] = summary.broken
    return info


def http_error_text(exc: web.HTTPError) -> str:
    """An HTTPError's message as written: tornado doubles `%` in a message given without
    arguments (it formats `log_message % args` later), so format it back."""
    if not exc.log_message:
        return exc.reason or f"HTTP {exc.status_code}"
    try:
        return exc.log_message % exc.args
    except (TypeError, ValueError):
        return exc.log_message


async def _maybe_await(value: Any) -> Any:
    if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future):
        return await value
    return value
