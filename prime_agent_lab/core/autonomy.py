"""Autonomous runs: the `autonomous` continuer, the run's budgets and its gates (docs/autonomy.md).

While a session's autonomous mode is on, each of its turns is an autonomous run. When the model
answers without a cell, the run's gates run in order (core/gates.py): all pass, the run ends; one
fails, its output goes to the model as the continuation. A failed gate is not re-run while the
workspace fingerprint (core/fingerprint.py) is unchanged. Without gates the default
continuation prompt keeps the run going a few times. Budgets (model calls, tokens, wall time) are
checked at every model call of the run's agent tree, and a timer stops the run at its timeout,
also in the middle of a cell or a gate.

Only a turn the user starts is a run (not one a heartbeat tick, a sub-agent's notice or another
agent's message starts). Before its gates run (and before it may end) the run waits until its
sub-agents are settled (core/settle.py, the goal continuer's wait), its budgets still checked at
their model calls; when it ends, for any reason, the sub-agents still working are stopped and
its figures are frozen.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .autonomy_config import AutonomyConfig, Budgets, SubAgentRefused
from .autonomy_switch import (
    describe_untrusted,
    latest_configured,
    signed_switch,
    switch_is_signed,
)
from .autonomy_texts import CONTINUATION_PROMPT, gate_failure_texts
from .entry_types import AUTONOMY_REASONS, autonomy_line, gate_line
from .events import Event, EventBus
from .fingerprint import Fingerprint, harness_paths, workspace_fingerprint
from .gates import Gate, GateResult, parse_gate, run_python_gate, run_shell_gate
from .settings import Settings
from .settle import settled
from .stop_cause import USER_STOP, StopCause, budget_used

if TYPE_CHECKING:
    from .agent import Agent, TurnOutcome
    from .caller import TreeRuntime
    from .wire import AutonomyRun, AutonomyState

log = logging.getLogger(__name__)

SUCCESS = frozenset({"gates_passed", "goal_complete", "continuations_used"})
TOKEN_KEYS = ("input_tokens", "output_tokens", "cache_write_tokens")  # cache reads excluded
_TURN_END_REASONS = {"stopped": "stopped", "shutdown": "stopped", "max_iterations": "max_turns"}
ORIGIN_FIELDS = ("message_id", "from_session_id", "schedule_id")
"""A turn's `user_message` with one of these was started by another agent, a sub-agent's notice
or a schedule's tick, not by the user: it is an ordinary turn, never an autonomous run."""


@dataclass
class _GateRecord:
    checks: int = 0  # times this gate was checked in the run (runs and skips)
    failures: int = 0
    failed_at: Fingerprint | None = None  # the workspace after it failed
    failed_cells: int = 0  # agent cells run when it failed (a `py:` gate may run after more)
    output: str = ""  # its output when it last ran
    exit_status: int | None = None  # and its exit status then


@dataclass
class AutonomousRun:
    session_id: str
    turn: int
    config: AutonomyConfig
    started: str  # ISO time
    clock: float  # monotonic start
    first_entry: int  # the session's entries before the run
    tokens_before: int  # of the agent tree
    continuations: int = 0
    reason: str | None = None  # how it ended (or is ending)
    gates: dict[str, _GateRecord] = field(default_factory=dict)
    timer: asyncio.TimerHandle | None = None
    ended: bool = False
    final: AutonomyRun | None = None  # its figures when it ended (they no longer change)


