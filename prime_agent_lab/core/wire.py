"""The wire types the chat panel reads: chat transcript items, events, session info, statuses.

This module is the one source of truth. The labextension's `src/wire.ts` is generated from it:

    python -m prime_agent_lab.core.wire --ts > labextension/src/wire.ts

and `tests/test_wire.py` fails when the checked-in file differs from what this module generates,
or when the server emits an event or a field that is not declared here. Every new event, item,
field or status is added here first. Session entry types, with their notice kinds and stop
reasons, are declared in `core/entry_types.py` (which names the chat item each one makes); this
module reads them from there.

Size: over 600 lines because it is a declaration table (every event, item and field with its
doc line) plus its TypeScript generator; splitting the table would split the source of truth.
"""

import json
import sys
import types
import typing
from typing import Any, Literal, NotRequired, TypedDict, Union

# Facts about session entries (stop reasons, notice kinds, entry types) are declared with the
# entry types; they are part of the wire, and read from here too.
from .entry_types import FOR_THE_USER_ONLY as FOR_THE_USER_ONLY
from .entry_types import STOP_NOTICES as STOP_NOTICES
from .entry_types import WARNING_NOTICES, NoticeKind, SessionEntryType, StopReason
from .settings import PERMISSION_MODES

# ---------------------------------------------------------------- statuses and kinds

ExecutionStatus = Literal["ok", "error", "timeout", "died", "interrupted", "aborted", "skipped"]
"""How the kernel ran one piece of code (the kernel port's result, `core/ports.py`)."""

SessionStatus = Literal["idle", "running", "inactive", "broken"]
"""`inactive`: on disk, no agent attached (or another session took over the notebook's kernel).
`broken`: a damaged session file, listed with a `reason`."""

CellStatus = Literal[ExecutionStatus, "skipped"]
"""How an agent cell ended. `skipped`: not run (withdrawn by Stop before it reached the kernel,
or answered with Skip or Edit in ask mode: see `CellDecision`)."""

CellDecision = Literal["skip", "edit"]
"""Ask mode: why a `skipped` cell did not run when a user answered it (docs/pairing.md, section
4): `skip` (Skip), `edit` (Edit: the edited code runs in a new cell). Absent: withdrawn by Stop."""

ChildStatus = Literal["running", "idle", "inactive", "replied", "completed", "error", "stopped"]
"""A sub-agent's state as its parent sees it: `replied` (its last task ended after it messaged
the parent), `completed` (ended without replying), `error` (ended with an error), `stopped` (the
user or the parent stopped it before it replied); these hold whether it is loaded or evicted.
`idle` (loaded, no task ended yet), `inactive` (not loaded, no task ended yet)."""

ErrorKind = Literal["provider", "kernel", "notebook", "tool_arguments", "internal", "disk"]

Relationship = Literal["parent", "child", "sibling"]
"""Who sent an agent message, from the receiver's point of view."""

DeliveryMode = Literal["auto", "steer", "follow_up"]

ScheduleOwner = Literal["user", "agent", "cli"]
"""Whose scheduled job (docs/autonomy.md): the user's `/heartbeat`, the agent's
`rlm_heartbeat`, or `prime-agent-lab schedule` from the terminal."""

ScheduleKind = Literal["every", "cron", "in", "at"]

HeartbeatPhase = Literal["claimed", "delivered", "skipped", "interrupted"]
"""What happened to a due tick: claimed (before delivery), delivered (journaled in the mailbox),
skipped (the previous tick is still open or not yet taken: coalesced), interrupted (it could not
be journaled; never replayed)."""

# ---------------------------------------------------------------- REST answers


class ServerInfo(TypedDict):
    version: str
    provider: str
    model: str
    output_cap: NotRequired[int]
    cell_timeout: NotRequired[float]
    locked_settings: NotRequired[list[str]]
    """Settings the administrator locked (docs/jupyterhub.md): what a user cannot change."""


class SessionInfo(TypedDict):
    session_id: str
    notebook_path: str | None
    parent_session_id: NotRequired[str]
    """Set on a sub-agent's session: the session that spawned it."""
    name: NotRequired[str]
    """A sub-agent's name, unique among its siblings."""
    kernel_id: str | None
    provider: str | None
    model: str | None
    status: SessionStatus
    turns: int
    created: str | None
    updated: str | None
    seq: NotRequired[int]
    """Newest event seq when the server answered (attached sessions only)."""
    reason: NotRequired[str]
    """Why a `broken` session cannot be read."""


class SessionListItem(TypedDict):
    """One session in the session list of a notebook (`GET .../sessions?notebook=`, and
    `prime-agent-lab sessions`), newest first."""

    session_id: str
    notebook_path: str
    title: str | None
    """The first user message, whitespace folded and shortened; null when there is none."""
    created: str | None
    updated: str | None
    provider: str | None
    model: str | None
    status: SessionStatus
    turns: int
    cost: float | None
    """US dollars of its own model calls; null when a model without a known price answered."""
    cost_total: float | None
    """The same with every sub-agent below it (deleted ones too: what was spent stays spent)."""
    parent_session_id: NotRequired[str]
    name: NotRequired[str]
    reason: NotRequired[str]
    """Why a `broken` session cannot be read."""
    last_user_entry_id: NotRequired[str]
    """The last message the user wrote on the current branch: the panel's Fork starts there."""


class SessionList(TypedDict):
    sessions: list[SessionListItem]


# ------------------------------------------------ the Agents View (docs/agents-view.md)

