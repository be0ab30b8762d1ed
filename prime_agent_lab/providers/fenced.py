"""Fallback for models that answer with a fenced Python block instead of calling the tool.

Small local models (and some larger ones without tool training) often reply
"```python ... ```" with no tool call. Every provider passes its finished response through
`apply_fenced_fallback`; when the fallback is enabled (`PrimeAgentLab.fenced_code_fallback`, CLI
`--fenced-code`) such a block runs as if the model had called the `python` tool. It is off by
default: models that call tools show example code in their final answers all the time, and code
in an answer's prose must never run on its own.
"""

from __future__ import annotations

import json
import re
import textwrap
import uuid
from dataclasses import replace

from ..core.messages import ModelResponse, ToolCall

_FENCE = re.compile(
    r"^[ \t]*```[ \t]*(?:python3?|py|ipython)[ \t]*\r?\n(?P<code>.*?)^[ \t]*```[ \t]*$",
    re.MULTILINE | re.DOTALL | re.IGNORECASE,
)


def python_blocks(text: str) -> list[str]:
    """The closed ```python blocks in `text`, in order, dedented; empty ones are skipped."""
    blocks = []
    for match in _FENCE.finditer(text):
        code = textwrap.dedent(match.group("code")).strip("\n")
        if code.strip():
            blocks.append(code)
    return blocks


def apply_fenced_fallback(
    response: ModelResponse, *, id_prefix: str, enabled: bool
) -> ModelResponse:
    """Turn fenced Python blocks into `python` tool calls when the model made no tool call and
    the fallback is `enabled`; otherwise return the response unchanged.

    Each block becomes one call (one cell), with a synthetic id `<id_prefix>fenced_<hex>`; the text
    stays as the model wrote it.
    """
    if not enabled or response.tool_calls:
        return response
    blocks = python_blocks(response.text)
    if not blocks:
        return response
    calls = [
        ToolCall(
            id=f"{id_prefix}fenced_{uuid.uuid4().hex[:16]}",
            name="python",
            arguments=json.dumps({"code": code}),
        )
        for code in blocks
    ]
    return replace(response, tool_calls=calls, stop_reason="tool_use")