class Autonomy:
    """The autonomous mode of every session of one runtime, and their runs."""

    def __init__(self, runtime: TreeRuntime) -> None:
        self.runtime = runtime
        self.root = Path.cwd()  # the folder notebook paths are relative to (the server's root)
        self.recorded = True  # a session's recorded switch counts (the server; a CLI run's flags)
        self._configs: dict[str, AutonomyConfig] = {}
        self._runs: dict[str, AutonomousRun] = {}
        # the buses listened to: an agent loaded again has a new one
        self._listening: weakref.WeakSet[EventBus] = weakref.WeakSet()
        self._first_turn: dict[str, int] = {}  # switched on mid-turn: runs start with the next
        self._ordinary_turn: dict[str, int] = {}  # the latest turn the user did not start
        # files the fingerprint leaves out besides the harness's: a CLI run's own output files
        self.unwatched: tuple[Path, ...] = ()
        runtime.continuers.add("autonomous", self.should_continue)

    @property
    def settings(self) -> Settings:
        return self.runtime.settings

    # ------------------------------------------------------------ mode and state

    def config(self, session_id: str) -> AutonomyConfig:
        """The session's mode: as set, else as its log last recorded it, else the settings'. A
        recorded switch this user did not sign (a cloned folder's) means off: neither it nor
        the settings' default turns the mode on until the session is trusted."""
        known = self._configs.get(session_id)
        if known is not None:
            return known
        config = self._defaults(root=self._parent(session_id) is None)
        entry = self._configured(session_id) if self.recorded else None
        if entry is not None:
            if self._signed(entry):
                config = self._recorded(entry, config)
            else:
                config = replace(config, enabled=False)
        self._configs[session_id] = config
        return config

    def _configured(self, session_id: str) -> dict[str, Any] | None:
        return latest_configured(self.runtime.session_of(session_id))

    def _signed(self, entry: dict[str, Any]) -> bool:
        return switch_is_signed(entry, self.runtime.signer)

    def untrusted(self, session_id: str) -> str | None:
        """What the session's recorded switch would turn on, when this user did not sign it
        (None: signed, never switched, or switched off)."""
        entry = self._configured(session_id)
        return describe_untrusted(entry) if entry is not None and not self._signed(entry) else None

    def trust(self, session_id: str) -> bool:
        """The user trusts the session: its recorded switch counts from now, as a signed copy
        of its latest `configured` entry appended to the path. True if there was one to sign.
        May run off the event loop (it only writes the log)."""
        entry = self._configured(session_id)
        session = self.runtime.session_of(session_id)
        if entry is None or session is None or self.untrusted(session_id) is None:
            return False
        signed = signed_switch(self.runtime.signer, entry)
        # a field the entry left out stays out (it reads back as None, as it was signed)
        fields = {key: value for key, value in signed.items() if value is not None}
        session.append("autonomy", event="configured", **fields)
        self._configs.pop(session_id, None)
        return True

    def trusted(self, agent: Agent) -> None:
        """After `trust`, on the event loop: the switch's chat line and state for the client;
        a turn under way is not a run, the next message's is."""
        entry = self._configured(agent.session_id)
        if entry is None or not self.config(agent.session_id).enabled:
            return
        if agent.current_turn is not None:
            self._first_turn[agent.session_id] = agent.current_turn + 1
        self._notice(agent, entry)
        self._emit_state(agent)

    def _defaults(self, root: bool) -> AutonomyConfig:
        """The settings' mode; only an agent the user talks to runs autonomously."""
        gates = tuple(parse_gate(g) for g in self.settings.autonomous_gates)
        enabled = self.settings.autonomous and root
        return AutonomyConfig(enabled, Budgets.of(self.settings), gates)

    def _recorded(self, entry: dict[str, Any], default: AutonomyConfig) -> AutonomyConfig:
        try:
            budgets = Budgets.from_wire(entry.get("budgets", {}), self.settings, hold_to_locks=True)
            gates = tuple(parse_gate(str(g)) for g in entry.get("gates") or [])
        except (ValueError, SyntaxError):
            return default  # a record this build cannot read: the settings' mode
        return AutonomyConfig(bool(entry.get("enabled")), budgets, gates, persisted=True)

    def configure(
        self,
        agent: Agent,
        enabled: bool,
        budgets: Budgets | None = None,
        gates: list[str] | None = None,
        persist: bool = True,
    ) -> AutonomyConfig:
        """Turn autonomous mode on or off (ValueError or SyntaxError: a bad gate, nothing
        changed). `persist`: recorded in the session (the server's switch) so a restart keeps
        it; a CLI run's flags are not. Turning it off lets a running run end at the model's
        next answer (reason `stopped`)."""
        if enabled and self._parent(agent.session_id) is not None:
            raise SubAgentRefused(
                "a sub-agent does not run autonomously: switch on its parent (the agent you "
                "talk to); its sub-agents' work counts in that run's budgets"
            )
        current = self.config(agent.session_id)
        parsed = tuple(parse_gate(g) for g in gates) if gates is not None else current.gates
        config = AutonomyConfig(enabled, budgets or current.budgets, parsed, persisted=persist)
        self._configs[agent.session_id] = config
        if enabled and agent.current_turn is not None:  # the next message's turn is the run
            self._first_turn[agent.session_id] = agent.current_turn + 1
        run = self._runs.get(agent.session_id)
        if not enabled and run is not None and not run.ended and run.reason is None:
            run.reason = "stopped"
        if persist:
            fields = {
                "enabled": enabled,
                "budgets": dict(config.budgets.wire()),
                "gates": [g.command for g in config.gates],
            }
            entry = agent.session.append(
                "autonomy",
                turn=agent.current_turn,
                event="configured",
                **signed_switch(self.runtime.signer, fields),
            )
            self._notice(agent, entry)
        self._emit_state(agent)
        return config

    def run(self, session_id: str) -> AutonomousRun | None:
        """The session's current or last run."""
        return self._runs.get(session_id)

    def state(self, session_id: str) -> AutonomyState:
        config = self.config(session_id)
        run = self._runs.get(session_id)
        return {
            "enabled": config.enabled,
            "budgets": config.budgets.wire(),
            "gates": [g.command for g in config.gates],
            "run": self._run_state(run) if run is not None else None,
        }

    def _run_state(self, run: AutonomousRun) -> AutonomyRun:
        if run.final is not None:
            return run.final
        return {
            "started": run.started,
            "turns": self._turns(run),
            "tokens": self._tokens(run),
            "elapsed_seconds": round(time.monotonic() - run.clock, 3),
            "continuations": run.continuations,
            "reason": run.reason if run.ended else None,
        }

    def _emit_state(self, agent: Agent) -> None:
        agent.events.emit("autonomy", state=self.state(agent.session_id))

    # ------------------------------------------------------------ budgets

    def _turns(self, run: AutonomousRun) -> int:
        session = self.runtime.session_of(run.session_id)
        entries = session.entries[run.first_entry :] if session is not None else []
        return sum(1 for e in entries if e["type"] == "assistant_message")

    def _tree_tokens(self, session_id: str) -> int:
        usage = self.runtime.tree_usage(session_id)
        return sum(usage.get(key, 0) for key in TOKEN_KEYS)

    def _tokens(self, run: AutonomousRun) -> int:
        return self._tree_tokens(run.session_id) - run.tokens_before

    def _over_budget(self, run: AutonomousRun) -> str | None:
        budgets = run.config.budgets
        if self._turns(run) >= budgets.max_turns:
            return "max_turns"
        if self._tokens(run) >= budgets.max_tokens:
            return "max_tokens"
        if time.monotonic() - run.clock >= budgets.timeout_minutes * 60:
            return "timeout"
        return None

    def _ended_by_budget(self, run: AutonomousRun) -> bool:
        """Before a continuation: a used-up budget ends the run, with it as the reason."""
        over = self._over_budget(run)
        if over is not None:
            run.reason = over
        return over is not None

    def _stop_cause(self, run: AutonomousRun, reason: str) -> StopCause:
        budgets = run.config.budgets
        what = {
            "max_turns": f"its budget of {budgets.max_turns} model calls",
            "max_tokens": f"its budget of {budgets.max_tokens:,} tokens",
            "timeout": f"its time budget of {budgets.timeout_minutes:g} minutes",
        }[reason]
        return budget_used(what)

    def _stop_run(self, run: AutonomousRun, reason: str) -> None:
        """End the run now: its agent's turn and its sub-agents' turns are stopped."""
        if run.reason is None:
            run.reason = reason
        cause = self._stop_cause(run, run.reason) if run.reason in _BUDGETS else USER_STOP
        self.runtime.spawn(self.runtime.stop_subtree(run.session_id, cause))

    def _time_up(self, run: AutonomousRun) -> None:
        run.timer = None
        if not run.ended:
            self._stop_run(run, "timeout")

    # ------------------------------------------------------------ the hooks

    async def at_model_call(self, agent: Agent, turn: int) -> None:
        """Before every model call of any agent: a root whose mode is on starts its run with its
        turn's first call; a call past the budget of the run it belongs to ends that run."""
        run = self._runs.get(agent.session_id)
        fresh = run is None or run.turn != turn
        due = turn >= self._first_turn.get(agent.session_id, 0)
        enabled = self.config(agent.session_id).enabled
        root = self._parent(agent.session_id) is None
        if fresh and due and enabled and root and self._started_by_user(agent, turn):
            run = self._start(agent, turn)
        if run is None or run.turn != turn:
            run = self._run_above(agent.session_id)
        if run is None or run.ended or run.reason is not None:
            return
        over = self._over_budget(run)
        if over is None:
            return
        self._stop_run(run, over)
        await asyncio.Event().wait()  # the stop cancels this turn here

    def _started_by_user(self, agent: Agent, turn: int) -> bool:
        """The turn's `user_message` is the user's own (no other agent's, notice's or tick's
        origin fields): only such a turn starts a run."""
        if self._ordinary_turn.get(agent.session_id) == turn:
            return False
        for entry in reversed(agent.session.entries):
            if entry["type"] == "user_message" and entry.get("turn") == turn:
                if entry.get("from_user") is not True and any(entry.get(k) for k in ORIGIN_FIELDS):
                    self._ordinary_turn[agent.session_id] = turn
                    return False
                return True
        return True  # its message could not be written: the turn fails at once anyway

    def _parent(self, session_id: str) -> str | None:
        member = self.runtime.family.member(session_id)
        return member.parent_session_id if member is not None else None

    def _run_above(self, session_id: str) -> AutonomousRun | None:
        """The running run of an ancestor of `session_id` (its sub-agents' calls count)."""
        member = self.runtime.family.member(session_id)
        while member is not None and member.parent_session_id is not None:
            run = self._runs.get(member.parent_session_id)
            if run is not None and not run.ended:
                return run
            member = self.runtime.family.member(member.parent_session_id)
        return None

    def _start(self, agent: Agent, turn: int) -> AutonomousRun:
        config = self.config(agent.session_id)
        run = AutonomousRun(
            session_id=agent.session_id,
            turn=turn,
            config=config,
            started=datetime.now(UTC).isoformat(timespec="seconds"),
            clock=time.monotonic(),
            first_entry=len(agent.session.entries),
            tokens_before=self._tree_tokens(agent.session_id),
        )
        earlier = self._runs.get(agent.session_id)
        if earlier is not None and earlier.timer is not None:  # never saw its end (reloaded)
            earlier.timer.cancel()
        self._runs[agent.session_id] = run
        run.timer = asyncio.get_running_loop().call_later(
            config.budgets.timeout_minutes * 60, self._time_up, run
        )
        if agent.events not in self._listening:
            self._listening.add(agent.events)
            agent.events.add_listener(self._listener(agent))
        entry = agent.session.append(
            "autonomy",
            turn=turn,
            event="started",
            budgets=dict(config.budgets.wire()),
            gates=[g.command for g in config.gates],
        )
        self._notice(agent, entry)
        self._emit_state(agent)
        return run

    def _listener(self, agent: Agent) -> Callable[[Event], None]:
        def on_event(event: Event) -> None:
            run = self._runs.get(agent.session_id)
            if run is None or run.ended or event.get("turn") != run.turn:
                return
            if event["type"] == "assistant_message":
                self._emit_state(agent)
            elif event["type"] == "turn_ended":
                self._end(agent, run, str(event.get("stop_reason")))

        return on_event

    def _end(self, agent: Agent, run: AutonomousRun, stop_reason: str) -> None:
        run.ended = True
        if run.timer is not None:
            run.timer.cancel()
        stopped_by_user = run.reason is None and stop_reason == "stopped"  # not a budget's stop
        if run.reason is None:
            run.reason = _TURN_END_REASONS.get(stop_reason, "error")
        used = run.final = self._run_state(run)
        working = self._stop_descendants(run)
        stopped = {"stopped_sub_agents": working} if working else {}
        entry = agent.session.append(
            "autonomy",
            turn=run.turn,
            event="ended",
            reason=run.reason,
            budgets=dict(run.config.budgets.wire()),
            gates=[g.command for g in run.config.gates],
            used={
                "turns": used["turns"],
                "tokens": used["tokens"],
                "seconds": used["elapsed_seconds"],
                "continuations": used["continuations"],
            },
            **stopped,
        )
        self._notice(agent, entry)
        config = self.config(agent.session_id)
        if stopped_by_user and config.enabled:  # Stop turns it off; a server shutdown does not
            self.configure(agent, False, persist=config.persisted)
        else:
            self._emit_state(agent)

    def _stop_descendants(self, run: AutonomousRun) -> list[str]:
        """Stop every sub-agent of the run still working when it ends (nothing runs on under
        a run that ended); their names."""
        words = AUTONOMY_REASONS.get(str(run.reason), str(run.reason))
        cause = StopCause(
            "stopped", f"the autonomous run it worked for ended ({words}), which stopped the turn"
        )
        working = [self.runtime.agents.get(sid) for sid in self.runtime.descendants(run.session_id)]
        names = [a.session.header.get("name") or a.session_id for a in working if a and a.running]
        if names:
            self.runtime.spawn(self.runtime.stop_subtree(run.session_id, cause, with_root=False))
        return names

    def _notice(self, agent: Agent, entry: dict[str, Any]) -> None:
        fields = {"turn": entry["turn"]} if entry.get("turn") is not None else {}
        agent.events.emit("notice", kind="autonomy", text=autonomy_line(entry), **fields)

    # ------------------------------------------------------------ the continuer

    async def should_continue(self, agent: Agent, outcome: TurnOutcome) -> bool:
        """After an answer without a cell: end the run (its reason set) or continue it."""
        run = self._runs.get(agent.session_id)
        if run is None or run.ended or run.turn != outcome.turn or run.reason is not None:
            return False
        if not await settled(self.runtime, agent):
            return True  # the turn takes the message that came; asked again after the answer
        if run.ended or run.reason is not None:  # switched off (or stopped) meanwhile
            return False
        if self.runtime.mailbox.entering_turn(agent.session_id):
            return True  # what the sub-agents said (a failure, a reply) is read before the gates
        if self._goal_complete(agent, run):
            run.reason = "goal_complete"
            return False
        if not run.config.gates:
            return self._continue_without_gates(agent, run)
        for index, gate in enumerate(run.config.gates, start=1):
            result, record = await self._check(agent, run, gate)
            if result.passed:
                continue
            if record.failures >= self.settings.gate_retries:
                run.reason = "retries_exhausted"
                return False
            if self._ended_by_budget(run):
                return False
            text, summary = gate_failure_texts(
                gate.command,
                (index, len(run.config.gates)),
                (record.failures, self.settings.gate_retries),
                record.exit_status,
                record.output,
                unchanged=((record.failed_at.note or "") if record.failed_at is not None else "")
                if result is _UNCHANGED
                else None,
            )
            agent.continue_with(text, "gate", summary)
            return True
        run.reason = "gates_passed"
        return False

    def _goal_complete(self, agent: Agent, run: AutonomousRun) -> bool:
        """A goal was completed during the run (`goal.complete()`: a `goal` entry of change
        `complete` since the run began, core/goals.py)."""
        entries = agent.session.entries[run.first_entry :]
        return any(e["type"] == "goal" and e.get("change") == "complete" for e in entries)

    def _continue_without_gates(self, agent: Agent, run: AutonomousRun) -> bool:
        allowed = run.config.budgets.continuations
        if run.continuations >= allowed:
            run.reason = "continuations_used"
            return False
        if self._ended_by_budget(run):
            return False
        run.continuations += 1
        summary = (
            f"Autonomous run continues ({run.continuations} of {allowed}): no human is available."
        )
        agent.continue_with(CONTINUATION_PROMPT, "autonomous", summary)
        self._emit_state(agent)
        return True

    # ------------------------------------------------------------ running a gate

    def folder(self, agent: Agent) -> Path:
        """The run's folder: the one its notebook is in."""
        return (self.root / agent.session.notebook_path).parent

    def _excluded(self, agent: Agent) -> tuple[str, ...]:
        folder = self.folder(agent).resolve()
        notebook = (self.root / agent.session.notebook_path).resolve()
        excluded: list[str] = []
        for path in self.unwatched:
            with contextlib.suppress(ValueError):
                excluded.append(path.resolve().relative_to(folder).as_posix())
        with contextlib.suppress(ValueError):
            excluded += harness_paths(notebook.relative_to(folder).as_posix())
        return tuple(excluded)

    async def _fingerprint(self, agent: Agent) -> Fingerprint:
        return await asyncio.to_thread(
            workspace_fingerprint, self.folder(agent), self._excluded(agent)
        )

    @staticmethod
    def _cells(agent: Agent) -> int:
        return sum(1 for e in agent.session.entries if e["type"] == "cell_started")

    async def _check(
        self, agent: Agent, run: AutonomousRun, gate: Gate
    ) -> tuple[GateResult, _GateRecord]:
        record = run.gates.setdefault(gate.command, _GateRecord())
        record.checks += 1
        if record.failed_at is not None:
            ran_cells = gate.kind == "python" and self._cells(agent) > record.failed_cells
            if not ran_cells and await self._fingerprint(agent) == record.failed_at:
                record.failures += 1
                self._record(agent, run, gate, record, _UNCHANGED)
                return _UNCHANGED, record
        result = await self._run_gate(agent, gate)
        record.output, record.exit_status = result.output, result.exit_status
        if result.passed:
            record.failed_at = None
        else:
            record.failures += 1
            record.failed_at = await self._fingerprint(agent)
            record.failed_cells = self._cells(agent)
        self._record(agent, run, gate, record, result)
        return result, record

    async def _run_gate(self, agent: Agent, gate: Gate) -> GateResult:
        settings = self.settings
        if gate.kind == "python":
            return await run_python_gate(
                gate, agent.kernel, settings.gate_timeout, settings.gate_output_chars
            )
        return await run_shell_gate(
            gate, self.folder(agent), settings.gate_timeout, settings.gate_output_chars
        )

    def _record(
        self,
        agent: Agent,
        run: AutonomousRun,
        gate: Gate,
        record: _GateRecord,
        result: GateResult,
    ) -> None:
        skipped = result is _UNCHANGED
        fields: dict[str, Any] = {
            "command": gate.command,
            "kind": gate.kind,
            "attempt": record.checks,
            "exit_status": None if skipped else result.exit_status,
            "passed": result.passed,
            "seconds": round(result.seconds, 3),
            "output": record.output if skipped else result.output,
            "skipped_unchanged": skipped,
        }
        agent.session.append("gate_run", turn=run.turn, **fields)
        line = gate_line(fields)
        kind = "gate_passed" if result.passed else "gate_failed"
        agent.events.emit("gate_run", turn=run.turn, text=line, **fields)
        agent.events.emit("notice", turn=run.turn, kind=kind, text=line)


_BUDGETS = frozenset({"max_turns", "max_tokens", "timeout"})
_UNCHANGED = GateResult(Gate("(not run)"), None, "", 0.0)
"""The result of a failed gate that was not re-run: the workspace is unchanged since."""