AgentState = Literal["running", "idle", "waiting"]
"""What an agent does now: `running` (a turn runs), `waiting` (a turn waits for mail or a
child: see `AgentRow.waiting_for`), `idle` (no turn runs; evicted and never-loaded agents too)."""

AgentWaitingFor = Literal["mail", "child"]

AgentOutcome = Literal["replied", "completed", "error", "stopped"]
"""How the agent's last task or turn ended, read from its session log (so it survives eviction
and server restarts): `replied` (a child that messaged its parent), `completed`, `error`,
`stopped` (the user or a parent stopped it)."""

AgentResidency = Literal["resident", "evicted"]
"""`resident`: loaded in this server's memory; `evicted`: on disk only (unloaded or never
loaded since the server started)."""

AgentDelivery = Literal["chat", "mail"]


class AgentTokens(TypedDict):
    input: int
    output: int


class AgentRow(TypedDict):
    """One agent in the Agents View (`GET /prime-agent/api/agents`, `prime-agent-lab agents`)."""

    session_id: str
    name: str
    """A root: its notebook's stem; a child: its name."""
    parent_id: str | None
    root_id: str
    depth: int
    notebook: str | None
    state: AgentState
    waiting_for: AgentWaitingFor | None
    outcome: AgentOutcome | None
    residency: AgentResidency
    model: str
    """`provider · model`, as the chat's header names it."""
    tokens_own: AgentTokens
    tokens_total: AgentTokens
    """Its own and every descendant's (deleted children too: what was spent stays spent)."""
    cost_own: float | None
    cost_total: float | None
    last_activity: str
    can_message: bool
    can_delete: bool
    problem: str | None
    """Why the tree refuses this session (its header breaks the rules: it is listed as a root
    of its own and nothing loads it), or that its folder was removed from disk while its agent
    is in memory; null for a sound agent (docs/agent-tree.md, "Headers from elsewhere")."""


class AgentsOverview(TypedDict):
    """Every agent the server knows, as a depth-first walk of the trees (roots newest first,
    children in creation order)."""

    agents: list[AgentRow]
    generated_at: str


class AgentMessageSent(TypedDict):
    """`POST .../agents/{id}/message`: a root takes it as a chat message, others as mail."""

    delivered: AgentDelivery


class AgentsStopped(TypedDict):
    """`POST .../agents/{id}/stop`: the agents a stop reached (the one named, or its subtree)."""

    stopped: list[str]


class UserItem(TypedDict):
    """A message that started a turn: the researcher's, or another agent's (`from_name`, ...)."""

    type: Literal["user"]
    turn: int
    text: str
    from_session_id: NotRequired[str]
    from_name: NotRequired[str]
    relationship: NotRequired[Relationship]
    composed: NotRequired[str]
    notice: NotRequired[NoticeKind]
    """Set when the message only carries a sub-agent's notice to the model; the chat shows
    that notice's own line (a `notice` item/event) and no message bubble."""
    schedule_id: NotRequired[str]
    """Set on a scheduled job's tick (a heartbeat): the job, and the fields below."""
    schedule_label: NotRequired[str]
    schedule_owner: NotRequired[ScheduleOwner]
    schedule_kind: NotRequired[ScheduleKind]
    scheduled_for: NotRequired[str]
    mode: NotRequired[DeliveryMode]
    """Set on the user's message sent while a turn ran: `steer` (it entered the running turn
    where this item is) or `follow_up` (it waited in the queue and started this turn)."""


class AgentMessageItem(TypedDict):
    """Another agent's message taken into a running turn (or a heartbeat's tick)."""

    type: Literal["agent_message"]
    turn: int
    text: str
    from_session_id: NotRequired[str]
    """Absent on a tick (`schedule_id`): no agent sent it."""
    from_name: str
    relationship: NotRequired[Relationship]
    composed: str
    notice: NotRequired[NoticeKind]
    """Set when the message only carries a sub-agent's notice to the model; the chat shows
    that notice's own line (a `notice` item/event) and no message bubble."""
    schedule_id: NotRequired[str]
    schedule_label: NotRequired[str]
    schedule_owner: NotRequired[ScheduleOwner]
    schedule_kind: NotRequired[ScheduleKind]
    scheduled_for: NotRequired[str]


class ChildItem(TypedDict):
    """A sub-agent this agent spawned (`rlm(...)`): its notebook opens from the chat."""

    type: Literal["child"]
    turn: int | None
    rlm_child_id: str
    name: str
    notebook_path: str
    task: str
    spawn_cell_id: NotRequired[str]
    """The agent cell that called `rlm` (the panel shows the child's line after that cell's line,
    as it did live; the session log records the cell's result after the spawn)."""
    status: NotRequired[ChildStatus]
    """The sub-agent's state when the transcript was read (the panel's badge after a reload, when
    the event buffer no longer holds its `child_status` events)."""
    preview: NotRequired[str]
    """The start of the sub-agent's last answer, as in `child_status`."""


class AssistantItem(TypedDict):
    type: Literal["assistant"]
    turn: int
    text: str
    usage: NotRequired[dict[str, int]]
    """Tokens of the model call that gave this answer (its footer)."""
    provider: NotRequired[str]
    model: NotRequired[str]
    cost: NotRequired[float | None]
    """US dollars at the provider's list price; None when it declares none for the model."""


