"""The markdown of a narration cell (`narrate_cells`, docs/teaching.md): the message that started a
turn, or the turn's final answer, with who said it in bold.

A message (the user's, another agent's, a notice) is text: it is escaped so that it reads as it was
typed, whatever Markdown or HTML it holds. The answer is Markdown, as the chat renders it; a fence
it leaves open is closed, so it cannot swallow what follows its cell (a notebook exported as one
Markdown page, say)."""

from __future__ import annotations

import re
from typing import Any

USER, ANSWER = "user", "answer"  # what a narration cell narrates (its metadata's `narrates`)
TASK_HEADER = "[task from "  # a sub-agent's task (runtime.TASK_LABEL): its backlink cell shows it

# What CommonMark (and JupyterLab's marked, its math) reads as markup anywhere in a line; `&` and
# `<` start entities and HTML. Each is escaped with a backslash, which any ASCII punctuation takes.
_MARKUP = re.compile(r"([\\`*_\[\]<>&|~$])")
# What starts a block only at the start of a line: a heading, a list item, a setext underline.
_LINE_START = re.compile(r"^(\d*)([-+=#.)])")  # `1.` is escaped at its dot
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_BLOCK_START = re.compile(r"^ {0,3}(`{3}|~{3}|#|>|[-+*] |\d+[.)] |\|)")


def narration(part: str, text: str, fields: dict[str, Any]) -> str | None:
    """The cell's markdown, or None when there is nothing to narrate. `fields` are the turn's
    (core/mail.py `fields`): a message from another agent names its sender there, and its text
    starts with a header line (with the time it was written) that the cell leaves out."""
    text = text.strip()
    if not text:
        return None
    if part == ANSWER:
        return answer_markdown(text)
    if text.startswith(TASK_HEADER):
        return None
    header, _, body = text.partition("\n")
    if fields.get("notice") is not None:
        return said("Notice", body.strip() or text.removeprefix("[notice]").strip())
    name, relationship = fields.get("from_name"), fields.get("relationship")
    if isinstance(name, str) and isinstance(relationship, str) and header.startswith("["):
        return said(f'Message from {relationship} "{name}"', body.strip())
    if not fields.get("from_user") and header.startswith("[") and header.endswith("]") and body:
        return said(header[1:-1].split(",")[0], body.strip())  # a schedule's tick
    return said("User", text)


def said(who: str, text: str) -> str:
    """`**who:**` and `text` as plain text: every line as typed, line breaks kept."""
    lines = [_plain_line(line) for line in text.split("\n")]
    joined = "\n".join(
        line + ("\\" if line and following else "")  # a backslash before a newline: a line break
        for line, following in zip(lines, [*lines[1:], ""], strict=True)
    )
    return f"**{_plain_line(who)}:** {joined}"


def _plain_line(line: str) -> str:
    stripped = line.lstrip(" \t")
    indent = line[: len(line) - len(stripped)].replace("\t", "    ")
    escaped = _LINE_START.sub(r"\1\\\2", _MARKUP.sub(r"\\\1", stripped.rstrip()))
    return "&nbsp;" * len(indent) + escaped  # leading spaces would make a code block


def answer_markdown(text: str) -> str:
    """The answer as Markdown after `**Agent:**` (on a line of its own when it starts with a
    block, such as a fence or a heading), with a fence it leaves open closed."""
    lead = "**Agent:**\n\n" if _BLOCK_START.match(text) else "**Agent:** "
    open_fence = None
    for line in text.split("\n"):
        found = _FENCE.match(line)
        if open_fence is None and found:
            open_fence = found.group(1)
        elif open_fence is not None and _closes(line, open_fence):
            open_fence = None
    return lead + text + (f"\n{open_fence}" if open_fence else "")


def _closes(line: str, fence: str) -> bool:
    found = _FENCE.match(line)
    rest = line[found.end() :] if found else ""
    return (
        found is not None
        and found.group(1)[0] == fence[0]
        and len(found.group(1)) >= len(fence)
        and not rest.strip()
    )
