"""Token accounting: how big the model's context is, and how big it may get.

The size of the context comes from what the provider reported for the latest model call (input
plus cache tokens: what the model read, plus what it wrote, which it reads next time); whatever
was appended since is estimated with `estimate_tokens`, the one estimator in the package.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from .wire import FOR_THE_USER_ONLY

IMAGE_TOKENS = 1_600
"""What one image in an observation is counted as (Anthropic bills a 1,092 x 1,092 image at about
1,600 tokens; a plot is usually smaller)."""

DEFAULT_CONTEXT_WINDOW = 128_000
"""For a model the table does not know: small enough to be safe for every current model."""

# Prefix of a model name -> its context window in tokens. The longest matching prefix wins.
CONTEXT_WINDOWS: dict[str, int] = {
    "claude-": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-opus-4": 200_000,
    "claude-3": 200_000,
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-5": 400_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4": 200_000,
}


def estimate_tokens(text: str) -> int:
    """Tokens of `text`, estimated at four characters a token (rounded up)."""
    return (len(text) + 3) // 4


def context_window(model: str, override: int | None = None) -> int:
    """The context window of `model` (a bare name or `provider/model`); `override` wins."""
    if override:
        return override
    name = model.rpartition("/")[2].lower()
    best = max((p for p in CONTEXT_WINDOWS if name.startswith(p)), key=len, default=None)
    return CONTEXT_WINDOWS[best] if best is not None else DEFAULT_CONTEXT_WINDOW


def entry_tokens(entry: dict[str, Any]) -> int:
    """Estimated tokens a session entry adds to the model's context (0: it adds nothing)."""
    kind = entry.get("type")
    if kind in ("user_message", "agent_message"):
        return estimate_tokens(str(entry.get("text", ""))) + 4
    if kind == "assistant_message":
        calls = entry.get("tool_calls") or []
        arguments = "".join(str(c.get("arguments", "")) for c in calls if isinstance(c, dict))
        return estimate_tokens(str(entry.get("text", "")) + arguments) + 4 + 8 * len(calls)
    if kind == "tool_result":
        images = entry.get("images") or []
        count = len(images) if isinstance(images, list) else 0
        return estimate_tokens(str(entry.get("observation", ""))) + 8 + IMAGE_TOKENS * count
    if kind == "notice":
        if entry.get("kind") in FOR_THE_USER_ONLY:
            return 0
        return estimate_tokens(str(entry.get("text", "")))
    if kind == "compaction":
        return estimate_tokens(str(entry.get("summary", ""))) + 16
    return 0


def entries_tokens(entries: Iterable[dict[str, Any]]) -> int:
    return sum(entry_tokens(e) for e in entries)


def reported_context(usage: Any) -> int | None:
    """The context size a provider reported for one call: what it read (input and cache) plus
    what it wrote. None when the call reported nothing usable."""
    if not isinstance(usage, dict):
        return None
    keys = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens")
    values = [usage.get(k) for k in keys]
    if not any(isinstance(v, int) and v > 0 for v in values[:3]):
        return None
    return sum(v for v in values if isinstance(v, int))


def json_tokens(value: Any) -> int:
    return estimate_tokens(json.dumps(value, ensure_ascii=False))