class CellItem(TypedDict):
    type: Literal["cell"]
    turn: int
    cell_id: str
    code: str
    status: CellStatus
    execution_count: int | None
    preview: str
    decision: NotRequired[CellDecision]


class ErrorItem(TypedDict):
    type: Literal["error"]
    turn: int
    message: str


class NoticeItem(TypedDict):
    """A stop notice (`stop_reason`) or a kernel notice (`kind`)."""

    type: Literal["notice"]
    turn: int | None
    """None for a notice between turns (a kernel restarted from the Kernel menu, a sub-agent
    that ended while this agent was idle)."""
    text: str
    stop_reason: NotRequired[StopReason]
    kind: NotRequired[NoticeKind]
    code: NotRequired[str]
    """`plan_not_run`: the code the model asked to run."""


# ---------------------------------------------------------------- refine (docs/harness.md)

RefineScope = Literal["local", "global"]
EditAction = Literal["create", "update", "delete"]


class RefinedEntry(TypedDict):
    """A harness entry as a refinement recorded it, before or after one edit."""

    id: str
    kind: str
    title: str
    content: str
    path: str
    scope: RefineScope
    reference: dict[str, Any]
    arguments: dict[str, Any]
    metadata: dict[str, Any]
    source: str
    created_at: str
    updated_at: str
    version: int


class RefinementEdit(TypedDict):
    """One edit of a refinement: applied, or rejected with the reason in `error`."""

    action: EditAction | str | None
    kind: str | None
    id: str | None
    applied: bool
    error: str | None
    before: RefinedEntry | None
    after: RefinedEntry | None
    reason: NotRequired[str]
    """The planner's evidence for this edit, when it gave one."""


class RolledBack(TypedDict):
    """A rollback's words for the refinement it undid, so the chat names it without ids."""

    summary: str
    created_at: str


class RefinementRecord(TypedDict):
    """A refinement as recorded (the store's refinements.jsonl, the session log, the event).
    `trigger`: `user` (chat or REST), `agent` (refine.run), `rollback`, `delete` (a user's
    delete from the panel), `auto:turns`, `auto:compaction`. `harness_version`: the stores'
    revisions after it was applied."""

    id: str
    trigger: str
    scope: RefineScope
    instructions: str | None
    summary: str
    rationale: str
    expected_outcome: str
    edits: list[RefinementEdit]
    rollback_of: str | None
    harness_version: dict[str, int]
    created_at: str
    session_id: str
    error: NotRequired[str]
    """Why the refinement failed (the planner call, a cut-off or unreadable reply, a store
    that could not be written); it then has no edits."""
    rolled_back: NotRequired[RolledBack]
    """A rollback's: the summary and time of the refinement it undid (`rollback_of`)."""


class RefineScheduled(TypedDict):
    """Answer of `POST .../refine`."""

    scheduled: bool
    note: NotRequired[str]
    reason: NotRequired[str]
    """Why nothing was scheduled."""


class RefinementList(TypedDict):
    """Answer of `GET .../refinements`: both stores' records, oldest first."""

    refinements: list[RefinementRecord]
    problems: NotRequired[list[str]]
    """A record file that could not be read (named, with why) or lines of it that were skipped;
    the other store's records are still listed."""


class RollbackAnswer(TypedDict):
    """Answer of `POST .../refinements/<id>/rollback`: `applied` at once (the agent was idle;
    `refinement` is the new record), or `queued` for the next turn boundary."""

    queued: bool
    applied: bool
    note: str
    refinement: NotRequired[RefinementRecord]


class RefinementItem(TypedDict):
    """A refinement in the chat transcript (`text`: the line the model also read)."""

    type: Literal["refinement"]
    turn: int | None
    text: str
    refinement: RefinementRecord


ChatItem = (
    UserItem
    | AssistantItem
    | CellItem
    | ErrorItem
    | NoticeItem
    | AgentMessageItem
    | ChildItem
    | RefinementItem
)


# ---------------------------------------------------------------- steer and queue (docs/pairing.md)

QueueChange = Literal["queued", "removed", "started", "paused", "resumed"]
"""What changed the user's queue: a message queued, removed, taken by the agent (started), the
queue held by a Stop (paused) or going on again because the user sent (resumed)."""


class QueuedMessage(TypedDict):
    """One of the user's messages waiting for the agent (removable until it starts)."""

    message_id: str
    text: str
    mode: Literal["steer", "follow_up"]
    """`steer`: enters the running turn at its next model call; `follow_up`: starts the next
    turn once the run ends."""
    composed: str


class QueueState(TypedDict):
    """The user's queue of one session, in the order queued (a steer enters the running turn
    before any follow-up starts)."""

    items: list[QueuedMessage]
    paused: bool
    """A Stop (or a server restart) held it: nothing starts until the user sends again."""


class MessagePosted(TypedDict):
    """Answer of `POST .../sessions/<id>/messages` and `POST .../messages/<message_id>/send`."""

    mode: DeliveryMode
    delivery_status: Literal["started", "queued", "steer"]
    """`started`: a turn began with it; `queued`: it waits (`mode`); `steer` (Send now during a
    run): it enters the running turn at its next model call."""
    turn: NotRequired[int]
    """`started`: the turn it began."""
    message_id: NotRequired[str]
    queue: NotRequired[QueueState]


class QueueEvent(TypedDict):
    """The user's queue changed; `state` is the whole queue after the change."""

    seq: int
    session_id: str
    type: Literal["queue"]
    change: QueueChange
    message_id: NotRequired[str]
    state: QueueState


