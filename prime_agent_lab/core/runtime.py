"""The agent-tree runtime: creates, tracks and routes agents, for the server and the CLI alike.

A host (the Jupyter server extension, or the headless CLI) supplies an `AgentEnvironment`: how to
make a model provider, the notebook of a new child, a kernel for it, and the key that proves a
kernel's bridge calls. Everything else lives here once: which agent is on which kernel, the bridge
and the caller context of its operations, the loop's hooks, crash recovery when a session is
opened, what an earlier run left queued (`start`), the end of a run (`close`), and (in
`family.py`, `mailbox.py`) the tree of agents and the messages between them.

Size: over 600 lines because it is the one place that holds the tree's live state (which agent
is loaded, on which kernel, spawning or closing); the rules it applies live elsewhere (family,
mailbox, snapshots, lifecycle, refiners, the kernel fleet). Splitting the sub-agent half out
(spawn, status, delete) is the next step when it grows.
"""

from __future__ import annotations

import asyncio
import logging
import posixpath
import secrets
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, Literal, Protocol

from prime_agent_kernel.operations import OPERATIONS

from .agent import Agent, AgentHooks, TurnOutcome
from .autonomy import Autonomy
from .blank_cell import with_blank_cell
from .bridge import BridgeError, BridgeService, Caller
from .bridge_ops import register_session_operations
from .caller import CallerContext, Operation
from .compact_ops import register_compact_operations
from .continuation import Continuers
from .events import Event, EventBus
from .family import (
    REFUSED,
    SESSION_UNREADABLE,
    Family,
    FamilyError,
    Member,
    check_name,
    default_name,
)
from .goal_ops import register_goal_operations
from .goals import Goals
from .hand_restore import register_hand_restore
from .harness.auto_refine import settings_of
from .harness.keeper import HarnessKeeper
from .harness.refine_ops import register_refine_operations
from .harness.refiners import Refiners
from .harness_ops import register_harness_operations
from .heartbeat_ops import register_heartbeat_operations
from .lifecycle import Lifecycle
from .mailbox import Mailbox
from .mcp_ops import McpAccess, mcp_prompt_part, register_mcp_operations
from .member_rules import child_folder, child_header_problem
from .message_ops import register_message_operations
from .pending_kernel import PendingKernel, kernel_arrived
from .ports import KernelPort, ModelProvider, NotebookPort
from .project_context import ProjectContext, describe_untrusted_files, repeats_last_notice
from .project_trust import TrustedFiles
from .prompt_parts import PartProvider
from .prompts import PromptSettings, build_system_prompt
from .recovery import close_interrupted_turn
from .rlm_ops import register_rlm_operations
from .scheduler import Scheduler
from .session_trust import Untrusted, sign_session, untrusted_items
from .session_trust import describe as describe_untrusted
from .sessions import SessionError, SessionLog, SessionRepository, now_iso
from .settings import Settings
from .shutdown import ShutdownReport, stop_and_snapshot
from .snapshot_transfer import register_snapshot_operations
from .snapshots import SnapshotKeeper, SnapshotSettings, SnapshotsUnavailable, forget_skill_paths
from .stop_cause import USER_STOP, StopCause
from .text import preview, shorten
from .trust import Signer
from .usage import session_usage
from .wire import UntrustedKind

log = logging.getLogger(__name__)


class AgentEnvironment(Protocol):
    """What a host supplies to the runtime."""

    def provider(self, model: str | None) -> ModelProvider:
        """A provider for `model` (`provider/model`, a bare model name, or None: the default).
        Raises ValueError for a model no configured provider serves."""
        ...

    def kernel_key(self, kernel_id: str) -> bytes | None:
        """The signing key of a kernel this host runs (None: not one of ours)."""
        ...

    async def create_child_notebook(self, path: str, cells: list[dict[str, Any]]) -> NotebookPort:
        """Create the notebook `path` (relative, posix) holding `cells`, and open it."""
        ...

    async def open_notebook(self, path: str) -> NotebookPort:
        """An existing notebook (a sub-agent's, opened again from disk)."""
        ...

    async def start_child_kernel(self, notebook_path: str, cwd: str) -> KernelPort:
        """A kernel of its own for a child's notebook, working in `cwd` (relative, posix); the
        notebook's running kernel if it already has one (a user opened it)."""
        ...

    def models(self) -> list[str]:
        """The models children may run on, as `provider/model`."""
        ...

    async def release_kernel(self, kernel: KernelPort) -> None:
        """Shut down a kernel the runtime asked for (a deleted child, shutdown)."""
        ...

    def has_client(self, session_id: str, kernel_id: str) -> bool:
        """Someone is attached to the agent (its chat, or its notebook open on `kernel_id`):
        it is not evicted while so."""
        ...

    async def close(self) -> None:
        """The runtime is done: the kernels the host keeps for it go (a pool, executors)."""
        ...


TASK_LABEL = "[task from parent]"
MAX_NOTEBOOK_TRIES = 50


