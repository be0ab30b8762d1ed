"""The Agents View: every agent the server knows as rows of one tree (docs/agents-view.md).

The tree comes from the session headers (core/family.py). What a row says about an agent is kept
in three separate fields: `state` (what it does now, from memory), `outcome` (how its last task or
turn ended, from its log) and `residency` (whether it is in memory). A resident agent's log is in
memory; any other's figures are read from its file once per version of the file (`FileMemo`:
inode, size and times), so a request rereads only the logs that changed since the last one. A
refused member (core/member_rules.py) is a row of its own with its `problem`, outside any tree.
"""

from __future__ import annotations

import posixpath
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, get_args

from .family import Member
from .file_memo import FileMemo
from .sessions import SESSION_FILE, SessionError, SessionLog
from .usage import session_cost, session_usage
from .wire import AgentOutcome, AgentRow, AgentsOverview, AgentState, AgentTokens, AgentWaitingFor

if TYPE_CHECKING:
    from .runtime import AgentRuntime

STATES: tuple[AgentState, ...] = get_args(AgentState)

TURN_OUTCOMES: dict[str, AgentOutcome] = {
    "end_turn": "completed",
    "stopped": "stopped",
    "error": "error",
    "max_iterations": "error",
    "interrupted": "error",
    "shutdown": "error",
}
"""A turn's `stop_reason` as an outcome (the same words as a sub-agent's task outcome)."""


@dataclass(frozen=True)
class LogFacts:
    """What a row shows that only the agent's session log knows."""

    notebook: str
    outcome: AgentOutcome | None
    tokens: AgentTokens
    cost: float | None
    last_activity: str
    model: str


def log_facts(session: SessionLog, is_child: bool) -> LogFacts:
    from .runtime import task_outcome  # the runtime owns what a sub-agent's task is

    outcome: AgentOutcome | None = None
    if is_child:
        outcome = task_outcome(session)  # type: ignore[assignment]
    if outcome is None:
        last = session.last_of("turn_end")
        if last is not None:
            outcome = TURN_OUTCOMES.get(str(last.get("stop_reason")))
    usage = session_usage(session)
    provider, model = session.current_model()
    return LogFacts(
        notebook=session.notebook_path,
        outcome=outcome,
        tokens={"input": usage.get("input_tokens", 0), "output": usage.get("output_tokens", 0)},
        cost=session_cost(session),
        last_activity=session.updated() or _modified(session),
        model=f"{provider} · {model}" if provider and model else model or provider,
    )


def _modified(session: SessionLog) -> str:
    try:
        stamp = session.file.stat().st_mtime
    except OSError:
        return ""
    return datetime.fromtimestamp(stamp, UTC).isoformat(timespec="milliseconds")


