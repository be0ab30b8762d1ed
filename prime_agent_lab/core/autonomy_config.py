"""An autonomous run's configuration: its budgets and a session's mode (docs/autonomy.md).

`Budgets` are what a run may use (model calls, tokens, wall time, default continuations), from
the settings or a client's JSON checked against the settings' bounds; `AutonomyConfig` is a
session's mode (on or off, budgets, gates). core/autonomy.py runs with them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from .gates import Gate
from .locked import limit_name
from .settings import Settings

if TYPE_CHECKING:
    from .wire import AutonomyBudgets


@dataclass(frozen=True)
class Budgets:
    max_turns: int
    max_tokens: int
    timeout_minutes: float
    continuations: int

    @classmethod
    def of(cls, settings: Settings) -> Budgets:
        return cls(
            settings.autonomous_max_turns,
            settings.autonomous_max_tokens,
            settings.autonomous_timeout,
            settings.autonomous_continuations,
        )

    def wire(self) -> AutonomyBudgets:
        return {
            "max_turns": self.max_turns,
            "max_tokens": self.max_tokens,
            "timeout_minutes": self.timeout_minutes,
            "continuations": self.continuations,
        }

    @classmethod
    def from_wire(cls, data: object, settings: Settings, *, hold_to_locks: bool = False) -> Budgets:
        """Budgets from a client's JSON, each checked against its setting's bounds (ValueError
        names the field); a field left out keeps the setting's value. A budget setting the
        administrator locked is a ceiling: a larger value is refused (BudgetAboveLock), or held
        to it with `hold_to_locks` (a switch recorded before the lock)."""
        if not isinstance(data, dict):
            raise ValueError("budgets must be an object")
        unknown = sorted(set(data) - set(BUDGET_SETTINGS))
        if unknown:
            raise ValueError(f"budgets has no field {', '.join(unknown)}")
        values: dict[str, Any] = {}
        for key, setting in BUDGET_SETTINGS.items():
            value = data.get(key, getattr(settings, setting))
            try:
                replace(settings, **{setting: value})
            except ValueError as exc:
                raise ValueError(f"budgets.{key}: {str(exc).split(' ', 1)[1]}") from None
            ceiling = getattr(settings, setting)
            if setting in settings.locked_settings and value > ceiling:
                if not hold_to_locks:
                    raise BudgetAboveLock(
                        f"budgets.{key}: {value:g} is above {ceiling:g}, the limit of "
                        f"{limit_name(settings, setting)}"
                    )
                value = ceiling
            values[key] = value
        return cls(**values)


BUDGET_SETTINGS = {
    "max_turns": "autonomous_max_turns",
    "max_tokens": "autonomous_max_tokens",
    "timeout_minutes": "autonomous_timeout",
    "continuations": "autonomous_continuations",
}
"""Each budget of the wire (`AutonomyBudgets`) and the setting that is its default."""


class BudgetAboveLock(ValueError):
    """A budget above the value the administrator locked (403)."""


class SubAgentRefused(ValueError):
    """Autonomous mode asked for a sub-agent: only the agent the user talks to runs so."""


@dataclass(frozen=True)
class AutonomyConfig:
    """A session's autonomous mode: on or off, its budgets and its gates."""

    enabled: bool
    budgets: Budgets
    gates: tuple[Gate, ...]
    persisted: bool = False  # kept in the session (the server's switch), not a CLI run's flags