class AgentRuntime:
    def __init__(
        self,
        repository: SessionRepository,
        environment: AgentEnvironment,
        settings: Settings,
        signer: Signer | None = None,
    ) -> None:
        self.repository = repository
        self.environment = environment
        self.settings = settings
        self.signer = signer or Signer.load_or_ephemeral()  # this user's secret: docs/trust.md
        self.agents: dict[str, Agent] = {}
        self.family = Family(repository, lambda session_id: session_id in self.agents)
        self._kernel_session: dict[str, str] = {}  # kernel id -> session id
        self._background: set[asyncio.Future[Any]] = set()
        self.bridge = BridgeService(
            environment.kernel_key,
            self._kernel_session.get,
            declared={name: op.arguments for name, op in OPERATIONS.items()},
        )
        register_session_operations(self.bridge, self.context)
        register_rlm_operations(self.operation)
        self._prompts: dict[str, tuple[Settings, str]] = {}
        self._admitting: set[tuple[str, str]] = set()  # (parent, name) of spawns under way
        self._stopped_with_children: set[str] = set()  # stop_tree stopped these, not yet run
        self._loading: dict[str, asyncio.Lock] = {}  # sub-agents being opened from disk
        self.turns_started = 0  # by every agent of the tree, since this runtime started
        self._turn_counted = asyncio.Event()
        self.mailbox = Mailbox(self)
        register_message_operations(self.operation)
        register_compact_operations(self.operation)
        global_dir = Path(settings.harness_dir).expanduser() if settings.harness_dir else None
        self.harnesses = HarnessKeeper(repository.directory, self.signer, global_dir)
        register_harness_operations(self.operation)
        self.snapshots = SnapshotKeeper(
            repository.directory, self._snapshot_settings, self.spawn, self.signer
        )
        register_snapshot_operations(self.operation, self.snapshots.transfers)
        register_hand_restore(self.operation, self.snapshots.transfers)
        self.lifecycle = Lifecycle(self)
        self.refiners = Refiners(
            lambda session_id: self.harnesses.harness_for(session_id),
            lambda: settings_of(self.settings),
        )
        register_refine_operations(self.operation, self.refiners.get)
        self.continuers = Continuers()  # goals, autonomous runs: docs/autonomy.md
        # heartbeats and schedules (docs/autonomy.md): one timer; an active job pins its agent
        self.scheduler = Scheduler(self)
        self.lifecycle.add_pin(self.scheduler.pinned)
        register_heartbeat_operations(self.operation)
        self.goals = Goals(self, lambda: self.settings)
        register_goal_operations(self.operation, self.goals)
        self.continuers.add("goal", self.goals.should_continue)
        self.autonomy = Autonomy(self)  # continuer "autonomous", after "goal"
        # project context files and their trust (docs/project-context.md); the host sets the root
        self.project = ProjectContext(TrustedFiles(self.signer), lambda: self.settings)
        self.prompt_parts: list[PartProvider] = []  # more rows of /context: core/context_report.py
        self.mcp = McpAccess(lambda: self.settings, self.project)  # one MCP hub: docs/mcp.md
        register_mcp_operations(self.operation, self.mcp)
        self.prompt_parts.append(mcp_prompt_part)

    # ------------------------------------------------------------ sessions and agents

    def create_session(
        self, notebook_path: str, provider: ModelProvider, **family: Any
    ) -> SessionLog:
        """A new session; `family` (parent_session_id, name, depth, task, ...) makes it a
        sub-agent's."""
        session = self.repository.create(
            notebook_path=notebook_path, provider=provider.name, model=provider.model, **family
        )
        self.family.add(
            Member(
                session_id=session.session_id,
                notebook_path=notebook_path,
                parent_session_id=family.get("parent_session_id"),
                name=family.get("name", ""),
                depth=family.get("depth", 0),
                task=family.get("task", ""),
                model=f"{provider.name}/{provider.model}",
                created=str(session.header.get("created", "")),
            )
        )
        return session

    def loading_lock(self, session_id: str) -> asyncio.Lock:
        """Held while `session_id` is loaded from disk, leaves memory (eviction) or is deleted
        (`DELETE .../sessions/<id>`), so a load never races a kernel that is still being shut
        down or a folder being removed. Kept once made: a lock dropped while a task waits on it
        would let the next caller take a new one beside it."""
        return self._loading.setdefault(session_id, asyncio.Lock())

    async def ensure_loaded(self, session_id: str) -> Agent:
        """The agent of `session_id`, opened from disk when it is not loaded (a sub-agent after
        a server restart): its session, its notebook and a kernel come back. A root comes back
        when its notebook is opened (its kernel is the notebook's, which the host resolves)."""
        agent = self.agents.get(session_id)
        if agent is not None:
            return agent
        async with self.loading_lock(session_id):
            agent = self.agents.get(session_id)
            if agent is None:
                agent = await self._load_child(session_id)
        return agent

    async def _load_child(self, session_id: str) -> Agent:
        member = self.family.member(session_id)
        if member is None:
            raise FamilyError(404, f"no agent {shorten(session_id, 80)}")
        if member.parent_session_id is None:
            raise FamilyError(
                409, f"{member.display_name} is not open; it comes back when its notebook is opened"
            )
        if member.refused:  # a header from elsewhere: no kernel, no notebook (member_rules.py)
            raise member.refusal()
        try:
            session = await asyncio.to_thread(self.repository.load, session_id)
        except SessionError as exc:  # 410: nothing will ever load it as it is
            raise FamilyError(SESSION_UNREADABLE, str(exc), lasting=True) from None
        changed = child_header_problem(session.header)  # the file changed since it was indexed
        if changed:
            raise FamilyError(REFUSED, f"session {session_id} is refused: {changed}", lasting=True)
        provider_name, model = session.current_model()
        try:
            provider = self.environment.provider(f"{provider_name}/{model}")
        except ValueError as exc:
            raise FamilyError(
                409, f"sub-agent {member.name!r} cannot come back: {exc}", lasting=True
            ) from None
        try:
            notebook = await self.environment.open_notebook(session.notebook_path)
            parent_path = str(session.header.get("parent_notebook_path") or "")
            kernel = self._child_kernel(session, notebook_directory(parent_path), member.name)
            agent, _ = await self.start_agent(session, provider, notebook, kernel)
        except BaseException:
            await close_provider(provider)
            raise
        return agent

    def _child_kernel(self, session: SessionLog, cwd: str, name: str) -> PendingKernel:
        return PendingKernel(
            self.environment.start_child_kernel(session.notebook_path, cwd),
            on_ready=lambda ready: self.kernel_ready(session.session_id, ready),
            what=f"the kernel of sub-agent {name!r}",
        )

    async def start_agent(
        self,
        session: SessionLog,
        provider: ModelProvider,
        notebook: NotebookPort,
        kernel: KernelPort,
        events: EventBus | None = None,
    ) -> tuple[Agent, int | None]:
        """An agent on `session`, registered and ready. A turn that a crash cut short is closed
        first (returned: its number, else None), so the model hears what really happened."""
        refused = self.family.member(session.session_id)
        if refused is not None and refused.refused:  # whoever asks: never an agent for it
            raise refused.refusal()
        agent = Agent(
            session,
            provider,
            notebook,
            kernel,
            self.settings,
            events or EventBus(session.session_id),
            hooks=self._hooks_for(session),
        )
        agent.compactor.gc.cap = self.settings.snapshot_variable_cap
        self.snapshots.agent_started(agent)
        untrusted = await asyncio.to_thread(untrusted_items, self, session.session_id)
        if untrusted:
            agent.notice("session_untrusted", describe_untrusted(untrusted))
        project = await asyncio.to_thread(self.project.notice_files, session.notebook_path)
        said = describe_untrusted_files(project) if project and self.project.notify else ""
        if said and not repeats_last_notice(session.entries, said):
            agent.notice("project_untrusted", said)
        self.lifecycle.agent_started(agent)
        recovered = await close_interrupted_turn(
            session,
            notebook,
            output_cap=agent.config.output_cap,
            accepts_images=agent.config.accepts_images,
            redactor=agent.redactor,
        )
        self.agents[session.session_id] = agent
        if kernel.kernel_id:
            self.bind_kernel(agent, kernel)
        elif isinstance(kernel, PendingKernel):  # arriving: its snapshot comes back once it is
            self.snapshots.kernel_bound(agent)
        self.mailbox.agent_started(agent)
        self.scheduler.agent_started(session.session_id)
        agent.events.add_listener(lambda event: self._child_turn_started(agent, event))
        member = self.family.member(session.session_id)
        self.refiners.agent_started(agent, root=member is None or member.depth == 0)
        return agent, recovered

    def untrusted(self, session_id: str) -> list[Untrusted]:
        """What in the session's folder (and its sub-agents') this user did not sign."""
        return untrusted_items(self, session_id)

    async def trust(self, session_id: str) -> list[Untrusted]:
        """The user trusts the session and its sub-agents as their folders are now: sign them,
        then load what was held back (skill modules, the snapshot into a kernel without user
        variables, queued mail). What was untrusted before."""
        signed = await asyncio.to_thread(sign_session, self, session_id)
        for sid in dict.fromkeys(item.session_id for item in signed):
            agent = self.agents.get(sid)
            if agent is not None:
                await forget_skill_paths(agent.kernel)
                kinds = sorted({item.kind for item in signed if item.session_id == sid})
                agent.notice("session_trusted", trusted_text(kinds))
                self.snapshots.trusted(agent)
                self.autonomy.trusted(agent)
            self.mailbox.deliver_waiting(sid)
        return signed

    def _child_turn_started(self, child: Agent, event: Event) -> None:
        """Counts turns; a sub-agent's parent sees it working again (a follow-up, a message)."""
        if event["type"] != "turn_started":
            return
        self._stopped_with_children.discard(child.session_id)
        self.turns_started += 1
        self._turn_counted.set()
        member = self.family.member(child.session_id)
        if member is not None and member.parent_session_id is not None:
            self._child_status(self.agents.get(member.parent_session_id), child, "running")

    def _hooks_for(self, session: SessionLog) -> AgentHooks:
        return AgentHooks(
            inbox=self.mailbox.inbox_for(session.session_id),
            system_prompt=lambda: self.system_prompt(session.session_id),
            prompt_version=lambda: self.harnesses.section(session.session_id)[0],
            turn_ended=self._turn_ended,
            before_turn=self.snapshots.before_turn,
            after_restart=self.snapshots.after_restart,
            before_cell=self.snapshots.before_cell,
            before_model_call=self._before_model_call,
            should_continue=self.continuers,
        )

    async def _before_model_call(self, agent: Agent, turn: int) -> None:
        await self.refiners.at_boundary(agent.session_id)
        await self.autonomy.at_model_call(agent, turn)  # budgets stop a run here

    def system_prompt(self, session_id: str) -> str:
        """The base prompt, what this agent may spawn, a sub-agent's doctrine, and the
        summaries of its harness as the stores are now."""
        cached = self._prompts.get(session_id)
        if cached is None or cached[0] is not self.settings:
            cached = self._prompts[session_id] = (self.settings, self._build_prompt(session_id))
        project = self.project.section(self.notebook_of(session_id))
        mcp = self.mcp.prompt_section(self.session_of(session_id))  # docs/mcp.md
        return cached[1] + self.harnesses.section(session_id)[1] + project + mcp

    def notebook_of(self, session_id: str) -> str:
        """The agent's notebook path (relative to the root, or absolute for a CLI run's notebook
        outside its folder)."""
        member = self.family.member(session_id)
        if member is not None and member.notebook_path:
            return member.notebook_path
        agent = self.agents.get(session_id)
        return agent.session.notebook_path if agent is not None else ""

    def _build_prompt(self, session_id: str) -> str:
        return build_system_prompt(self.prompt_settings(session_id))

    def prompt_settings(self, session_id: str) -> PromptSettings:
        config = self.settings
        me = self.family.member(session_id)
        depth = me.depth if me is not None else 0
        parent = self.family.member(me.parent_session_id) if me and me.parent_session_id else None
        return PromptSettings(
            output_cap=config.output_cap,
            cell_timeout_seconds=config.cell_timeout,
            can_spawn=depth < self.settings.max_depth,
            parent_name=parent.display_name if parent is not None else None,
            name=me.name if me is not None else "",
        )

    def _turn_ended(self, agent: Agent, outcome: TurnOutcome) -> None:
        """What follows a turn: a sub-agent's parent learns how its task ended; the messages
        that waited for the turn to end start the next."""
        self.goals.turn_ended(agent, outcome)
        self._report_to_parent(agent, outcome)
        self.refiners.turn_ended(agent.session_id)
        self.mailbox.turn_ended(agent, outcome.stop_reason)

    def _report_to_parent(self, child: Agent, outcome: TurnOutcome) -> None:
        member = self.family.member(child.session_id)
        if member is None or member.parent_session_id is None:
            return
        parent = self.agents.get(member.parent_session_id)
        status = self.child_status(child.session_id)
        summary = preview(outcome.final_text) if outcome.final_text else None
        self._child_status(parent, child, status, summary)
        if parent is None or not last_turn_was_a_task(child.session):
            return  # a turn the parent did not ask for (the user's own message) is not told
        if outcome.stop_reason == "shutdown":
            return  # the same shutdown cut the parent's turn: nothing to tell it after a restart
        if status == "completed":
            kind = "child_completed"
            text = (
                f"Sub-agent {member.name!r} finished its task without replying. Its last "
                f"answer: {summary or '(no text)'}"
            )
        elif status == "error":
            kind = "child_error"
            text = f"Sub-agent {member.name!r} failed: {outcome.error or outcome.stop_reason}"
        elif status == "stopped":
            kind = "child_stopped"
            text = (
                f"Sub-agent {member.name!r} was stopped before it finished its task. Its last "
                f"answer: {summary or '(no text)'}"
            )
        else:
            return
        parent.notice(kind, text)
        if status == "stopped" and parent.session_id in self._stopped_with_children:
            return  # one Stop took parent and child (a subtree, all): the news must not restart it
        self.mailbox.notify(parent.session_id, child, kind, text)

    def agent(self, session_id: str) -> Agent | None:
        return self.agents.get(session_id)

    def agent_on_kernel(self, kernel_id: str) -> Agent | None:
        return self.agents.get(self._kernel_session.get(kernel_id, ""))

    def bind_kernel(self, agent: Agent, kernel: KernelPort) -> None:
        """Make `agent` the one agent of `kernel`: its bridge calls act as that agent."""
        current = agent.kernel.kernel_id if agent.kernel is not None else ""
        if current and current != kernel.kernel_id:
            self.unbind_kernel(current, agent)
            self.snapshots.kernel_switched(agent)
        agent.kernel = kernel
        self._kernel_session[kernel.kernel_id] = agent.session_id
        self.snapshots.kernel_bound(agent)

    def unbind_kernel(self, kernel_id: str, agent: Agent | None = None) -> None:
        """Forget who is on `kernel_id` (only if it is `agent`, when given)."""
        holder = self._kernel_session.get(kernel_id)
        if holder is not None and (agent is None or holder == agent.session_id):
            del self._kernel_session[kernel_id]

    def detach(self, agent: Agent, taken_over_by: str | None = None) -> Awaitable[Any]:
        """Forget an idle agent; its session stays on disk and can be opened again. Its
        refiner and provider close in the background (awaiting the result waits for them).
        `taken_over_by`: the session that took its notebook's kernel (its `inactive` says so)."""
        if self.agents.get(agent.session_id) is agent:
            del self.agents[agent.session_id]
        if agent.kernel is not None and agent.kernel.kernel_id:
            self.unbind_kernel(agent.kernel.kernel_id, agent)
        took = {"taken_over_by": taken_over_by} if taken_over_by else {}
        agent.events.emit("status", status="inactive", **took)
        self.snapshots.agent_gone(agent.session_id)
        gone = asyncio.gather(self.refiners.agent_gone(agent.session_id), agent.close_providers())
        self.spawn(gone)
        return gone

    # ------------------------------------------------------------ sub-agents

    async def spawn_child(
        self, parent: Agent, task: object, name: object = None, model: object = None
    ) -> dict[str, Any]:
        """Admit a sub-agent of `parent` and start it on `task`; returns its handle at once
        (its kernel arrives in the background, the first cell waits for it)."""
        me = self.family.member(parent.session_id)
        depth = (me.depth if me is not None else 0) + 1
        if depth > self.settings.max_depth:
            raise FamilyError(
                403,
                f"this agent may not spawn sub-agents: the depth limit is "
                f"{self.settings.max_depth} ({self.settings.spell('max_depth')}) and a child of "
                f"this agent would be at depth {depth}",
            )
        text = self._check_task(task)
        chosen = default_name(text) if name is None else check_name(name)
        taken = {m.name.lower() for m in self.family.children(parent.session_id)}
        reservation = (parent.session_id, chosen.lower())
        if chosen.lower() in taken or reservation in self._admitting:
            raise FamilyError(409, f"this agent already has a sub-agent named {chosen!r}")
        if model is not None and not isinstance(model, str):
            raise FamilyError(400, "model must be a string like 'openai/gpt-4o' or None")
        try:
            provider = self.environment.provider(model or None)
        except ValueError as exc:
            raise FamilyError(400, f"cannot run a sub-agent on {model!r}: {exc}") from None
        self._admitting.add(reservation)
        try:
            return await self._admit(parent, provider, text, chosen, depth)
        except BaseException:
            await close_provider(provider)
            raise
        finally:
            self._admitting.discard(reservation)

    async def _admit(
        self, parent: Agent, provider: ModelProvider, task: str, name: str, depth: int
    ) -> dict[str, Any]:
        parent_path = parent.session.notebook_path
        notebook, path = await self._create_child_notebook(parent, parent_path, name, task)
        session = self.create_session(
            path,
            provider,
            parent_session_id=parent.session_id,
            name=name,
            depth=depth,
            task=task,
            spawn_cell_id=parent.current_cell_id,
            spawn_turn=parent.current_turn,
            parent_notebook_path=parent_path,
        )
        kernel = self._child_kernel(session, notebook_directory(parent_path), name)
        child, _ = await self.start_agent(session, provider, notebook, kernel)
        handle = {
            "rlm_child_id": session.session_id,
            "name": name,
            "session_dir": str(session.directory),
            "model": f"{provider.name}/{provider.model}",
            "notebook_path": path,
        }
        turn = parent.current_turn
        spawned: dict[str, Any] = {**handle, "task": task}
        if parent.current_cell_id is not None:
            spawned["spawn_cell_id"] = parent.current_cell_id
        handle["notebook_link"] = posixpath.relpath(path, notebook_directory(parent_path) or ".")
        parent.session.append("child_spawned", **({"turn": turn} if turn else {}), **spawned)
        parent.events.emit("child_spawned", **({"turn": turn} if turn else {}), **spawned)
        child.start_turn(
            f"{TASK_LABEL}\n\n{task}",
            {
                "from_session_id": parent.session_id,
                "from_name": self._name_of(parent.session_id),
                "relationship": "parent",
                "composed": now_iso(),
            },
        )
        return handle

    def _check_task(self, task: object) -> str:
        if not isinstance(task, str) or not task.strip():
            raise FamilyError(400, "rlm() needs a task: a non-empty string")
        limit = self.settings.max_task_chars
        if len(task) > limit:
            raise FamilyError(
                413,
                f"the task has {len(task):,} characters; the limit is {limit:,}. Put long input "
                "in a file and name the file in the task.",
            )
        return task

    async def _create_child_notebook(
        self, parent: Agent, parent_path: str, name: str, task: str
    ) -> tuple[NotebookPort, str]:
        """`<folder>/<parent stem>.agents/<name>.ipynb`, or `<name>-2.ipynb`, ... when a file of
        that name is left from an earlier sub-agent."""
        folder = child_folder(parent_path)
        for attempt in range(1, MAX_NOTEBOOK_TRIES + 1):
            stem = name if attempt == 1 else f"{name}-{attempt}"
            path = posixpath.join(folder, f"{stem}.ipynb")
            cells = with_blank_cell(backlink_cells(parent_path, path, name, task))
            try:
                return await self.environment.create_child_notebook(path, cells), path
            except FileExistsError:
                continue
        raise FamilyError(409, f"no free notebook name for sub-agent {name!r} in {folder}")

    def kernel_ready(self, session_id: str, kernel: KernelPort) -> None:
        """A kernel that was still booting arrived: its bridge calls now act as that agent."""
        if session_id in self.agents and kernel.kernel_id:
            self._kernel_session[kernel.kernel_id] = session_id

    def _name_of(self, session_id: str) -> str:
        member = self.family.member(session_id)
        return member.display_name if member is not None else session_id

    def child_status(self, child_id: str) -> str:
        """`running`, or how its latest task ended (`replied`, `completed`, `error`,
        `stopped`) from the child's log (on disk when it is not loaded), else `idle` (loaded)
        or `inactive` (not loaded)."""
        agent = self.agents.get(child_id)
        if agent is not None and agent.running:
            return "running"
        # How its task ended is in its log, loaded or not: eviction changes where the agent
        # is (residency), not what it did (docs/agents-view.md).
        session = self.session_of(child_id)
        if session is None:
            return "inactive"
        outcome = task_outcome(session)
        if outcome is None:
            return "idle" if agent is not None else "inactive"
        return outcome

    def child_state(self, child_id: str) -> tuple[str, str | None]:
        """A child's status and the start of its last answer (for the chat's child lines)."""
        session = self.session_of(child_id)
        last = session.last_of("turn_end") if session is not None else None
        text = str(last.get("final_text") or "") if last is not None else ""
        return self.child_status(child_id), preview(text) if text else None

    def list_children(self, parent_id: str) -> list[dict[str, Any]]:
        return [self._child_entry(m) for m in self.family.children(parent_id)]

    def _child_entry(self, member: Member) -> dict[str, Any]:
        session = self.session_of(member.session_id)
        return {
            "rlm_child_id": member.session_id,
            "name": member.name,
            "session_dir": str(self.repository.directory(member.session_id)),
            "notebook_path": member.notebook_path,
            "model": member.model,
            "status": self.child_status(member.session_id),
            "task": preview(member.task, 200),
            "created": member.created,
            "spawn_turn": session.header.get("spawn_turn") if session is not None else None,
            "usage": session_usage(session) if session is not None else {},
            "usage_total": self.tree_usage(member.session_id),
        }

    def session_of(self, session_id: str) -> SessionLog | None:
        agent = self.agents.get(session_id)
        if agent is not None:
            return agent.session
        try:
            return self.repository.read(session_id)
        except SessionError:
            return None

    def tree_usage(self, session_id: str, above: frozenset[str] = frozenset()) -> dict[str, int]:
        """Tokens of an agent and all its sub-agents, below it in the tree (a loop that
        hand-edited headers make is cut)."""
        session = self.session_of(session_id)
        total = session_usage(session) if session is not None else {}
        above = above | {session_id}
        for child in self.family.children(session_id):
            if child.session_id not in above:
                for key, value in self.tree_usage(child.session_id, above).items():
                    total[key] = total.get(key, 0) + value
        return total

    def find_child(self, parent_id: str, ref: object) -> Member:
        """A child of `parent_id` by id or name (a handle or entry gives its id)."""
        if isinstance(ref, dict):
            ref = ref.get("rlm_child_id") or ref.get("name")
        if not isinstance(ref, str) or not ref:
            raise FamilyError(400, "name the sub-agent by its handle, entry, id or name")
        for member in self.family.children(parent_id):
            if ref in (member.session_id, member.name):
                return member
        raise FamilyError(404, f"this agent has no sub-agent {shorten(ref, 80)}")

    async def delete_child(self, parent: Agent, ref: object) -> dict[str, Any]:
        """Take a sub-agent out of the tree; its transcript and notebook stay on disk. A child
        that is working is not deleted."""
        return await self.delete_member(self.find_child(parent.session_id, ref))

    async def delete_member(self, member: Member) -> dict[str, Any]:
        """`delete_child` of a sub-agent found already (the Agents View names it by id)."""
        child = self.agents.get(member.session_id)
        working = self._still_working(member.session_id)
        if working is not None:
            raise FamilyError(409, not_deleted_text(member.name, working))
        if child is not None:
            self.detach(child)
            await self._release_kernel(child.kernel)
        self.family.mark_deleted(member.session_id, self.repository.directory(member.session_id))
        self.mailbox.target_deleted(member.session_id)
        return {"rlm_child_id": member.session_id, "name": member.name, "deleted": True}

    def _still_working(self, session_id: str) -> StillWorking | None:
        """Why an agent may not be deleted now (None: it may), as the Agents View's `state`
        says it (core/agents_overview.py `state_of`): its turn runs, its own sub-agents run (a
        deleted parent would leave them without one), or mail waits for it."""
        agent = self.agents.get(session_id)
        children_run = any(
            (each := self.agents.get(child.session_id)) is not None and each.running
            for child in self.family.children(session_id)
        )
        if agent is not None and agent.running:
            return "children" if agent.current_cell_id is not None and children_run else "running"
        if children_run:
            return "children"
        return "mail" if self.mailbox.pending(session_id) else None

    async def _release_kernel(self, kernel: KernelPort) -> None:
        if isinstance(kernel, PendingKernel):
            ready = await kernel.release()
            if ready is None:
                return
            kernel = ready
        try:
            await self.environment.release_kernel(kernel)
        except Exception:
            log.warning("releasing kernel %s failed", kernel.kernel_id, exc_info=True)

    def _child_status(
        self, parent: Agent | None, child: Agent, status: str, preview: str | None = None
    ) -> None:
        if parent is None:
            return
        member = self.family.member(child.session_id)
        fields: dict[str, Any] = {
            "rlm_child_id": child.session_id,
            "name": member.name if member is not None else "",
            "notebook_path": child.session.notebook_path,
            "status": status,
        }
        if preview is not None:
            fields["preview"] = preview
        parent.events.emit("child_status", **fields)

    # ------------------------------------------------------------ the bridge

    def context(self, caller: Caller) -> CallerContext:
        agent = self.agents.get(caller.session_id)
        if agent is None:
            raise BridgeError(409, "the agent of this kernel is not loaded; attach it again")
        return CallerContext(self, agent, caller.kernel_id)

    def operation(self, name: str, handler: Operation) -> None:
        """Offer `handler` to agent kernels as bridge operation `name`."""

        async def call(caller: Caller, payload: dict[str, Any]) -> Any:
            try:
                return await handler(self.context(caller), payload)
            except FamilyError as exc:
                raise BridgeError(exc.status, exc.message) from None

        call.__wrapped__ = handler  # type: ignore[attr-defined]  # for inspect.unwrap
        self.bridge.register(name, call)

    # ------------------------------------------------------------ lifetime

    def start(self) -> int:
        """Open over what earlier runs left, before the first agent is attached: the messages
        they queued wait again (delivered exactly once), their schedules are read (a tick a
        crash cut between claim and delivery is marked interrupted). How many messages wait."""
        waiting = self.mailbox.recover()
        self.scheduler.load()
        return waiting

    def deliver_recovered(self) -> None:
        """Once the event loop runs (the server serves; the CLI's root agent is up): bring back
        the agents that recovered messages wait for, and deliver them, in the background."""
        self.mailbox.deliver_recovered()
        self.scheduler.arm()  # the timer of the heartbeats and schedules

    async def close(
        self, cause: StopCause = USER_STOP, within: float | None = None
    ) -> ShutdownReport:
        """The host ends: turns still running stop with `cause` and every resident agent's
        kernel is snapshotted (all of it within `within` seconds; None: as long as that takes);
        then the agents go (providers closed, the kernels asked for released) and the host's
        kernels with them (`AgentEnvironment.close`). What was stopped, saved and not."""
        self.mailbox.close()  # a stopped turn must not let a waiting message start the next one
        self._stopped_with_children.update(self.agents)  # no child_stopped mail for the next run
        report = await stop_and_snapshot(
            list(self.agents.values()),
            lambda session_id: self.save_snapshot(session_id, "shutdown"),
            cause,
            within,
        )
        await self.shutdown()
        await self.environment.close()
        return report

    def spawn(self, awaitable: Awaitable[Any]) -> None:
        """Run `awaitable` in the background, kept alive until it ends."""
        task = asyncio.ensure_future(awaitable)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def busy(self) -> bool:
        """Some agent is running a turn (or has one about to start)."""
        return any(agent.running for agent in self.agents.values())

    async def wait_quiet(self) -> None:
        """Until no agent of the tree runs a turn and none is about to start one (a message
        whose target is being opened from disk counts: that target is about to)."""
        while True:
            running = [a.turn_task for a in self.agents.values() if a.turn_task is not None]
            pending: list[asyncio.Future[Any]] = [t for t in running if not t.done()]
            pending += self.mailbox.deliveries()
            if pending:
                await asyncio.wait(pending)
            for _ in range(3):  # turn_ended hooks run as done-callbacks: let them start turns
                await asyncio.sleep(0)
            if not self.busy():
                return

    async def turns_reached(self, limit: int) -> None:
        """Returns once the agents of the tree have started `limit` turns."""
        while self.turns_started < limit:
            self._turn_counted.clear()
            await self._turn_counted.wait()

    def descendants(self, session_id: str, above: frozenset[str] = frozenset()) -> list[str]:
        out: list[str] = []
        above = above | {session_id}
        for child in self.family.children(session_id):
            if child.session_id not in above:
                out += [child.session_id, *self.descendants(child.session_id, above)]
        return out

    async def stop_tree(self, session_id: str) -> bool:
        """Stop an agent's turn and every turn of its sub-agents ("stop all"). True if any ran."""
        return bool(await self.stop_subtree(session_id))

    async def stop_subtree(
        self, session_id: str, cause: StopCause = USER_STOP, *, with_root: bool = True
    ) -> list[str]:
        """Stop an agent's turn and its sub-agents' turns (only theirs: `with_root=False`); the
        ids of those that were running. The news of a sub-agent stopped this way starts no turn
        of its parent: whoever stopped the subtree knows."""
        ids = [session_id, *self.descendants(session_id)]
        self._stopped_with_children.update(ids)
        targets = ids if with_root else ids[1:]
        agents = [a for a in (self.agents.get(sid) for sid in targets) if a is not None]
        stopped = await asyncio.gather(*(a.stop(cause) for a in agents))
        return [a.session_id for a, ran in zip(agents, stopped, strict=True) if ran]

    async def stop_all(self, cause: StopCause = USER_STOP) -> None:
        """Stop every running turn of the tree (a root's own Stop leaves its children alone)."""
        self._stopped_with_children.update(self.agents)
        await asyncio.gather(*(agent.stop(cause) for agent in list(self.agents.values())))

    async def shutdown(self) -> None:
        self.mailbox.close()  # stopping a turn must not start one for a waiting message
        await self.lifecycle.close()
        await self.scheduler.close()
        self.snapshots.close()
        await self.refiners.close()
        for agent in list(self.agents.values()):
            await agent.stop()
            await agent.close_providers()
            if isinstance(agent.kernel, PendingKernel):  # a kernel the runtime asked for
                await self._release_kernel(agent.kernel)
        self.agents.clear()
        await self.mcp.close()  # the MCP sessions end with the host (stdio servers exit)

    # ------------------------------------------------------------ kernel snapshots

    def _snapshot_settings(self) -> SnapshotSettings:
        return SnapshotSettings(
            variable_cap=self.settings.snapshot_variable_cap,
            total_cap=self.settings.snapshot_total_cap,
            debounce=self.settings.snapshot_debounce,
        )

    async def save_snapshot(self, session_id: str, reason: str) -> dict[str, Any]:
        """Snapshot a loaded agent's kernel variables now; the manifest. `reason` is logged."""
        agent = self.agents.get(session_id)
        if agent is None:
            raise FamilyError(409, f"agent {shorten(session_id, 80)} is not loaded")
        log.debug("snapshot of %s (%s)", session_id, reason)
        return await self.snapshots.save(agent)

    async def flush_snapshots(self) -> list[str]:
        """Snapshot every idle agent now (the CLI's run ends before a debounced one fires);
        one line per snapshot that failed, for the caller to report."""
        failed = []
        for agent in list(self.agents.values()):
            if agent.running or not kernel_arrived(agent.kernel):
                continue  # busy, or its kernel never came (nothing ran there)
            try:
                await self.save_snapshot(agent.session_id, "shutdown")
            except SnapshotsUnavailable:
                continue  # told when its first cell ran
            except Exception as exc:
                failed.append(f"the kernel snapshot of {agent.session_id} was not saved: {exc}")
        return failed

    # ------------------------------------------------------------ eviction (core/lifecycle.py)

    async def release_agent_kernel(self, agent: Agent) -> None:
        """Shut down the kernel the runtime gave a (detached) sub-agent."""
        await self._release_kernel(agent.kernel)

    def child_left_memory(self, child: Agent) -> None:
        """An evicted sub-agent's parent sees how its task ended (`inactive` when none did)."""
        member = self.family.member(child.session_id)
        if member is not None and member.parent_session_id is not None:
            status = self.child_status(child.session_id)
            self._child_status(self.agents.get(member.parent_session_id), child, status)