class SessionWithTranscript(SessionInfo):
    transcript: list[ChatItem]
    queue: NotRequired[QueueState]
    """The user's messages waiting for this session (steer and queue, docs/pairing.md)."""


# ---------------------------------------------------------------- trust (docs/trust.md)

UntrustedKind = Literal["snapshot", "harness", "mail", "schedules", "autonomy", "goal"]


class UntrustedPart(TypedDict):
    """Something in a session's folder this user did not sign, held back until trusted."""

    session_id: str
    where: str
    """The agent's notebook (a sub-agent's, for what is in its folder)."""
    kind: UntrustedKind
    what: str
    """What trusting it would load, in one line."""


class TrustState(TypedDict):
    """Answer of `GET .../trust` and `POST .../trust`."""

    trusted: bool
    untrusted: list[UntrustedPart]
    signed: NotRequired[list[UntrustedPart]]
    """`POST`: what was untrusted and is now signed and loading."""


# ---------------------------------------------------------------- autonomy (docs/autonomy.md)


class AutonomyBudgets(TypedDict):
    """The budgets of an autonomous run (`timeout_minutes`: wall time from its start)."""

    max_turns: int
    max_tokens: int
    timeout_minutes: float
    continuations: int


class AutonomyRun(TypedDict):
    """The session's current (or last) autonomous run: what it used, and how it ended (`reason`
    null while it runs: `gates_passed`, `goal_complete`, `continuations_used`,
    `retries_exhausted`, `max_turns`, `max_tokens`, `timeout`, `stopped`, `error`)."""

    started: str
    turns: int
    tokens: int
    elapsed_seconds: float
    continuations: int
    reason: str | None


class AutonomyState(TypedDict):
    """Answer of `GET` and `PUT .../sessions/<id>/autonomy`, and the `autonomy` event's state."""

    enabled: bool
    budgets: AutonomyBudgets
    gates: list[str]
    run: AutonomyRun | None


class AutonomyUpdate(TypedDict):
    """Body of `PUT .../sessions/<id>/autonomy`: budgets and gates left out stay as they are."""

    enabled: bool
    budgets: NotRequired[AutonomyBudgets]
    gates: NotRequired[list[str]]


# ---------------------------------------------------------------- branching (docs/branching.md)


class EntryOrigin(TypedDict):
    """Where a fork or clone came from: the session, and the entry forked at (the user message)
    or cloned at (the leaf then)."""

    session_id: str
    entry_id: str | None


class TreeNode(TypedDict):
    """One entry of a session's log tree (`GET .../tree`)."""

    id: str
    parent_id: str | None
    type: SessionEntryType
    turn: int | None
    ts: str
    preview: str
    """One line: the message's text, the first code of a call, a turn's final answer."""
    on_branch: bool
    """On the path from the root to the current leaf."""
    branch_point: bool
    """A valid target of `POST .../leaf`: a user message or the end of a turn."""


class SessionTree(TypedDict):
    session_id: str
    leaf_id: str | None
    entries: list[TreeNode]
    forked_from: NotRequired[EntryOrigin]
    cloned_from: NotRequired[EntryOrigin]
    broken: NotRequired[str]
    """Why a damaged session cannot be branched (the entries are what could be read)."""


class LeafMoved(TypedDict):
    """Answer of `POST .../leaf`."""

    leaf_id: str | None
    marked_cells: int
    """Agent cells whose `other branch` mark changed in the notebook."""
    text: NotRequired[str]
    """Branched to a user message: its text, to put back into the input."""


class SessionCopy(TypedDict):
    """Answer of `POST .../fork` and `POST .../clone`: the new session and notebook."""

    session_id: str
    notebook_path: str
    forked_from: NotRequired[EntryOrigin]
    cloned_from: NotRequired[EntryOrigin]
    kernel_state_copied: bool
    missing_cells: int
    """Agent cells of the copied path the original notebook no longer had."""
    text: NotRequired[str]
    """A fork: the message forked from, to put into the input of the new session."""


# ---------------------------------------------------------------- models (docs/pairing.md, 2)


class AnswerCost(TypedDict):
    """Who answered one model call and what it cost (US dollars; None: no declared price)."""

    provider: str
    model: str
    cost: float | None


class ModelPrice(TypedDict):
    """US dollars per million tokens, as the provider declares them."""

    input: float
    output: float
    cache_read: float
    cache_write: float


class ModelInfo(TypedDict):
    name: str
    """`provider/model`, as `rlm.find_models()` lists it."""
    provider: str
    model: str
    context_window: int
    price: NotRequired[ModelPrice]
    """Absent when the provider declares no price for the model."""


class ModelList(TypedDict):
    """Answer of `GET /prime-agent/api/models` (no `current`) and of `POST .../model` and
    `/model` (`current`: the model the session's next call uses)."""

    models: list[ModelInfo]
    current: NotRequired[str]


# ---------------------------------------------------------------- events (websocket)


class StatusEvent(TypedDict):
    """`inactive`: the agent left memory. `taken_over_by` names the session that took the
    notebook's kernel from it (another session took over the notebook); without it the session
    was only unloaded (an idle sub-agent evicted, a sub-agent deleted) and nobody replaced it."""

    seq: int
    session_id: str
    type: Literal["status"]
    status: SessionStatus
    taken_over_by: NotRequired[str]


