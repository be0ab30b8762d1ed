"""Turn a cell's outputs into what the model sees.

Order: stdout, stderr, results (execute_result / display text), error with traceback. Each part is
capped, keeping head and tail with a line that says how much was cut and where the rest is. ANSI
colour codes are stripped and carriage-return progress bars collapse to their last state.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from .messages import ImagePart
from .ports import ExecutionResult, Output

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def collapse_carriage_returns(text: str) -> str:
    """Keep only what a terminal would show for each line: the text after the last `\\r`."""
    if "\r" not in text:
        return text
    lines = text.replace("\r\n", "\n").split("\n")
    return "\n".join(_last_segment(line) for line in lines)


def _last_segment(line: str) -> str:
    segments = line.split("\r")
    for segment in reversed(segments):
        if segment:
            return segment
    return ""


CUT_MARKER = re.compile(
    r"^\[\.\.\. [0-9,]+ of [0-9,]+ characters cut here \(cap [0-9,]+\);.* \.\.\.\]$"
)
"""A line `cap_text` puts where it cut (the step-through shows it marked, docs/teaching.md)."""


def cap_text(text: str, cap: int, where_rest: str) -> str:
    """Keep the head and the tail of `text` within about `cap` characters."""
    if len(text) <= cap:
        return text
    head = cap * 2 // 3
    tail = cap - head
    cut = len(text) - head - tail
    marker = (
        f"\n[... {cut:,} of {len(text):,} characters cut here (cap {cap:,}); {where_rest} ...]\n"
    )
    return text[:head] + marker + text[-tail:]


@dataclass
class Observation:
    text: str
    images: list[ImagePart] = field(default_factory=list)
    preview: str = ""


def _mime_text(value: object) -> str:
    if isinstance(value, list):
        return "".join(str(v) for v in value)
    return str(value)


def build_observation(
    result: ExecutionResult,
    *,
    cap: int,
    accepts_images: bool,
    where_rest: str,
    redact: Callable[[str], str] = lambda text: text,
) -> Observation:
    stdout: list[str] = []
    stderr: list[str] = []
    results: list[str] = []
    errors: list[str] = []
    images: list[ImagePart] = []
    for output in result.outputs:
        _collect(output, stdout, stderr, results, errors, images, accepts_images)

    parts: list[str] = []
    for label, chunks in (("stdout", stdout), ("stderr", stderr), ("result", results)):
        text = redact(collapse_carriage_returns(strip_ansi("".join(chunks))))
        if text.strip():
            parts.append(_section(label, cap_text(text, cap, where_rest)))
    if errors:
        text = redact(strip_ansi("\n".join(errors)))
        parts.append(_section("error", cap_text(text, cap, where_rest)))
    if result.note:
        parts.append(result.note)
    if not parts:
        parts.append("(the cell ran and printed nothing)" if result.status == "ok" else "")
    text = "\n".join(p for p in parts if p)
    preview = redact(_preview(result, stdout, errors))
    return Observation(text=text, images=images, preview=preview)


def _section(label: str, body: str) -> str:
    return f"[{label}]\n{body.rstrip()}"


def _collect(
    output: Output,
    stdout: list[str],
    stderr: list[str],
    results: list[str],
    errors: list[str],
    images: list[ImagePart],
    accepts_images: bool,
) -> None:
    kind = output.get("output_type")
    if kind == "stream":
        target = stderr if output.get("name") == "stderr" else stdout
        target.append(_mime_text(output.get("text", "")))
    elif kind in ("execute_result", "display_data"):
        data = output.get("data", {})
        image_type = next((t for t in _IMAGE_TYPES if t in data), None)
        if image_type and accepts_images:
            images.append(ImagePart(image_type, _mime_text(data[image_type]).strip()))
            results.append(f"<{image_type} image attached>\n")
        elif image_type:
            plain = _mime_text(data.get("text/plain", "")).strip()
            results.append(
                f"<{image_type} image shown in the notebook{': ' + plain if plain else ''}>\n"
            )
        elif "text/plain" in data:
            results.append(_mime_text(data["text/plain"]).rstrip("\n") + "\n")
        elif data:
            results.append(f"<output of type {', '.join(sorted(data))} shown in the notebook>\n")
    elif kind == "error":
        traceback = output.get("traceback") or []
        if traceback:
            errors.append("\n".join(traceback))
        else:
            errors.append(f"{output.get('ename', 'Error')}: {output.get('evalue', '')}")


def _preview(result: ExecutionResult, stdout: list[str], errors: list[str]) -> str:
    if result.status in ("timeout", "died", "interrupted", "aborted", "skipped"):
        return result.note.splitlines()[0] if result.note else result.status
    if errors:
        lines = [ln for ln in strip_ansi(errors[-1]).splitlines() if ln.strip()]
        return lines[-1][:200] if lines else "error"
    text = collapse_carriage_returns(strip_ansi("".join(stdout))).strip()
    if text:
        return text.splitlines()[-1][:200]
    return ""
