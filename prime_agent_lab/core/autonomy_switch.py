"""A session's Autonomous switch as the server records it (docs/autonomy.md): its budgets, its
mode, and its `configured` entry, which carries this user's signature (docs/trust.md): a switch
from a cloned folder turns nothing on until the user trusts the session, as its gates are shell
commands that would run after every answer."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from .gates import Gate
from .sessions import SessionLog
from .settings import Settings
from .trust import SIGNATURE, Signer

if TYPE_CHECKING:
    from .wire import AutonomyBudgets

SIGNED_FOR = "autonomy"
"""The purpose of a `configured` entry's signature (core/trust.py)."""
SIGNED_FIELDS = ("enabled", "budgets", "gates")


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
    def from_wire(cls, data: object, settings: Settings) -> Budgets:
        """Budgets from a client's JSON, each checked against its setting's bounds (ValueError
        names the field); a field left out keeps the setting's value."""
        if not isinstance(data, dict):
            raise ValueError("budgets must be an object")
        names = {
            "max_turns": "autonomous_max_turns",
            "max_tokens": "autonomous_max_tokens",
            "timeout_minutes": "autonomous_timeout",
            "continuations": "autonomous_continuations",
        }
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise ValueError(f"budgets has no field {', '.join(unknown)}")
        values: dict[str, Any] = {}
        for key, setting in names.items():
            value = data.get(key, getattr(settings, setting))
            try:
                replace(settings, **{setting: value})
            except ValueError as exc:
                raise ValueError(f"budgets.{key}: {str(exc).split(' ', 1)[1]}") from None
            values[key] = value
        return cls(**values)


@dataclass(frozen=True)
class AutonomyConfig:
    """A session's autonomous mode: on or off, its budgets and its gates."""

    enabled: bool
    budgets: Budgets
    gates: tuple[Gate, ...]
    persisted: bool = False  # kept in the session (the server's switch), not a CLI run's flags


def latest_configured(session: SessionLog | None) -> dict[str, Any] | None:
    """The latest `configured` entry on the session's path: the recorded switch."""
    for entry in reversed(session.path() if session is not None else []):
        if entry["type"] == "autonomy" and entry.get("event") == "configured":
            return entry
    return None


def signed_switch(signer: Signer, fields: dict[str, Any]) -> dict[str, Any]:
    """`enabled`, `budgets` and `gates` with this user's `signature`: a `configured` entry's."""
    return signer.sign_object(SIGNED_FOR, {key: fields.get(key) for key in SIGNED_FIELDS})


def switch_is_signed(entry: dict[str, Any], signer: Signer) -> bool:
    fields = {key: entry.get(key) for key in SIGNED_FIELDS}
    return signer.verify_object(SIGNED_FOR, {**fields, SIGNATURE: entry.get(SIGNATURE)})


def describe_untrusted(entry: dict[str, Any]) -> str | None:
    """What an unsigned switch would turn on (None: it is off)."""
    if not entry.get("enabled"):
        return None
    gates = [str(g) for g in entry.get("gates") or []]
    if not gates:
        return "autonomous mode (no gates: it continues turns on its own)"
    return f"autonomous mode with gates: {'; '.join(gates)}"