class TurnStartedEvent(TypedDict):
    """A turn begins. A turn started by another agent's message names its sender."""

    seq: int
    session_id: str
    type: Literal["turn_started"]
    turn: int
    text: str
    message_id: NotRequired[str]
    from_session_id: NotRequired[str]
    from_name: NotRequired[str]
    relationship: NotRequired[Relationship]
    composed: NotRequired[str]
    mode: NotRequired[DeliveryMode]
    notice: NotRequired[NoticeKind]
    """Set when the message only carries a sub-agent's notice to the model; the chat shows
    that notice's own line (a `notice` item/event) and no message bubble."""
    schedule_id: NotRequired[str]
    """Set when a scheduled job's tick started the turn: the job, and the fields below."""
    schedule_label: NotRequired[str]
    schedule_owner: NotRequired[ScheduleOwner]
    schedule_kind: NotRequired[ScheduleKind]
    scheduled_for: NotRequired[str]
    from_user: NotRequired[bool]
    """The user's follow-up from the chat's queue started the turn (`message_id` names it)."""


class AgentMessageEvent(TypedDict):
    """Another agent's message (or a steer tick of a heartbeat, or the user's steer:
    `from_user`), taken into the running turn between two model calls."""

    seq: int
    session_id: str
    type: Literal["agent_message"]
    turn: int
    text: str
    message_id: str
    from_session_id: NotRequired[str]
    """Absent on a tick (`schedule_id`): no agent sent it."""
    from_name: NotRequired[str]
    relationship: NotRequired[Relationship]
    composed: str
    mode: DeliveryMode
    notice: NotRequired[NoticeKind]
    """Set when the message only carries a sub-agent's notice to the model; the chat shows
    that notice's own line (a `notice` item/event) and no message bubble."""
    schedule_id: NotRequired[str]
    schedule_label: NotRequired[str]
    schedule_owner: NotRequired[ScheduleOwner]
    schedule_kind: NotRequired[ScheduleKind]
    scheduled_for: NotRequired[str]
    from_user: NotRequired[bool]
    """The user's steer from the chat: the chat shows it as the user's message here."""


class HeartbeatEvent(TypedDict):
    """A scheduled job's tick (docs/autonomy.md), on the target agent's bus."""

    seq: int
    session_id: str
    type: Literal["heartbeat"]
    phase: HeartbeatPhase
    schedule_id: str
    label: str
    owner: ScheduleOwner
    delivery_mode: Literal["steer", "follow_up"]
    next_run_at: str | None
    """The job's next run after this tick (None: a one-shot's only tick)."""
    run_count: int
    scheduled_for: NotRequired[str]
    """When the claimed tick was due."""
    coalesced: NotRequired[int]
    """`claimed`: ticks missed before this one (the server was down), folded into it."""
    message_id: NotRequired[str]
    """`delivered`: the mailbox message that carries it."""
    skipped_at: NotRequired[str]
    error: NotRequired[str]


class TextDeltaEvent(TypedDict):
    seq: int
    session_id: str
    type: Literal["text_delta"]
    turn: int
    text: str


class AssistantMessageEvent(TypedDict):
    seq: int
    session_id: str
    type: Literal["assistant_message"]
    turn: int
    text: str
    tool_calls: int
    usage: NotRequired[dict[str, int]]
    provider: NotRequired[str]
    model: NotRequired[str]
    cost: NotRequired[float | None]
    """US dollars at the provider's list price; None when it declares none for the model."""


class CellStartedEvent(TypedDict):
    """The agent's cell is in the notebook."""

    seq: int
    session_id: str
    type: Literal["cell_started"]
    turn: int
    cell_id: str
    code: str


class CellWaitingEvent(TypedDict):
    """The cell is written but held until the user's running cell finishes."""

    seq: int
    session_id: str
    type: Literal["cell_waiting"]
    turn: int
    cell_id: str
    text: str


class CellRunningEvent(TypedDict):
    """The cell was submitted to the kernel and runs."""

    seq: int
    session_id: str
    type: Literal["cell_running"]
    turn: int
    cell_id: str


class CellFinishedEvent(TypedDict):
    seq: int
    session_id: str
    type: Literal["cell_finished"]
    turn: int
    cell_id: str
    status: CellStatus
    execution_count: int | None
    preview: str
    decision: NotRequired[CellDecision]


class RetryEvent(TypedDict):
    seq: int
    session_id: str
    type: Literal["retry"]
    turn: int
    attempt: int
    delay: float
    message: str


class ErrorEvent(TypedDict):
    seq: int
    session_id: str
    type: Literal["error"]
    turn: NotRequired[int]
    message: str
    kind: ErrorKind


class NoticeEvent(TypedDict):
    seq: int
    session_id: str
    type: Literal["notice"]
    turn: NotRequired[int]
    kind: NoticeKind
    text: str
    reason: NotRequired[str]
    """For a `continuation`: why the turn went on (`goal`, `gate`, `autonomous`, `wrap_up`)."""
    code: NotRequired[str]
    """`plan_not_run`: the code the model asked to run (the event only; the log has its
    `tool_result`)."""


class ModelChangeEvent(TypedDict):
    """The session's model was switched; the next model call uses it (docs/pairing.md)."""

    seq: int
    session_id: str
    type: Literal["model_change"]
    provider: str
    model: str


class NotebookMovedEvent(TypedDict):
    """The notebook was renamed; the session follows it."""

    seq: int
    session_id: str
    type: Literal["notebook_moved"]
    old_path: str
    path: str


