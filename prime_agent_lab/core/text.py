"""Small text helpers shared by the core."""

from __future__ import annotations

import unicodedata
from typing import Any

# Characters that change how a terminal shows what follows: bidirectional embeddings, overrides
# and isolates (besides the control characters and the line and paragraph separators).
_BIDI_CONTROLS = frozenset("\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


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


def is_control(char: str) -> bool:
    """A character a terminal acts on rather than shows (ESC, CR, BEL, a line break, DEL, C1
    controls, U+2028, a bidi override)."""
    return unicodedata.category(char) in ("Cc", "Zl", "Zp") or char in _BIDI_CONTROLS


def has_control(text: str) -> bool:
    return any(is_control(char) for char in text)


def printable(text: str, keep_newlines: bool = False) -> str:
    """`text` from a file or an agent made safe to print on a terminal: every control character
    is shown escaped (`\\x1b`, `\\r`, `\\u202e`) instead of acting; `keep_newlines` keeps "\\n"
    as a line break. The CLI prints untrusted text only through this."""
    if not has_control(text):
        return text
    return "".join(
        _escaped(char) if is_control(char) and not (keep_newlines and char == "\n") else char
        for char in text
    )


def _escaped(char: str) -> str:
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
