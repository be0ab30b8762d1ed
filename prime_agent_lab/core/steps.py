"""A saved session as steps for the step-through (docs/teaching.md, "Step-through").

One step is one cell the model asked to run (or an answer with no cell): the model's text, the
code, the observation exactly as the model read it (`tool_result.observation`, cut markers and
all), the message that opened the turn, what it read in between, timing and tokens, and the
sub-agents the cell spawned. Steps are folded from `transcript.history_records` (the kernel's
`history` projection), so which entry types count is declared once, in `entry_types.py`. A
sub-agent's own steps are its session's steps, fetched by its id.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from .observation import CUT_MARKER
from .sessions import SessionLog
from .token_counts import counted
from .transcript import history_records
from .wire import SessionStep, SessionSteps, StepChild


def session_steps(session: SessionLog, children: Collection[str] | None = None) -> SessionSteps:
    """The steps on the path to the session's leaf, in order. `children`: the sessions the tree
    of agents knows as this one's sub-agents; a `child_spawned` entry naming any other session
    (itself, another tree's root: a log from elsewhere) gets no lane."""
    header = session.header
    steps = _Fold().steps(history_records(session))
    if children is not None:
        for step in steps:
            step["children"] = [c for c in step["children"] if c["session_id"] in children]
    return {
        "session_id": session.session_id,
        "notebook_path": session.notebook_path,
        "name": _text_or_none(header.get("name")),
        "parent_session_id": _text_or_none(header.get("parent_session_id")),
        "steps": steps,
        "broken": session.damage,
    }


class _Fold:
    """Walks the history records once, keeping what the next step needs."""

    def __init__(self) -> None:
        self.out: list[SessionStep] = []
        self.opening: dict[str, Any] | None = None  # the turn's opening message
        self.received: list[str] = []  # read since the last model call
        self.previous_ts: str | None = None
        self.waiting: dict[str, SessionStep] = {}  # tool call id -> its step, until its result
        self.spawned: list[StepChild] = []  # children whose cell has no result yet
        self.spawned_by_cell: dict[str, list[StepChild]] = {}

    def steps(self, records: list[dict[str, Any]]) -> list[SessionStep]:
        for record in records:
            kind = record["type"]
            if kind == "user_message":
                self.opening, self.received = record, []
            elif kind in ("agent_message", "continuation"):
                self.received.append(str(record.get("text", "")))
            elif kind == "assistant_message":
                self._answer(record)
            elif kind == "child_spawned":
                self._spawned(record)
            elif kind == "tool_result":
                self._result(record)
            elif kind == "cell_approval" and record.get("decision") == "edit":
                step = self.waiting.get(str(record.get("tool_call_id")))
                if step is not None and isinstance(record.get("code"), str):
                    step["code"] = record["code"]  # what ran is the user's edit
            if isinstance(record.get("ts"), str):
                self.previous_ts = record["ts"]
        return self.out

    def _answer(self, record: dict[str, Any]) -> None:
        calls = record.get("tool_calls") or [{}]
        usage = record.get("usage")
        for position, call in enumerate(calls):
            step: SessionStep = {
                "index": len(self.out),
                "turn": record.get("turn") if isinstance(record.get("turn"), int) else None,
                "entry_id": str(record.get("id", "")),
                "user_message": _text_or_none((self.opening or {}).get("text")),
                "user_from": _text_or_none((self.opening or {}).get("from_name")),
                "received": self.received if position == 0 else [],
                "text": str(record.get("text") or "") if position == 0 else "",
                "call_index": position,
                "tool_call_id": _text_or_none(call.get("id")),
                "code": _text_or_none(call.get("code")) if call else None,
                "cell_id": None,
                "status": None,
                "execution_count": None,
                "observation": None,
                "cut_lines": [],
                "images": 0,
                "provider": _text_or_none(record.get("provider")),
                "model": _text_or_none(record.get("model")),
                "usage": counted(usage)[0] if isinstance(usage, dict) and position == 0 else None,
                "answered_at": _text_or_none(record.get("ts")),
                "finished_at": None,
                "model_seconds": _seconds(self.previous_ts, record.get("ts"))
                if position == 0
                else None,
                "cell_seconds": None,
                "children": [],
            }
            self.out.append(step)
            if step["tool_call_id"] is not None:
                self.waiting[step["tool_call_id"]] = step
        self.received = []

    def _spawned(self, record: dict[str, Any]) -> None:
        child: StepChild = {
            "session_id": str(record.get("rlm_child_id", "")),
            "name": str(record.get("name", "")),
            "notebook_path": str(record.get("notebook_path", "")),
            "task": str(record.get("task", "")),
        }
        cell = record.get("spawn_cell_id")
        if isinstance(cell, str):
            self.spawned_by_cell.setdefault(cell, []).append(child)
        else:  # an older log: the cell that was running, whose result comes next
            self.spawned.append(child)

    def _result(self, record: dict[str, Any]) -> None:
        step = self.waiting.pop(str(record.get("tool_call_id")), None)
        if step is None:
            return
        observation = str(record.get("observation", ""))
        cell = _text_or_none(record.get("cell_id"))
        step.update(
            cell_id=cell,
            status=_text_or_none(record.get("status")),
            execution_count=record.get("execution_count")
            if isinstance(record.get("execution_count"), int)
            else None,
            observation=observation,
            cut_lines=[
                i for i, line in enumerate(observation.splitlines()) if CUT_MARKER.match(line)
            ],
            images=record.get("images") if isinstance(record.get("images"), int) else 0,
            finished_at=_text_or_none(record.get("ts")),
            cell_seconds=_seconds(step["answered_at"], record.get("ts")),
            children=[*self.spawned, *self.spawned_by_cell.pop(cell or "", [])],
        )
        self.spawned = []


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _seconds(start: object, end: object) -> float | None:
    """Seconds between two entry timestamps (None when either is missing or unreadable)."""
    if not isinstance(start, str) or not isinstance(end, str):
        return None
    try:
        delta = datetime.fromisoformat(end) - datetime.fromisoformat(start)
    except ValueError:
        return None
    return round(delta.total_seconds(), 3)
