"""The refine planner: the request it gets and the tolerant reading of its reply.

Pure functions only (no store, no agent): `planner_prompt` builds the user message from the
harness state, the refinement history and the recent trajectory; `parse_proposal` reads the
model's reply into a `Proposal`, or raises `PlanError` saying why it could not (a reply cut off
by the output budget is reported as such, not as bad JSON). Design note: docs/harness.md.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..compaction import render_entries

ENTRIES_PER_KIND = 40
ENTRY_CHARS = 240
HISTORY_RECORDS = 20
CONVERSATION_CHARS = 80_000
KINDS = ("prompt", "memory", "skill", "subagent")
DEFAULT_SUMMARY = "Refined continual harness state"
CUT_OFF = "the planner's reply was cut off (output budget exhausted)"
CUT_OFF_STOP_REASONS = frozenset({"max_tokens", "length"})

PLANNER_SYSTEM = """You refine the continual harness of an agent that works in a Python \
notebook kernel. The harness is what the agent keeps across turns and sessions, outside its \
context: prompt notes, memories, skills and sub-agent specs. You read its current state, the \
history of earlier refinements and the agent's recent trajectory, and propose a few edits.

Rules:
- The base system prompt is immutable: never create, update or delete `base_system_prompt`.
- Use a `memory` for facts, decisions and failures worth remembering; a `skill` for a \
repeatable procedure backed by Python; a `prompt` note for a narrow behaviour policy; a \
`subagent` spec for a reusable delegation role.
- A skill keeps its call contract: `reference` = {"type": "python", "import": "<module>", \
"callable": "<function>"} naming a module the kernel can import, and `arguments` (an object \
mapping each argument to its type; {} for none).
- Make small edits, each backed by evidence from the trajectory or the history. Prefer no \
edits at all (an empty `edits` list) to an edit without evidence.
- Use bare ids (`flaky_test`), never `local:` or `global:` prefixes.
- Follow the scope policy: in a local refinement, global entries are read-only.
- Never edit source files; only the harness.

Answer with JSON only, no prose around it:
{"summary": "<one line>", "rationale": "<why, citing the evidence>",
 "expected_outcome": "<what should change in the agent's behaviour>",
 "edits": [{"action": "create" | "update" | "delete", "kind": "prompt" | "memory" | "skill" | \
"subagent", "id": "<bare id; required for update and delete>", "title": "...", \
"content": "...", "path": "<group, optional>", "reference": {...}, "arguments": {...}, \
"metadata": {...}, "reason": "<the evidence for this edit>"}]}
An update may leave out the fields it keeps as they are."""

SCOPE_POLICY = {
    "local": (
        "This refinement edits the LOCAL store (this session only). Global entries are shown "
        "for context and are read-only here: an update or delete naming a global-only id fails "
        "as not found."
    ),
    "global": (
        "This refinement edits the GLOBAL store, which every session on this machine sees. "
        "Local entries are shown for context only; edit only what helps every session."
    ),
}


class PlanError(Exception):
    """The planner's reply could not be read as a proposal (the message says why)."""


@dataclass
class Proposal:
    summary: str = DEFAULT_SUMMARY
    rationale: str = ""
    expected_outcome: str = ""
    edits: list[Any] = field(default_factory=list)  # raw edits; refine_apply validates each


# ---------------------------------------------------------------- the request


def planner_prompt(
    entries: Iterable[Mapping[str, Any]],
    history: list[Mapping[str, Any]],
    trajectory: list[dict[str, Any]],
    scope: str,
    instructions: str | None,
) -> str:
    """The planner's user message: the sections named in docs/harness.md, in order."""
    parts = [
        section("current_harness_state", render_state(entries)),
        section("refinement_history", render_history(history)),
        section("conversation", render_conversation(trajectory)),
        section("scope_policy", SCOPE_POLICY[scope]),
    ]
    if instructions and instructions.strip():
        parts.append(section("user_refine_instructions", instructions.strip()))
    parts.append(f"Propose the {scope} refinement as JSON.")
    return "\n\n".join(parts)


def section(name: str, body: str) -> str:
    return f"<{name}>\n{body}\n</{name}>"


def render_state(entries: Iterable[Mapping[str, Any]]) -> str:
    """Both stores, by kind: a count, then at most 40 entries each cut to 240 characters."""
    by_kind: dict[str, list[Mapping[str, Any]]] = {kind: [] for kind in KINDS}
    for entry in entries:
        by_kind.setdefault(str(entry.get("kind")), []).append(entry)
    lines: list[str] = []
    for kind, items in by_kind.items():
        items = sorted(items, key=_order)
        lines.append(f"{kind}: {len(items)}")
        lines += [f"- {entry_line(e)}" for e in items[:ENTRIES_PER_KIND]]
        if len(items) > ENTRIES_PER_KIND:
            lines.append(f"  +{len(items) - ENTRIES_PER_KIND} more {kind} entries")
    return "\n".join(lines)