class ChildSpawnedEvent(TypedDict):
    """This agent spawned a sub-agent; its notebook exists and its first task is starting."""

    seq: int
    session_id: str
    type: Literal["child_spawned"]
    turn: NotRequired[int]
    rlm_child_id: str
    name: str
    session_dir: NotRequired[str]
    """Its session folder on the server (always sent; the CLI's JSON lines show it, the panel
    does not read it)."""
    notebook_path: str
    task: str
    model: str
    spawn_cell_id: NotRequired[str]
    """The agent cell that called `rlm`, when an agent cell did."""


class ChildStatusEvent(TypedDict):
    """A sub-agent of this agent changed state (`preview`: the start of its last answer)."""

    seq: int
    session_id: str
    type: Literal["child_status"]
    rlm_child_id: str
    name: str
    notebook_path: str
    status: ChildStatus
    preview: NotRequired[str]


class BranchMovedEvent(TypedDict):
    """The session's leaf moved (a branch): reload the transcript, it shows the new branch."""

    seq: int
    session_id: str
    type: Literal["branch_moved"]
    leaf_id: str | None
    marked_cells: int
    text: NotRequired[str]


class TurnEndedEvent(TypedDict):
    seq: int
    session_id: str
    type: Literal["turn_ended"]
    turn: int
    stop_reason: StopReason
    final_text: str


class RefinementEvent(TypedDict):
    """A refinement was applied, rolled back or failed (docs/harness.md)."""

    seq: int
    session_id: str
    type: Literal["refinement"]
    turn: NotRequired[int]
    refinement: RefinementRecord
    text: str


class GateRunEvent(TypedDict):
    """A gate of an autonomous run ran (or was not re-run on an unchanged workspace)."""

    seq: int
    session_id: str
    type: Literal["gate_run"]
    turn: NotRequired[int]
    command: str
    kind: Literal["shell", "python"]
    attempt: int
    exit_status: int | None
    passed: bool
    seconds: float
    output: str
    skipped_unchanged: bool
    text: str
    """The chat's line (also sent as a `notice` of kind `gate_passed` / `gate_failed`)."""


class AutonomyEvent(TypedDict):
    """The session's autonomy state changed: turned on or off, a run started, made a model call
    or ended."""

    seq: int
    session_id: str
    type: Literal["autonomy"]
    state: AutonomyState


# ---------------------------------------------------- permission modes (docs/pairing.md 4)

PermissionMode = Literal[PERMISSION_MODES]  # type: ignore[valid-type]
"""What a session's agent cells may do, weakest first: `plan` (none runs), `ask` (each waits for
the user's Run, Edit or Skip), `auto` (each runs as the model writes it)."""


class PermissionState(TypedDict):
    """`GET/PUT .../sessions/<id>/permission`: the session's mode, the administrator's cap
    (`max_permission`) and the tool calls whose cells wait for approval now."""

    mode: PermissionMode
    cap: PermissionMode
    waiting: list[str]


class PermissionEvent(TypedDict):
    """The session's permission mode changed."""

    seq: int
    session_id: str
    type: Literal["permission"]
    mode: PermissionMode
    cap: PermissionMode


class CellAwaitingApprovalEvent(TypedDict):
    """Ask mode: the agent's cell is in the notebook and waits for Run, Edit or Skip."""

    seq: int
    session_id: str
    type: Literal["cell_awaiting_approval"]
    turn: int
    cell_id: str
    tool_call_id: str
    code: str


class CellApprovedEvent(TypedDict):
    """The user approved the waiting cell; `edited`: the edited code runs in a new cell."""

    seq: int
    session_id: str
    type: Literal["cell_approved"]
    turn: int
    cell_id: str
    tool_call_id: str
    edited: bool


class CellSkippedEvent(TypedDict):
    """The waiting cell will not run (the user skipped it, or the turn was stopped)."""

    seq: int
    session_id: str
    type: Literal["cell_skipped"]
    turn: int
    cell_id: str
    tool_call_id: str
    decision: NotRequired[CellDecision]
    """`skip`: a user's Skip; absent: the turn was stopped."""


# ---------------------------------------------------- review and revert a turn (docs/pairing.md 5)


class TurnCell(TypedDict):
    """One cell a turn wrote into the notebook, in the order they entered it."""

    cell_id: str
    tool_call_id: str
    execution_count: int | None
    status: str
    """How the cell ended: the words of the `cell_finished` event (`running` while it runs)."""
    first_line: str
    """The code's first non-empty line, cut to 120 characters."""
    in_notebook: bool
    code: str
    """The code the agent wrote, as logged: a cell whose source differs now was changed by the
    user, and a revert keeps it."""


class TurnKernel(TypedDict):
    """Whether "revert turn" can bring the kernel back to how it was as the turn began."""

    restorable: bool
    reason: str | None
    """Why not, in words for the user."""
    snapshot_time: str | None


class TurnReview(TypedDict):
    """`GET .../sessions/<id>/turns/<turn>`: the cells one turn wrote and what a revert can do."""

    session_id: str
    turn: int
    cells: list[TurnCell]
    kernel: TurnKernel
    reverted: bool
    """The turn was reverted whole already."""


class FailedName(TypedDict):
    name: str
    reason: str


class KeptCell(TypedDict):
    """A cell of the turn a revert left in the notebook, and why."""

    cell_id: str
    first_line: str
    reason: str
    """`changed by you` (its source is not the code the agent wrote) or `not this agent's cell`
    (its metadata does not name this session's agent cell of the turn)."""