async def close_provider(provider: ModelProvider) -> None:
    """Providers with an SDK client hold HTTP connections; release them."""
    close = getattr(provider, "aclose", None)
    if close is not None:
        await close()


TRUSTED_WORDS: dict[UntrustedKind, str] = {
    "snapshot": "kernel snapshot",
    "harness": "local harness",
    "mail": "queued messages",
    "schedules": "schedules",
    "autonomy": "Autonomous switch",
    "goal": "goal",
}


StillWorking = Literal["running", "children", "mail"]


def not_deleted_text(name: str, working: StillWorking) -> str:
    """Why a sub-agent was not deleted and what to do: the one text (409) of the kernel's
    `rlm.delete_subagent`, the Agents View's Delete and `DELETE .../agents/{id}`."""
    if working == "children":
        return (
            f"sub-agent {name!r} is waiting for its own sub-agents; it was not deleted (they would "
            "be left without their parent). Stop its subtree first (Stop subtree in the Agents "
            "View), or wait until they are done and it has answered, then delete it."
        )
    if working == "mail":
        return (
            f"sub-agent {name!r} is waiting for mail; it was not deleted: messages for it wait in "
            "the mailbox and it comes back to take them. Wait until it has answered, then "
            "delete it."
        )
    return (
        f"sub-agent {name!r} is running; it was not deleted. Stop it first (Stop in the Agents "
        "View, or in its notebook's chat), or wait until it has answered, then delete it."
    )


