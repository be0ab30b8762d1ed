"""What the kernel returned in an execute reply's `user_expressions`: each value is the repr of
the expression's result, in `text/plain`, when it evaluated without raising."""

from __future__ import annotations

import ast
import contextlib
import json
from typing import Any


def expression_text(reply_content: dict[str, Any], name: str) -> str | None:
    """The `text/plain` of expression `name` (None: not evaluated, or it raised)."""
    value = (reply_content.get("user_expressions") or {}).get(name) or {}
    if value.get("status") != "ok":
        return None
    text = (value.get("data") or {}).get("text/plain")
    return text if isinstance(text, str) else None


def json_object(reply_content: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The JSON object in the str that expression `name` returned (None: none, or not one)."""
    text = expression_text(reply_content, name)
    if text is None:
        return None
    with contextlib.suppress(ValueError, SyntaxError, TypeError):
        found = json.loads(ast.literal_eval(text))
        return found if isinstance(found, dict) else None
    return None