class TurnRevert(TypedDict):
    """`POST .../sessions/<id>/turns/<turn>/revert`: what the revert did."""

    turn: int
    cells_removed: list[str]
    cells_kept: list[KeptCell]
    whole_turn: bool
    kernel: Literal["restored", "not_restored", "untouched"]
    restored: list[str]
    """Names brought back from the snapshot taken before the turn."""
    removed: list[str]
    """Names the turn created, deleted."""
    failed: list[FailedName]
    reason: str | None
    """Why the kernel was not restored."""
    text: str
    """The chat's line (the model reads it as a notice before its next message)."""


# ---------------------------------------------------- step-through (docs/teaching.md)


class StepChild(TypedDict):
    """A sub-agent a step's cell spawned; its steps are `GET .../sessions/<session_id>/steps`."""

    session_id: str
    name: str
    notebook_path: str
    task: str


class SessionStep(TypedDict):
    """One cell the model asked to run (or an answer without a cell), as the model saw it."""

    index: int
    turn: int | None
    entry_id: str
    """The `assistant_message` entry of the model call."""
    user_message: str | None
    """The message that opened the turn (the user's, or a task from another agent)."""
    user_from: str | None
    """The agent that sent `user_message` (None: the user)."""
    received: list[str]
    """Messages the model read since its previous call (another agent's, a continuation)."""
    text: str
    """The model's text; on the first call of a model answer only (`call_index` 0)."""
    call_index: int
    tool_call_id: str | None
    code: str | None
    """The code that ran (a user's edit in ask mode); None: an answer without a cell."""
    cell_id: str | None
    status: str | None
    execution_count: int | None
    observation: str | None
    """Exactly what the model read of the cell, cut markers included (None: no result)."""
    cut_lines: list[int]
    """Lines of `observation` (from 0) that mark where the output was cut."""
    images: int
    provider: str | None
    model: str | None
    usage: dict[str, int] | None
    """Tokens of the model call (on its first step only)."""
    answered_at: str | None
    finished_at: str | None
    model_seconds: float | None
    cell_seconds: float | None
    """From the model's answer to the cell's logged result (writing the cell included)."""
    children: list[StepChild]


class SessionSteps(TypedDict):
    """`GET .../sessions/<id>/steps`: a session's steps on the path to its leaf."""

    session_id: str
    notebook_path: str
    name: str | None
    parent_session_id: str | None
    steps: list[SessionStep]
    broken: str | None
    """Why the log is damaged (the steps are those before the damage); None: it is whole."""


class TurnRevertedEvent(TypedDict):
    """A turn was reverted, or cells of it removed (every viewer shows `text`)."""

    seq: int
    session_id: str
    type: Literal["turn_reverted"]
    turn: int
    cells_removed: list[str]
    cells_kept: list[KeptCell]
    whole_turn: bool
    kernel: Literal["restored", "not_restored", "untouched"]
    restored: list[str]
    removed: list[str]
    failed: list[FailedName]
    reason: str | None
    text: str


AgentEvent = (
    StatusEvent
    | TurnStartedEvent
    | AgentMessageEvent
    | TextDeltaEvent
    | AssistantMessageEvent
    | CellStartedEvent
    | CellWaitingEvent
    | CellRunningEvent
    | CellFinishedEvent
    | RetryEvent
    | ErrorEvent
    | NoticeEvent
    | NotebookMovedEvent
    | ModelChangeEvent
    | ChildSpawnedEvent
    | ChildStatusEvent
    | BranchMovedEvent
    | TurnEndedEvent
    | RefinementEvent
    | GateRunEvent
    | AutonomyEvent
    | HeartbeatEvent
    | QueueEvent
    | PermissionEvent
    | CellAwaitingApprovalEvent
    | CellApprovedEvent
    | CellSkippedEvent
    | TurnRevertedEvent
)

EVENT_FIELDS_ADDED_BY_BUS = frozenset({"seq", "type", "session_id"})


def event_types() -> dict[str, type]:
    """Event `type` value -> its TypedDict."""
    return {_tag(cls): cls for cls in typing.get_args(AgentEvent)}


def chat_item_types() -> dict[str, type]:
    """Chat item `type` value -> its TypedDict."""
    return {_tag(cls): cls for cls in typing.get_args(ChatItem)}


def _tag(cls: type) -> str:
    (value,) = typing.get_args(typing.get_type_hints(cls)["type"])
    return str(value)


# ---------------------------------------------------------------- TypeScript generation