def trusted_text(kinds: list[UntrustedKind]) -> str:
    """The chat's line once the user trusted a session: what now loads, in words."""
    words = [TRUSTED_WORDS[kind] for kind in kinds]
    listed = ", ".join(words[:-1]) + f" and {words[-1]}" if len(words) > 1 else "".join(words)
    one = len(words) == 1 and not listed.endswith("s")
    return f"Trusted by the user: this session's {listed} now load{'s' if one else ''}."


def choose_model(requested: str, available: list[str]) -> tuple[str, str]:
    """(provider, model) for `requested` ("provider/model" or a bare model name) among the
    `available` "provider/model" names; ValueError naming them when it is not one."""
    for entry in available:
        provider, _, model = entry.partition("/")
        if requested in (entry, model):
            return provider, model
    offered = ", ".join(available) or "none"
    raise ValueError(f"unknown model {requested!r}; available: {offered} (rlm.find_models())")


def task_outcome(session: SessionLog) -> str | None:
    """How a sub-agent's latest task from its parent ended: `replied` (it messaged its parent
    since the task arrived), `completed` (the task's turn ended without that), `error`,
    `stopped` (the user or its parent stopped it before it replied), or None (no task ended
    yet). A task is a turn the parent's message started or entered; the other turns (the
    user's own messages to the child, a sibling's) are not tasks, and only a message to the
    parent sent in one of them counts (as a reply to the task before it)."""
    replied = False
    outcome: str | None = None
    parents = False  # whether the turn under way carries a message from the parent
    for entry in session.path():
        kind = entry["type"]
        if kind in ("user_message", "agent_message") and _from_parent(entry):
            if not parents:
                replied, outcome = False, None
            parents = True
        elif kind == "user_message":
            parents = False
        elif kind == "message_sent" and entry.get("relationship") == "parent":
            replied = True
            if outcome is not None:
                outcome = "replied"
        elif kind == "turn_end" and parents:
            parents = False
            reason = entry.get("stop_reason")
            if reason in ("error", "interrupted", "shutdown", "max_iterations"):
                outcome = "error"
            elif reason == "end_turn":
                outcome = "replied" if replied else "completed"
            elif reason == "stopped":
                outcome = "replied" if replied else "stopped"
            else:
                outcome = "replied" if replied else None
    return outcome


