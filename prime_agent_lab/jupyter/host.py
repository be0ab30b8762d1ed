"""The agent host inside jupyter_server: which agent is on which notebook and kernel.

It attaches agents to notebooks (their live documents and kernels), starts and stops turns, and
lists sessions. Kernels are the fleet's (adapters/kernel_fleet.py, over `ServerKernels`); branching
and the harness routes are in `host_branches.py` and `host_harness.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..adapters.host_environment import HostEnvironment
from ..adapters.kernel_fleet import KernelFleet
from ..adapters.model_choice import ModelChoice
from ..core.agent import Agent, TurnInProgress
from ..core.bridge import BridgeService
from ..core.events import EventBus
from ..core.model_ops import ModelSwitchError, model_list, switch_model
from ..core.pending_kernel import PendingKernel
from ..core.ports import ModelProvider
from ..core.runtime import AgentRuntime, close_provider
from ..core.session_list import LiveSession, SessionCatalog
from ..core.sessions import (
    BrokenSession,
    LinkedSession,
    SessionError,
    SessionLog,
    SessionRepository,
    SessionSummary,
)
from ..core.settings import Settings
from ..core.stop_cause import SERVER_SHUTDOWN, USER_STOP, StopCause
from ..core.text import shorten
from ..core.wire import ModelList
from .host_autonomy import HostAutonomy
from .host_branches import HostBranches
from .host_errors import (
    HostError,
    attached,
    http_error_text,
    normalize_notebook_path,
    refuse_long_text,
)
from .host_harness import HostHarness
from .host_permission import HostPermission
from .host_queue import HostQueue
from .host_review import HostReview
from .live_notebook import LiveNotebook
from .server_kernels import ServerKernels
from .server_notebooks import ServerNotebooks

__all__ = ["AgentHost", "HostError", "HostSettings", "http_error_text"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class HostSettings(Settings):
    """The declared settings (`provider` and `model` as the provider resolved them, `harness_dir`
    resolved) and what the server works out for itself."""

    bridge_address: Callable[[], str]  # the URL kernels call the host on, once the server listens


class AgentHost(HostBranches, HostHarness, HostAutonomy, HostQueue, HostPermission, HostReview):
    def __init__(
        self,
        serverapp: Any,
        repository: SessionRepository,
        settings: HostSettings,
        provider_factory: Callable[[], ModelProvider] | None = None,
        keys: Mapping[str, str] | None = None,
    ) -> None:
        """`provider_factory`: how a root's provider is made (the configured one when None);
        `keys`: provider keys held outside the environment (core/held_keys.py)."""
        self.serverapp = serverapp
        self.repository = repository
        self._shutting_down: asyncio.Future[None] | None = None
        self._settings = settings
        self.choice = ModelChoice(
            lambda: self.settings, keys if keys is not None else {}, lambda: self._provider()
        )
        self._provider_factory = provider_factory or self.choice.configured
        self.kernels = ServerKernels(serverapp, settings.kernel_name, settings.kernel_env_strip)
        self.fleet = KernelFleet(
            self.kernels, lambda: self.settings.bridge_address(), settings.kernel_pool_size
        )
        self.notebooks = ServerNotebooks(
            serverapp, lambda: self.settings, self.kernels, lambda: self.runtime.agents
        )
        environment = HostEnvironment(self.fleet, self.choice, self.notebooks)
        self.runtime = AgentRuntime(repository, environment, settings)
        self.catalog = SessionCatalog(repository.root)  # the session list of a notebook
        self.runtime.autonomy.root = Path(serverapp.root_dir)  # gates run in a notebook's folder
        self.runtime.project.root = Path(serverapp.root_dir)  # context files up to here
        self.fleet.serve(self.runtime)
        # One lock per notebook: attaching one notebook (which may start its kernel) never
        # holds up another notebook's agent.
        self._notebook_locks: dict[str, asyncio.Lock] = {}

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

    def _provider(self) -> ModelProvider:
        return self._provider_factory()

    # ------------------------------------------------------------ kernels

    def bind(self, path: str, kernel_id: str) -> None:
        """The UI reports the notebook's kernel (the sessions API can lag a rename)."""
        path = normalize_notebook_path(path)
        if not self.kernels.managed(kernel_id):
            raise HostError(404, f"no running kernel {shorten(kernel_id)}")
        self.kernels.bindings[path] = kernel_id

    async def resolve_kernel(self, path: str, hint: str | None = None) -> str:
        return await self.kernels.resolve(path, hint)

    def _forget_gone_kernels(self) -> None:
        for kernel_id in self.fleet.forget_gone():
            self.runtime.unbind_kernel(kernel_id)

    def _use_kernel(self, agent: Agent, kernel_id: str) -> None:
        """Make `agent` the one agent of this kernel (bridge calls from it act as its session)."""
        holder = self.runtime.agent_on_kernel(kernel_id)
        if holder is not None and holder is not agent:
            self._refuse_busy_kernel(kernel_id)
            self.runtime.detach(holder, taken_over_by=agent.session_id)
        self.runtime.bind_kernel(agent, self.fleet.executor(kernel_id))
        self.fleet.prepare_soon(kernel_id)  # connect and load the package while the user types

    def _refuse_busy_kernel(self, kernel_id: str) -> None:
        holder = self.runtime.agent_on_kernel(kernel_id)
        if holder is not None and holder.running:
            raise HostError(
                409,
                f"session {holder.session_id} is running a turn on this notebook's kernel; "
                "stop it before switching sessions",
            )

    # ------------------------------------------------------------ agents

    async def attach(
        self,
        notebook_path: str,
        kernel_id: str | None = None,
        session_id: str | None = None,
        new: bool = False,
    ) -> Agent:
        path = normalize_notebook_path(notebook_path)
        await self.notebooks.check(path)
        async with self._notebook_lock(path):
            self._forget_gone_kernels()
            for present in self.agents.values():
                if isinstance(present.notebook, LiveNotebook):
                    present.notebook.follow_move()
            agent = self._find_agent(path, session_id, new)
            loaded = agent is not None
            # Its loading lock: a message or a heartbeat tick bringing the same session back
            # (`ensure_loaded`) gives it one agent, not two, and an eviction under way either
            # ends before (the session is opened again from disk) or sees this attach and
            # keeps the agent (core/lifecycle.py).
            target = session_id if agent is None else agent.session_id
            if target is None and not new:
                target = await asyncio.to_thread(self.repository.latest_for_notebook, path)
            lock = self.runtime.loading_lock(target) if target else contextlib.nullcontext()
            async with lock:
                agent = self._find_agent(path, target, False) if target else None
                if agent is None:  # not loaded, or evicted while this waited: from disk
                    reopen = target if loaded else session_id
                    return await self._open_agent(path, reopen, new, kernel_id)
                self.runtime.lifecycle.addressed(agent.session_id)
            if not agent.running and not _kernel_arriving(agent):
                # a turn in flight keeps the kernel it started on
                self._use_kernel(agent, await self.kernels.resolve(path, kernel_id))
            return agent

    def _notebook_lock(self, path: str) -> asyncio.Lock:
        return self._notebook_locks.setdefault(path, asyncio.Lock())

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
            key=lambda a: a.session.updated() if a.session.entries else "",
            default=None,
        )

    async def _open_agent(
        self, path: str, session_id: str | None, new: bool, kernel_hint: str | None
    ) -> Agent:
        """An agent on a session from disk (or a new one). An attach that fails leaves nothing
        behind: what it registered goes the way `runtime.detach` takes it, the provider closed."""
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
        ydoc = self.notebooks.ydoc_extension()
        kernel_id = await self.kernels.resolve(path, kernel_hint)
        self._refuse_busy_kernel(kernel_id)
        provider = (
            self.choice.resumed(*session.current_model())
            if session is not None
            else self._provider()
        )
        agent: Agent | None = None
        try:
            if session is None:
                session = self.runtime.create_session(path, provider)
            notebook = self.notebooks.live(path, ydoc)
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
            if agent is None or self.agents.get(agent.session_id) is not agent:
                await close_provider(provider)
            else:
                await self.runtime.detach(agent)
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
        except LinkedSession as exc:
            raise HostError(409, str(exc)) from None
        except SessionError as exc:
            raise HostError(404, str(exc)) from None
        if session.notebook_path != path:
            owner = shorten(session.notebook_path)
            raise HostError(409, f"session {session_id} belongs to {owner}")
        member = self.runtime.family.member(session_id)
        if member is not None and member.refused:  # before its notebook's kernel is resolved
            raise HostError(409, member.refusal().message)
        return session

    def _follow_notebook(self, agent: Agent, notebook: LiveNotebook) -> None:
        """Renames move the agent along; what the notebook has to report reaches the session."""

        def moved(old: str, new: str) -> None:
            self.kernels.moved(old, new)
            agent.session.append("notebook_moved", old_path=old, path=new)
            agent.events.emit("notebook_moved", old_path=old, path=new)

        def notice(turn: int | None, kind: str, text: str) -> None:
            agent.notice(kind, text, turn=turn)

        notebook.on_moved = moved
        notebook.on_notice = notice
        notebook.turn_running = lambda: agent.running

    def agent(self, session_id: str) -> Agent:
        return attached(self.agents, session_id)

    async def send(self, session_id: str, text: str) -> int:
        if not isinstance(text, str) or not text.strip():
            raise HostError(400, "message text is required")
        refuse_long_text(text, self.settings, "message")
        agent = self.agent(session_id)
        if agent.running:
            raise HostError(409, "the agent is already working on a turn; stop it or wait")
        kernel_id = getattr(agent.kernel, "kernel_id", None)
        if not _kernel_arriving(agent) and not (kernel_id and self.kernels.managed(kernel_id)):
            # The user shut the kernel down or switched it: find the notebook's kernel again.
            async with self._notebook_lock(agent.notebook.path):
                self._forget_gone_kernels()
                self._use_kernel(agent, await self.kernels.resolve(agent.notebook.path))
        try:
            turn, _task = agent.start_turn(text)
        except TurnInProgress as exc:
            raise HostError(409, str(exc)) from None
        return turn

    async def stop(self, session_id: str, tree: bool = False) -> bool:
        """Stop the agent's turn; with `tree`, its sub-agents' turns too ("stop all")."""
        agent = self.agent(session_id)
        return await (self.runtime.stop_tree(session_id) if tree else agent.stop())

    # ------------------------------------------------------------ model (docs/pairing.md, 2)

    def models(self) -> ModelList:
        return model_list(self.runtime)

    async def switch_model(self, session_id: str, model: object) -> ModelList:
        try:
            return await switch_model(self.runtime, self.agent(session_id), model)
        except ModelSwitchError as exc:
            raise HostError(exc.status, exc.message) from None

    def info(self, agent: Agent) -> dict[str, Any]:
        provider, model = agent.chosen_provider.name, agent.chosen_provider.model
        return {
            "session_id": agent.session_id,
            "notebook_path": agent.notebook.path,
            "kernel_id": getattr(agent.kernel, "kernel_id", None),
            "provider": provider,
            "model": model,
            "status": "running" if agent.running else "idle",
            "turns": agent.session.turns(),
            "created": agent.session.header.get("created"),
            "updated": agent.session.updated(),
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

    # ------------------------------------------------------------ the session list

    async def notebook_sessions(self, notebook_path: str) -> list[dict[str, Any]]:
        """The sessions of one notebook, loaded and on disk, newest first (SessionListItem)."""
        path = normalize_notebook_path(notebook_path)
        live = {
            session_id: LiveSession(
                "running" if agent.running else "idle",
                agent.notebook.path,
                agent.provider.name,
                agent.provider.model,
            )
            for session_id, agent in self.agents.items()
        }
        items = await asyncio.to_thread(self.catalog.listing, path, live)
        return [dict(item) for item in items]

    async def delete_session(self, session_id: str) -> list[str]:
        """Remove a session's folder and those of every sub-agent below it (taken-out ones too:
        they were its sub-agents); their notebooks stay, they are the user's files. Returns the
        sub-agents' ids. Refused (409), with nothing removed, while an agent is loaded on any of
        them (running, or attached to a notebook tab) or one is a link; 404 for an unknown id."""
        try:
            log = await asyncio.to_thread(self.repository.read, session_id)
        except LinkedSession as exc:
            raise HostError(409, str(exc)) from None
        except SessionError as exc:  # not a folder under the sessions root
            raise HostError(404, str(exc)) from None
        below = self._below(session_id)  # a new one needs a loaded agent to spawn it: refused
        # The notebook's lock: an attach of this session cannot load it while it goes; each
        # session's loading lock (in one order): nor can a message or a heartbeat tick bring it
        # or a sub-agent back (`ensure_loaded`).
        async with contextlib.AsyncExitStack() as held:
            await held.enter_async_context(self._notebook_lock(log.notebook_path))
            for each in sorted([session_id, *below]):
                await held.enter_async_context(self.runtime.loading_lock(each))
            self._refuse_loaded(session_id)
            directory = self.repository.directory(session_id)
            if not directory.is_dir() and not directory.is_symlink():  # deleted meanwhile
                raise HostError(404, f"no session {session_id!r}")
            for each in [session_id, *below]:
                if self.repository.directory(each).is_symlink():
                    raise HostError(
                        409, f"session {each} is a link, not a folder; remove it by hand"
                    )
            for each in [*reversed(below), session_id]:  # the deepest first: a tree stays a tree
                await self._delete_one(each)
        return below

    async def _delete_one(self, session_id: str) -> None:
        try:
            await asyncio.to_thread(self.repository.delete, session_id)
        except SessionError as exc:  # already gone, or a link
            if self.repository.directory(session_id).is_symlink():
                raise HostError(409, str(exc)) from None
        except OSError as exc:
            raise HostError(500, f"session {session_id} could not be deleted: {exc}") from None
        self.runtime.family.forget(session_id)
        # Messages that waited for it (one may have come while it went) tell their senders.
        self.runtime.mailbox.target_deleted(session_id)

    def _below(self, session_id: str) -> list[str]:
        """Every sub-agent below `session_id`, parents before their children; headers could
        make a loop, which is cut."""
        found: list[str] = []
        seen = {session_id}
        pending = [session_id]
        while pending:
            for child in self.runtime.family.children(pending.pop(), deleted=True):
                if child.session_id not in seen:
                    seen.add(child.session_id)
                    found.append(child.session_id)
                    pending.append(child.session_id)
        return found

    def _refuse_loaded(self, session_id: str) -> None:
        agent = self.agents.get(session_id)
        if agent is not None:
            doing = "running a turn" if agent.running else "open in a notebook"
            raise HostError(
                409,
                f"session {session_id} is {doing}; open another session in "
                f"{shorten(agent.notebook.path)} before deleting this one",
            )
        for loaded in self.agents:
            if session_id in self._ancestors(loaded):
                member = self.runtime.family.member(loaded)
                name = f"{member.display_name!r} " if member is not None else ""
                raise HostError(
                    409,
                    f"session {session_id} has a sub-agent loaded now ({name}{loaded}); "
                    "delete it once that one is closed",
                )

    def _ancestors(self, session_id: str) -> set[str]:
        found: set[str] = set()
        member = self.runtime.family.member(session_id)
        while member is not None and member.parent_session_id not in (None, *found):
            parent = member.parent_session_id
            assert parent is not None
            found.add(parent)
            member = self.runtime.family.member(parent)
        return found

    # ------------------------------------------------------------ shutdown

    async def shutdown(self) -> None:
        """The server stops: running turns end as `shutdown` and every loaded agent's kernel is
        snapshotted (within `shutdown_timeout`), then the agents and their kernels go. Once: a
        second call (`stop_extension` after jupyter/stop_order.py ran it) waits for the first."""
        if self._shutting_down is None:
            self._shutting_down = asyncio.ensure_future(self._shut_down())
        await self._shutting_down

    async def _shut_down(self) -> None:
        report = await self.runtime.close(SERVER_SHUTDOWN, self.settings.shutdown_timeout)
        if report.stopped or report.snapshotted or report.skipped:
            logger = getattr(self.serverapp, "log", log)  # the server's log, shown at INFO
            logger.info("Prime Agent Lab shutdown: %s", report.summary())


class _NoKernelYet:
    """Placeholder until attach() resolves the notebook's kernel (never executes)."""

    kernel_id = ""

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("no kernel resolved for this agent yet")

    def stop_cell(self, cause: StopCause = USER_STOP) -> None:
        return None


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