class AgentsOverviewBuilder:
    """Builds `AgentsOverview` for one runtime, keeping each log's facts until the log changes."""

    def __init__(self, runtime: AgentRuntime) -> None:
        self._runtime = runtime
        self._files: FileMemo[LogFacts | None] = FileMemo(self._read)  # agents not in memory
        self._in_memory: dict[str, tuple[tuple[int, int], LogFacts]] = {}  # resident agents
        self._log_files: dict[str, Path] = {}  # made once: a Path costs more than its `stat`
        self._lock = threading.Lock()
        self._children: dict[str | None, list[Member]] = {}  # during a walk (`_index`)
        self.logs_read = 0  # files read from disk (the memo's misses), for tests and benchmarks

    # ------------------------------------------------------------ the overview

    def overview(self, state: AgentState | None = None) -> AgentsOverview:
        """Every agent as rows (a depth-first walk), those in `state` only when given. Reads
        from disk only the logs that changed since the last call (the first call reads all)."""
        family = self._runtime.family
        family.refresh()
        members = family.members(deleted=True)
        self._forget_others(members)
        self._index(members)
        roots = [m for m in self._children.get(None, []) if not family.is_deleted(m.session_id)]
        rows: list[AgentRow] = []
        try:
            for root in roots:
                rows += self._subtree(root)
        finally:
            self._children = {}
        rows_by_root: dict[str, list[AgentRow]] = {}
        for row in rows:
            rows_by_root.setdefault(row["root_id"], []).append(row)
        ordered = sorted(
            rows_by_root.values(), key=lambda tree: tree[0]["last_activity"], reverse=True
        )
        agents = [row for tree in ordered for row in tree]
        if state is not None:
            agents = [row for row in agents if row["state"] == state]
        return {"agents": agents, "generated_at": _now()}

    def _index(self, members: list[Member]) -> None:
        """Children by parent (None: the roots, and refused members, each outside any tree),
        oldest first, for one walk of the tree."""
        self._children = {}
        for member in members:
            parent = None if member.refused else member.parent_session_id
            self._children.setdefault(parent, []).append(member)

    def _forget_others(self, members: list[Member]) -> None:
        """Keep facts only for the members there are now: a removed folder leaves nothing."""
        runtime = self._runtime
        self._files.keep_only([self._log_file(m) for m in members])
        present = {m.session_id for m in members}
        resident = present & runtime.agents.keys()
        with self._lock:
            for gone in self._in_memory.keys() - resident:
                del self._in_memory[gone]
            for gone in self._log_files.keys() - present:
                del self._log_files[gone]

    def _children_of(self, session_id: str, deleted: bool = False) -> list[Member]:
        family = self._runtime.family
        found = self._children.get(session_id, [])
        return found if deleted else [m for m in found if not family.is_deleted(m.session_id)]

    def _subtree(self, root: Member) -> list[AgentRow]:
        """Rows of a root and the agents below it, depth first; totals include deleted children
        (what was spent stays spent). A loop that hand-edited headers make is cut."""
        rows: list[AgentRow] = []
        self._walk(root, root.session_id, 0, frozenset(), rows)
        return rows

    def _walk(
        self, member: Member, root_id: str, depth: int, above: frozenset[str], rows: list[AgentRow]
    ) -> tuple[AgentTokens, float | None]:
        family = self._runtime.family
        facts = self.facts(member)
        row = self._row(member, root_id, depth, facts)
        visible = not family.is_deleted(member.session_id)
        if visible:
            rows.append(row)
        tokens = dict(row["tokens_own"])
        cost = row["cost_own"]
        above = above | {member.session_id}
        for child in self._children_of(member.session_id, deleted=True):
            if child.session_id in above:
                continue
            below: list[AgentRow] = []
            child_tokens, child_cost = self._walk(child, root_id, depth + 1, above, below)
            tokens["input"] += child_tokens["input"]
            tokens["output"] += child_tokens["output"]
            cost = None if cost is None or child_cost is None else cost + child_cost
            if visible:
                rows += below
        row["tokens_total"] = {"input": tokens["input"], "output": tokens["output"]}
        row["cost_total"] = cost
        return row["tokens_total"], cost

    def _row(self, member: Member, root_id: str, depth: int, facts: LogFacts | None) -> AgentRow:
        runtime = self._runtime
        agent = runtime.agents.get(member.session_id)
        state, waiting_for = self.state_of(member.session_id)
        if member.refused:  # its header's claims are not shown as facts, nor offered to open
            notebook = None
        else:
            notebook = (
                agent.session.notebook_path
                if agent is not None
                else (facts.notebook if facts is not None else member.notebook_path)
            ) or None
        tokens: AgentTokens = facts.tokens if facts is not None else {"input": 0, "output": 0}
        return {
            "session_id": member.session_id,
            "name": (
                member.name or member.session_id
                if member.parent_session_id
                else _stem(notebook or "") or member.session_id
            ),
            "parent_id": None if member.refused else member.parent_session_id,
            "root_id": root_id,
            "depth": depth,
            "notebook": notebook,
            "state": state,
            "waiting_for": waiting_for,
            "outcome": facts.outcome if facts is not None else None,
            "residency": "resident" if agent is not None else "evicted",
            "model": facts.model if facts is not None else member.model,
            "tokens_own": dict(tokens),  # type: ignore[typeddict-item]
            "tokens_total": dict(tokens),  # type: ignore[typeddict-item]
            "cost_own": facts.cost if facts is not None else None,
            "cost_total": facts.cost if facts is not None else None,
            "last_activity": (facts.last_activity if facts is not None else "") or member.created,
            "can_message": depth <= 1 and not member.problem,  # as the root's owner (reach.py)
            "can_delete": depth >= 1 and state == "idle" and not member.problem,
            "problem": _problem_text(member),
        }

    # ------------------------------------------------------------ state and facts

    def state_of(self, session_id: str) -> tuple[AgentState, AgentWaitingFor | None]:
        """What the agent does now (docs/agents-view.md, "state and waiting_for")."""
        runtime = self._runtime
        agent = runtime.agents.get(session_id)
        children_running = any(
            _running(runtime.agents.get(child.session_id))
            for child in self._children_of(session_id)
        )
        if _running(agent):
            if agent.current_cell_id is not None and children_running:
                return "waiting", "child"
            return "running", None
        if children_running:
            return "waiting", "child"
        if runtime.mailbox.pending(session_id):
            return "waiting", "mail"
        return "idle", None

    def read_logs(self) -> None:
        """Read the logs of agents not in memory that changed since they were last read (all
        of them the first time; a `stat` each otherwise): the slow part, which touches no agent
        in memory, so a host runs it off its event loop before `overview`."""
        runtime = self._runtime
        runtime.family.refresh()
        for member in runtime.family.members(deleted=True):
            if member.session_id not in runtime.agents:
                self._files.get(self._log_file(member))

    def facts(self, member: Member) -> LogFacts | None:
        """The log's facts: from memory for a resident agent, else from the file (read again
        only when it changed). None when the log cannot be read."""
        agent = self._runtime.agents.get(member.session_id)
        if agent is None:
            return self._files.get(self._log_file(member))
        session = agent.session
        version = (id(session), len(session.entries))
        with self._lock:
            cached = self._in_memory.get(member.session_id)
        if cached is not None and cached[0] == version:
            return cached[1]
        facts = log_facts(session, member.parent_session_id is not None)
        with self._lock:
            self._in_memory[member.session_id] = (version, facts)
        return facts

    def _log_file(self, member: Member) -> Path:
        with self._lock:  # `read_logs` runs in a worker thread while a request may build rows
            found = self._log_files.get(member.session_id)
            if found is None:
                found = self._runtime.repository.directory(member.session_id) / SESSION_FILE
                self._log_files[member.session_id] = found
        return found

    def _read(self, file: Path) -> LogFacts | None:
        """A log not in memory (its folder's name is its session id); None when unreadable."""
        self.logs_read += 1
        try:
            session = self._runtime.repository.read(file.parent.name)
        except SessionError:
            return None
        return log_facts(session, session.header.get("parent_session_id") not in (None, ""))


def _problem_text(member: Member) -> str | None:
    """What the row says of a refused member, or of one whose folder is gone (None: sound)."""
    if not member.problem:
        return None
    if member.refused:
        return (
            f"Refused: {member.problem}. Nothing loads it; remove its session folder if it is "
            "not yours."
        )
    return member.problem[:1].upper() + member.problem[1:] + "."


def _running(agent: object) -> bool:
    return agent is not None and bool(getattr(agent, "running", False))


def _stem(notebook: str) -> str:
    base = posixpath.basename(notebook)
    return base[: -len(".ipynb")] if base.endswith(".ipynb") else base


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_state(value: str | None) -> AgentState | None:
    """`?state=` of the overview: one of STATES, or None for all; ValueError otherwise."""
    if value is None or value == "":
        return None
    if value not in STATES:
        raise ValueError(f"state must be one of {', '.join(STATES)}, not {value[:40]!r}")
    return value  # type: ignore[return-value]