def last_turn_was_a_task(session: SessionLog) -> bool:
    """Whether the latest turn on the path carries a message from the parent (a task)."""
    for entry in reversed(session.path()):
        if entry["type"] in ("user_message", "agent_message") and _from_parent(entry):
            return True
        if entry["type"] == "user_message":
            return False
    return False


def _from_parent(entry: dict[str, Any]) -> bool:
    return entry.get("relationship") == "parent" and isinstance(entry.get("from_session_id"), str)


def backlink_cells(parent_path: str, child_path: str, name: str, task: str) -> list[dict[str, Any]]:
    """The first cell of a child notebook: whose child it is (a link back) and its task."""
    link = posixpath.relpath(parent_path, posixpath.dirname(child_path) or ".")
    quoted = "\n".join(f"> {line}" if line else ">" for line in task.splitlines() or [""])
    source = (
        f"**Sub-agent `{name}`** of [{posixpath.basename(parent_path)}]({link})\n\n"
        f"**Task from parent:**\n\n{quoted}\n"
    )
    return [
        {
            "cell_type": "markdown",
            "id": f"backlink-{secrets.token_hex(4)}",
            "metadata": {"prime_agent": {"role": "backlink", "parent_notebook": parent_path}},
            "source": source,
        }
    ]


def notebook_directory(notebook_path: str) -> str:
    """The directory (relative, posix; "" for the root) a notebook sits in."""
    parent = Path(notebook_path).parent.as_posix()
    return "" if parent == "." else parent
