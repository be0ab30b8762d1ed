"""What counts as a token figure of one model call, wherever usage is summed or priced.

A call's `usage` comes from the provider's answer and then from the session log, which a hostile
or damaged file can fill with anything JSON holds: `10**400` (no float holds it, so pricing it
raised OverflowError), `1e308`, a negative number, `true`. A figure counts only when it is a
whole number from 0 to MAX_CALL_TOKENS; any other is ignored in token sums, named in the
server's log, and makes that call's cost unknown (it cannot be priced).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MAX_CALL_TOKENS = 10**12
"""The most tokens one figure of one call may say; no model reads or writes a trillion tokens
in one call, and sums of such figures stay far inside what a float prices."""

PRICED = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
"""The figures a list price applies to (core/ports.py, `Price`)."""


def token_count(value: Any) -> int | None:
    """`value` as a token figure, or None when it is not one (a bool is not a number here)."""
    if type(value) is int and 0 <= value <= MAX_CALL_TOKENS:
        return value
    return None


def counted(usage: Mapping[str, Any]) -> tuple[dict[str, int], list[str]]:
    """The figures of a call's `usage` that count, and the names of those that do not."""
    valid: dict[str, int] = {}
    ignored: list[str] = []
    for key, value in usage.items():
        count = token_count(value)
        if count is None:
            ignored.append(str(key))
        else:
            valid[str(key)] = count
    return valid, ignored


def priceable(usage: Mapping[str, Any]) -> bool:
    """Whether every priced figure the call reports is a token figure."""
    return all(key not in usage or token_count(usage[key]) is not None for key in PRICED)


def described(ignored: list[str], usage: Mapping[str, Any]) -> str:
    """The ignored figures as the log names them, each value cut short."""
    return ", ".join(f"{key}={_short(repr(usage.get(key)))}" for key in ignored)


def _short(text: str) -> str:
    return text if len(text) <= 24 else text[:21] + "..."