# What the TypeScript file declares, in order. Aliases are referred to by name wherever a field
# uses them; TypedDicts become interfaces named with an `I` prefix (the labextension's lint rule).
_ALIASES: dict[str, object] = {
    "SessionStatus": SessionStatus,
    "CellStatus": CellStatus,
    "CellDecision": CellDecision,
    "StopReason": StopReason,
    "NoticeKind": NoticeKind,
    "ErrorKind": ErrorKind,
    "Relationship": Relationship,
    "ChildStatus": ChildStatus,
    "DeliveryMode": DeliveryMode,
    "ScheduleOwner": ScheduleOwner,
    "ScheduleKind": ScheduleKind,
    "HeartbeatPhase": HeartbeatPhase,
    "RefineScope": RefineScope,
    "EditAction": EditAction,
    "UntrustedKind": UntrustedKind,
    "QueueChange": QueueChange,
    "SessionEntryType": SessionEntryType,
    "PermissionMode": PermissionMode,
    "AgentState": AgentState,
    "AgentWaitingFor": AgentWaitingFor,
    "AgentOutcome": AgentOutcome,
    "AgentResidency": AgentResidency,
    "AgentDelivery": AgentDelivery,
}
_INTERFACES: list[type] = [
    ServerInfo,
    SessionInfo,
    SessionListItem,
    SessionList,
    UserItem,
    AssistantItem,
    CellItem,
    ErrorItem,
    NoticeItem,
    AgentMessageItem,
    ChildItem,
    SessionWithTranscript,
    EntryOrigin,
    TreeNode,
    SessionTree,
    LeafMoved,
    SessionCopy,
    RefinedEntry,
    RefinementEdit,
    RolledBack,
    RefinementRecord,
    RefineScheduled,
    RefinementList,
    RollbackAnswer,
    RefinementItem,
    UntrustedPart,
    TrustState,
    AutonomyBudgets,
    AutonomyRun,
    AutonomyState,
    AutonomyUpdate,
    QueuedMessage,
    QueueState,
    MessagePosted,
    AnswerCost,
    ModelPrice,
    ModelInfo,
    ModelList,
    PermissionState,
    TurnCell,
    TurnKernel,
    TurnReview,
    FailedName,
    KeptCell,
    TurnRevert,
    StepChild,
    SessionStep,
    SessionSteps,
    AgentTokens,
    AgentRow,
    AgentsOverview,
    AgentMessageSent,
    AgentsStopped,
    *typing.get_args(AgentEvent),
]
_UNIONS: dict[str, object] = {"ChatItem": ChatItem, "AgentEvent": AgentEvent}


def _ts_name(cls: type) -> str:
    return f"I{cls.__name__}"


def ts_type(annotation: object) -> str:
    """The TypeScript of a field's type: an alias or union by its name, a TypedDict as its
    interface's name (also for `core/commands.py`, which generates `commands.ts` the same way)."""
    for name, alias in (_ALIASES | _UNIONS).items():
        if annotation == alias:
            return name
    return _ts_expansion(annotation)


def _ts_expansion(annotation: object) -> str:
    if annotation is Any:
        return "unknown"
    if annotation is type(None):
        return "null"
    if annotation is str:
        return "string"
    if annotation in (int, float):
        return "number"
    if annotation is bool:
        return "boolean"
    if isinstance(annotation, type) and typing.is_typeddict(annotation):
        return _ts_name(annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Literal:
        return " | ".join(f"'{value}'" for value in args)
    if origin in (Union, types.UnionType):
        return " | ".join(ts_type(arg) for arg in args)
    if origin is list:
        (item,) = args
        inner = ts_type(item)
        return f"({inner})[]" if " | " in inner else f"{inner}[]"
    if origin is dict:
        key, value = args
        return f"Record<{ts_type(key)}, {ts_type(value)}>"
    raise TypeError(f"no TypeScript for {annotation!r}")


def _ts_interface(cls: type) -> str:
    lines = []
    if cls.__doc__ and not cls.__doc__.startswith(f"{cls.__name__}("):
        lines.append(f"/** {' '.join(cls.__doc__.split())} */")
    lines.append(f"export interface {_ts_name(cls)} {{")
    optional = cls.__optional_keys__  # type: ignore[attr-defined]
    for field, annotation in typing.get_type_hints(cls).items():
        mark = "?" if field in optional else ""
        lines.append(f"  {field}{mark}: {ts_type(annotation)};")
    lines.append("}")
    return "\n".join(lines)


def _ts_union(name: str, union: object) -> str:
    members = "\n".join(f"  | {_ts_name(cls)}" for cls in typing.get_args(union))
    return f"export type {name} =\n{members};"


def typescript() -> str:
    """The contents of `labextension/src/wire.ts`."""
    parts = [
        "/**\n"
        " * Wire types of the Prime Agent server API (docs/api.md).\n"
        " *\n"
        " * GENERATED from prime_agent_lab/core/wire.py (and the session entry types of\n"
        " * core/entry_types.py); do not edit. Regenerate with\n"
        " *   python -m prime_agent_lab.core.wire --ts > labextension/src/wire.ts\n"
        " */"
    ]
    parts += [f"export type {name} = {_ts_expansion(alias)};" for name, alias in _ALIASES.items()]
    parts += [_ts_interface(cls) for cls in _INTERFACES]
    parts += [_ts_union(name, union) for name, union in _UNIONS.items()]
    notices = "".join(f"\n  {key}: {json.dumps(text)}," for key, text in STOP_NOTICES.items())
    parts.append(
        "/** The notice line for a turn that ended this way. */\n"
        f"export const STOP_NOTICES: Partial<Record<StopReason, string>> = {{{notices}\n}};"
    )
    warnings = ", ".join(f"'{kind}'" for kind in sorted(WARNING_NOTICES))
    parts.append(
        "/** Notice kinds the chat shows as warnings (the user lost state, something failed). */\n"
        "export const WARNING_NOTICES: ReadonlySet<NoticeKind> = "
        f"new Set<NoticeKind>([{warnings}]);"
    )
    parts.append("export type AgentEventType = AgentEvent['type'];")
    parts.append("export type ChatItemType = ChatItem['type'];")
    return "\n\n".join(parts) + "\n"


def main(argv: list[str]) -> int:
    if argv != ["--ts"]:
        print("usage: python -m prime_agent_lab.core.wire --ts > labextension/src/wire.ts")
        return 2
    sys.stdout.write(typescript())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
