"""Token accounting: how big the model's context is (how big it may get is the context window
each provider declares: core/installed_providers.py).

The size of the context comes from what the provider reported for the latest model call (input
plus cache tokens: what the model read, plus what it wrote, which it reads next time); whatever
was appended since is estimated with `estimate_tokens`, the one estimator in the package, from
exactly what the model reads of each entry (core/entry_types.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from .entry_schema import Seen
from .entry_types import seen, turn_boundary
from .messages import ToolCall
from .token_counts import token_count

IMAGE_TOKENS = 1_600
"""What one image in an observation is counted as (Anthropic bills a 1,092 x 1,092 image at about
1,600 tokens; a plot is usually smaller)."""


def estimate_tokens(text: str) -> int:
    """Tokens of `text`, estimated at four characters a token (rounded up)."""
    return (len(text) + 3) // 4


def message_tokens(
    role: str, text: str, tool_calls: Iterable[ToolCall] = (), images: int = 0
) -> int:
    """Estimated tokens of one message: its text (and a call's arguments) plus a small overhead
    per message, call and image."""
    if role == "assistant":
        calls = list(tool_calls)
        arguments = "".join(c.arguments for c in calls)
        return estimate_tokens(text + arguments) + 4 + 8 * len(calls)
    if role == "tool":
        return estimate_tokens(text) + 8 + IMAGE_TOKENS * images
    return estimate_tokens(text) + 4


def seen_tokens(part: Seen) -> int:
    """Estimated tokens of one part of what the model reads. Text that goes before the next
    turn's message adds its text only (that message's overhead is counted with it)."""
    if part.when == "before_next_turn":
        return estimate_tokens(part.text)
    return message_tokens(part.role, part.text, part.tool_calls, len(part.images))


def entry_tokens(entry: Mapping[str, Any], in_turn: bool = False) -> int:
    """Estimated tokens an entry adds to the model's context: the estimate of exactly what the
    model reads of it (`entry_types.seen`; 0 when it reads nothing). `in_turn`: whether the
    entry is inside a turn (a notice, say, is read between turns only)."""
    return sum(seen_tokens(part) for part in seen(entry, in_turn))


def context_tokens(entries: Iterable[Mapping[str, Any]], in_turn: bool = False) -> list[int]:
    """`entry_tokens` of consecutive entries of a path, the first inside a turn or not."""
    out: list[int] = []
    for entry in entries:
        out.append(entry_tokens(entry, in_turn))
        boundary = turn_boundary(entry)
        if boundary is not None:
            in_turn = boundary
    return out


def entries_tokens(entries: Iterable[Mapping[str, Any]], in_turn: bool = False) -> int:
    return sum(context_tokens(entries, in_turn))


def reported_context(usage: Any) -> int | None:
    """The context size a provider reported for one call: what it read (input and cache) plus
    what it wrote. None when the call reported nothing usable."""
    if not isinstance(usage, dict):
        return None
    keys = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens")
    values = [token_count(usage.get(k)) or 0 for k in keys]  # core/token_counts.py
    if not any(values[:3]):
        return None
    return sum(values)


def json_tokens(value: Any) -> int:
    return estimate_tokens(json.dumps(value, ensure_ascii=False))