def _order(entry: Mapping[str, Any]) -> tuple[str, str, str, str]:
    return (
        str(entry.get("scope", "")),
        str(entry.get("path", "")),
        str(entry.get("title", "")),
        str(entry.get("id", "")),
    )


def entry_line(entry: Mapping[str, Any]) -> str:
    head = (
        f"[{entry.get('scope', '?')}:{entry.get('id', '?')}] {entry.get('title', '')} "
        f"({entry.get('path', 'general')}, v{entry.get('version', '?')}): "
    )
    body = str(entry.get("content", ""))
    if entry.get("kind") == "skill":
        body += f" ref={_compact_json(entry.get('reference'))}"
        body += f" args={_compact_json(entry.get('arguments'))}"
    return cut(head + body, ENTRY_CHARS)


def render_history(history: list[Mapping[str, Any]]) -> str:
    """The last 20 refinement records, oldest first: what each did and what was rejected."""
    if not history:
        return "(no refinements yet)"
    lines = []
    shown = history[-HISTORY_RECORDS:]
    if len(history) > len(shown):
        lines.append(f"({len(history) - len(shown)} older refinements not shown)")
    for record in shown:
        head = (
            f"- {record.get('id')} ({record.get('trigger', '?')}, {record.get('scope', '?')}, "
            f"{record.get('created_at', '?')}): {cut(str(record.get('summary', '')), 200)}"
        )
        if record.get("rollback_of"):
            head += f" [rollback of {record['rollback_of']}]"
        if record.get("error"):
            head += f" [failed: {cut(str(record['error']), 200)}]"
        lines.append(head)
        for edit in record.get("edits") or []:
            lines.append(f"    {edit_line(edit)}")
    return "\n".join(lines)


def edit_line(edit: Mapping[str, Any]) -> str:
    what = f"{edit.get('action')} {edit.get('kind')}:{edit.get('id')}"
    if edit.get("applied"):
        return f"{what} (applied)"
    return f"{what} (rejected: {cut(str(edit.get('error', '')), 160)})"


def render_conversation(trajectory: list[dict[str, Any]]) -> str:
    """The session's recent trajectory as plain text, its last 80,000 characters."""
    text = render_entries(trajectory)
    if len(text) <= CONVERSATION_CHARS:
        return text or "(no conversation yet)"
    return "[... earlier conversation cut ...]\n" + text[-CONVERSATION_CHARS:]


def cut(text: str, limit: int) -> str:
    folded = " ".join(text.split())
    return folded if len(folded) <= limit else folded[: limit - 3] + "..."


def _compact_json(value: Any) -> str:
    try:
        return json.dumps(value, separators=(",", ":"))
    except (TypeError, ValueError):
        return repr(value)


# ---------------------------------------------------------------- the reply

_FENCE = re.compile(r"```[a-zA-Z0-9_-]*[ \t]*\n(.*?)```", re.DOTALL)


def parse_proposal(text: str, stop_reason: str | None = None) -> Proposal:
    """Whole text, then a fenced block, then the slice from the first `{` to the last `}`,
    then the one object that starts at the first `{`.

    A reply the output budget cut off (stop reason `max_tokens`/`length`, or unbalanced
    brackets or an open string where the JSON should end) raises PlanError(CUT_OFF)."""
    if stop_reason in CUT_OFF_STOP_REASONS:
        raise PlanError(CUT_OFF)
    value = first_json(text)
    if value is None:
        if looks_cut_off(text):
            raise PlanError(CUT_OFF)
        shown = cut(text, 200) or "(an empty reply)"
        raise PlanError(f"the planner's reply is not valid JSON: {shown}")
    if not isinstance(value, dict):
        raise PlanError("the planner's reply must be a JSON object with an `edits` list")
    return proposal_from(value)


def first_json(text: str) -> Any:
    candidates = [text.strip()]
    candidates += [m.group(1).strip() for m in _FENCE.finditer(text)]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        if not candidate:
            continue
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            continue
    if start >= 0:  # an object followed by prose that has braces of its own
        try:
            return json.JSONDecoder().raw_decode(text, start)[0]
        except json.JSONDecodeError:
            pass
    return None


def looks_cut_off(text: str) -> bool:
    """From the first `{` or `[`: brackets still open or a string still open at the end."""
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if not starts:
        return False
    depth, in_string, escaped = 0, False, False
    for char in text[min(starts) :]:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
    return in_string or depth > 0


def proposal_from(value: Mapping[str, Any]) -> Proposal:
    """Defaults for what is missing; `expected_outcome` or `expectedOutcome`."""
    edits = value.get("edits", [])
    if edits is None:
        edits = []
    if not isinstance(edits, list):
        raise PlanError("the planner's `edits` must be a list")
    outcome = value.get("expected_outcome", value.get("expectedOutcome"))
    return Proposal(
        summary=_text(value.get("summary")) or DEFAULT_SUMMARY,
        rationale=_text(value.get("rationale")),
        expected_outcome=_text(outcome),
        edits=list(edits),
    )


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value.strip() if isinstance(value, str) else json.dumps(value)
