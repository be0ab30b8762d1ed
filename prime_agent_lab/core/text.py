"""Small text helpers shared by the core."""

from __future__ import annotations

from typing import Any


def shorten(value: Any, limit: int = 80) -> str:
    """`repr(value)` cut to `limit` characters, so no error message echoes unbounded input."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[: limit - 1]}… ({len(text):,} characters)"
