"""Permission modes of a session (docs/pairing.md, section 4): `auto` (cells run as the model
writes them), `ask` (each agent cell waits for the user's Run, Edit or Skip), `plan` (no cell
runs). The order `plan` < `ask` < `auto` is what `max_permission` caps. The mode is recorded as a
`permission_change` entry, so a reload or a resume keeps it. None of the modes is a sandbox: a
cell that runs can do whatever the user's kernel can."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal, get_args

from .sessions import SessionLog
from .text import json_type, shorten
from .wire import PermissionMode

MODES: tuple[PermissionMode, ...] = get_args(PermissionMode)  # weakest first

SKIPPED_OBSERVATION = "(not run: the user skipped this cell in ask mode; nothing in it ran)"
AWAITING_NOTE = "[Prime Agent] waiting for your approval: Run, Edit or Skip"


class PermissionRefused(Exception):
    """A mode or an approval the session cannot take; `status` is the HTTP status to answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def mode_problem(value: object) -> str | None:
    """What is wrong with `value` as a mode, or None."""
    if isinstance(value, str) and value in MODES:
        return None
    shown = shorten(value, 40) if isinstance(value, str) else json_type(value)  # quoted once
    return f"must be one of {', '.join(MODES)}, not {shown}"


def checked_mode(value: object) -> PermissionMode:
    wrong = mode_problem(value)
    if wrong is not None:
        raise PermissionRefused(400, f"mode {wrong}")
    return value  # type: ignore[return-value]


def allowed(mode: PermissionMode, cap: PermissionMode) -> bool:
    return MODES.index(mode) <= MODES.index(cap)


def lowest(mode: PermissionMode, cap: PermissionMode) -> PermissionMode:
    return mode if allowed(mode, cap) else cap


def recorded_mode(session: SessionLog) -> PermissionMode | None:
    """The mode the session's latest `permission_change` chose, if any."""
    change = session.last_of("permission_change")
    mode = change.get("mode") if change else None
    return mode if isinstance(mode, str) and mode in MODES else None  # type: ignore[return-value]


@dataclass(frozen=True)
class Decision:
    """The user's answer to a cell waiting for approval: `run` (with `code` when edited),
    `skip`, or `stop` (the turn was stopped meanwhile)."""

    action: Literal["run", "skip", "stop"]
    code: str | None = None


class Approvals:
    """One agent's mode and the cell waiting for approval (at most one: cells run in order)."""

    def __init__(self, mode: PermissionMode, cap: PermissionMode) -> None:
        self.mode = mode
        self.cap = cap
        self._waiting: dict[str, asyncio.Future[Decision]] = {}

    def waiting(self) -> list[str]:
        """The tool call ids waiting for the user now (one answered is not, even before its
        cell runs)."""
        return [call_id for call_id, future in self._waiting.items() if not future.done()]

    async def wait(self, tool_call_id: str) -> Decision:
        future: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
        self._waiting[tool_call_id] = future
        try:
            return await future
        finally:
            self._waiting.pop(tool_call_id, None)

    def decide(self, tool_call_id: str, decision: Decision) -> bool:
        """Answer a waiting cell; False when `tool_call_id` does not wait."""
        future = self._waiting.get(tool_call_id)
        if future is None or future.done():
            return False
        future.set_result(decision)
        return True

    def withdraw(self) -> bool:
        """Stop: every waiting cell is answered `stop`. True if one was waiting."""
        answered = False
        for future in self._waiting.values():
            if not future.done():
                future.set_result(Decision("stop"))
                answered = True
        return answered
