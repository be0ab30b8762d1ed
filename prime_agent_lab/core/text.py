"""Small text helpers shared by the core."""

from __future__ import annotations

from typing import Any


def shorten(value: Any, limit: int = 80) -> str:
    """`repr(value)` cut to `limit` characters, so no error message echoes unbounded input."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[: limit - 1]}… ({len(text):,} characters)"


def json_type(value: Any) -> str:
    """What a decoded JSON value is, in JSON's words ("an array", "a string", ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return {dict: "an object", list: "an array", str: "a string"}.get(
        type(value), type(value).__name__
    )


def preview(text: str, limit: int = 300) -> str:
    """The start of `text` for a one-line preview: whitespace runs folded, cut at `limit`."""
    folded = " ".join(text.split())
    return folded if len(folded) <= limit else folded[: limit - 1] + "…"
