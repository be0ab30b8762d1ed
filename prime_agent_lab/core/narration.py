"""The markdown of a narration cell (`narrate_cells`, docs/teaching.md): the message that started a
turn, or the turn's final answer, with who said it in bold."""

from __future__ import annotations

from typing import Any

USER, ANSWER = "user", "answer"  # what a narration cell narrates (its metadata's `narrates`)
TASK_HEADER = "[task from "  # a sub-agent's task (runtime.TASK_LABEL): its backlink cell shows it


def narration(part: str, text: str, fields: dict[str, Any]) -> str | None:
    """The cell's markdown, or None when there is nothing to narrate. `fields` are the turn's
    (core/mail.py `fields`): a message from another agent names its sender there, and its text
    starts with a header line (with the time it was written) that the cell leaves out."""
    text = text.strip()
    if not text:
        return None
    if part == ANSWER:
        return f"**Agent:** {text}"
    if text.startswith(TASK_HEADER):
        return None
    header, _, body = text.partition("\n")
    if fields.get("notice") is not None:
        return f"**Notice:** {body.strip() or text.removeprefix('[notice]').strip()}"
    name, relationship = fields.get("from_name"), fields.get("relationship")
    if isinstance(name, str) and isinstance(relationship, str) and header.startswith("["):
        return f'**Message from {relationship} "{name}":** {body.strip()}'
    if not fields.get("from_user") and header.startswith("[") and header.endswith("]") and body:
        return f"**{header[1:-1].split(',')[0]}:** {body.strip()}"  # a schedule's tick
    return f"**User:** {text}"
