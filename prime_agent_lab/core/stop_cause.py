"""Who or what stopped a turn: the user (Stop, Ctrl-C) or the process running it shutting down.

The cause gives the turn's `stop_reason` and the words of every note the stop leaves (in the cell,
in the observation the model reads, in the CLI's `run_end`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .wire import StopReason


@dataclass(frozen=True)
class StopCause:
    reason: StopReason
    who: str  # "the user stopped the turn": ends "(not run: ...)", starts "[stopped] ..."

    @property
    def sentence(self) -> str:
        """`who` as the start of a sentence."""
        return self.who[:1].upper() + self.who[1:]


USER_STOP = StopCause("stopped", "the user stopped the turn")
SERVER_SHUTDOWN = StopCause("shutdown", "the server shut down and stopped the turn")


def terminated(signal_name: str) -> StopCause:
    """The CLI run got `signal_name` (SIGTERM): the process is being ended, not stopped by
    the user at the keyboard."""
    return StopCause("shutdown", f"the run was terminated ({signal_name}), which stopped the turn")


def budget_used(what: str) -> StopCause:
    """An autonomous run used `what` ("its budget of 12 model calls"): the run ends, its turn is
    stopped like a Stop (docs/autonomy.md; the run's own reason says which budget)."""
    return StopCause("stopped", f"the autonomous run used {what}, which stopped the turn")
