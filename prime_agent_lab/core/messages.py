"""Provider-neutral conversation messages.

The loop builds a list of these from the session log; each provider converts them to its wire
format at the last moment (and only there).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .settings import DEFAULTS


@dataclass(frozen=True)
class ToolCall:
    """One call of the `python` tool as the model wrote it.

    `arguments` is the raw JSON text the model produced; it is parsed by the loop, so malformed
    arguments become an observation for the model instead of an exception in the provider.
    """

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ImagePart:
    media_type: str  # e.g. "image/png"
    data_base64: str


@dataclass(frozen=True)
class Message:
    role: Literal["user", "assistant", "tool"]
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None  # set on role="tool"
    images: tuple[ImagePart, ...] = ()  # only on role="tool"


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }


@dataclass
class ModelResponse:
    """A complete assistant turn as returned by a provider."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    stop_reason: str = "end_turn"
    model: str = ""


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]


PYTHON_TOOL = ToolSpec(
    name="python",
    description=(
        "Run Python code in the persistent notebook kernel. The code becomes a new cell in the "
        "user's notebook; state persists across calls; top-level await is allowed. Returns "
        "stdout, stderr, the value of the last expression and any error, each capped."
    ),
    parameters={
        "type": "object",
        "properties": {"code": {"type": "string", "description": "Python source for one cell."}},
        "required": ["code"],
    },
)


@dataclass(frozen=True)
class ModelRequest:
    system: str
    messages: list[Message]
    tools: list[ToolSpec]
    max_tokens: int = DEFAULTS.max_tokens
    accepts_images: bool = DEFAULTS.accepts_images
    purpose: str = "turn"
    """`turn` for the agent's own calls; a side call of the harness names its job (`summary`
    for a compaction, `kernel_gc` for a review of the kernel's variables)."""
