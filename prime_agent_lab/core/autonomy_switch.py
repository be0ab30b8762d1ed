"""A session's Autonomous switch as the server records it (docs/autonomy.md): its `configured`
entry carries this user's signature (docs/trust.md), so a switch from a cloned folder turns
nothing on until the user trusts the session, as its gates are shell commands that would run
after every answer. The budgets and the mode are `autonomy_config.py`'s."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .sessions import SessionLog
from .trust import SIGNATURE, Signer

if TYPE_CHECKING:
    pass

SIGNED_FOR = "autonomy"
"""The purpose of a `configured` entry's signature (core/trust.py)."""
SIGNED_FIELDS = ("enabled", "budgets", "gates")


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
