"""What a session entry type declaration is made of, and what is derived from a table of them:
the checks of a record's fields and the fields table of docs/sessions.md. The table itself is
`core/entry_types.py`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .jsonfile import parse_json
from .messages import ToolCall
from .text import json_type, shorten

Entry = Mapping[str, Any]
ChatItem = dict[str, Any]
"""A chat transcript item: one of `wire.ChatItem` (tests check each type's items against it)."""

SUMMARY_LABEL = (
    "[Summary of the earlier part of this session. It was compacted to fit the context window; "
    "the full record, compacted part included, is in `history` in the kernel.]"
)
SUMMARY_ENTRY_CHARS = 4_000  # of one entry in a summary request (head and tail kept)


@dataclass(frozen=True)
class Field:
    """A field of an entry: its JSON type, whether it must be there, whether it may be null."""

    type: type  # str, int, bool, dict or list (JSON's string, number, boolean, object, array)
    about: str = ""
    required: bool = False
    nullable: bool = False


@dataclass(frozen=True)
class NoticeKindSpec:
    """A kind of notice: what it means, whether the chat shows it as a warning, whether it is
    for the user only (never read by the model) or told to the model as a sub-agent's message."""

    about: str
    warning: bool = False
    for_the_user_only: bool = False
    told_as_message: bool = False


@dataclass(frozen=True)
class Seen:
    """One message the model reads of an entry (`sessions._ContextBuilder` makes it a `Message`).

    `when`: `now` (appended where the entry is), `opens_turn` (the turn's message: what waits for
    the next turn goes before it), `before_next_turn` (waits, and goes before the next turn's
    message), `opens_context` (a compaction's summary: the message right after it joins it)."""

    role: Literal["user", "assistant", "tool"]
    text: str
    when: Literal["now", "opens_turn", "before_next_turn", "opens_context"] = "now"
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""
    images: tuple[Mapping[str, Any], ...] = ()  # as the entry references them


@dataclass
class ChatContext:
    """What the chat projection carries from one entry to the next."""

    child_state: Callable[[str], tuple[str, str | None]] | None = None
    code_by_call: dict[str, str | None] = field(default_factory=dict)
    decision_by_call: dict[str, str] = field(default_factory=dict)
    """Ask mode: the user's answer (`cell_approval`) to the call whose cell did not run."""
    price: Callable[[str, str, dict[str, Any]], float | None] | None = None
    """An answer's cost from its provider, model and usage (core/answer_cost.py, supplied by the
    transcript: the providers' price tables sit above this registry); None: cost unknown."""


def nothing_seen(entry: Entry, in_turn: bool) -> tuple[Seen, ...]:
    return ()


def never(entry: Entry) -> bool:
    return False


def always(entry: Entry) -> bool:
    return True


@dataclass(frozen=True)
class EntryType:
    """One session entry type. `seen(entry, in_turn)`: what the model reads of it (`in_turn`:
    whether the entry is inside a turn). `summarised(entry, in_turn)`: its lines in a summary
    (None: never in one). `chat(entry, context)`: its chat items (None: no chat line);
    `chat_items`: the `type` of each item it can make (`wire.ChatItem`). `in_history`: whether
    the kernel's `history` lists it. `turn`: whether it opens or closes a turn. `shape`: a check
    of nested values beyond the fields' types (the problem, or None). `example`: a typical
    entry's fields (the tests run every projection over it)."""

    name: str
    about: str
    fields: Mapping[str, Field]
    example: Mapping[str, Any]
    seen: Callable[[Entry, bool], tuple[Seen, ...]] = nothing_seen
    summarised: Callable[[Entry, bool], list[str]] | None = None
    chat: Callable[[Entry, ChatContext], list[ChatItem]] | None = None
    chat_items: tuple[str, ...] = ()
    in_history: Callable[[Entry], bool] = never
    turn: Literal["opens", "closes"] | None = None
    shape: Callable[[Entry], str | None] | None = None


class UndeclaredEntry(ValueError):
    """An entry type or field that core/entry_types.py does not declare: it is not written."""


# ---------------------------------------------------------------- helpers of the projections


def text_of(entry: Entry, key: str) -> str:
    return str(entry.get(key, ""))


def notice_text(entry: Entry) -> str:
    return f"[notice] {text_of(entry, 'text')}"


def now(text: str) -> tuple[Seen, ...]:
    """A user message where the entry is."""
    return (Seen("user", text),)


def before_next_turn(text: str) -> tuple[Seen, ...]:
    """Text that goes before the next turn's message."""
    return (Seen("user", f"{text}\n\n", when="before_next_turn"),)


def summary_message(summary: str) -> str:
    """The text of the user message that stands for a compacted prefix."""
    return f"{SUMMARY_LABEL}\n\n{summary.strip()}"


def cut_for_summary(text: str, limit: int = SUMMARY_ENTRY_CHARS) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - limit:,} characters cut ...]\n{text[-half:]}"


def code_of(arguments: object) -> str | None:
    """The `code` of a `python` tool call's raw arguments, or None."""
    try:
        parsed = parse_json(arguments)  # type: ignore[arg-type]
    except (ValueError, TypeError):
        return None
    code = parsed.get("code") if isinstance(parsed, dict) else None
    return code if isinstance(code, str) else None


def compaction_text(entry: Entry, tokens_after: int) -> str:
    """The chat's line for a compaction."""
    why = "requested" if entry.get("trigger") == "requested" else "near the context window"
    return (
        f"Context compacted ({why}): {entry.get('tokens_before', 0):,} → about "
        f"{tokens_after:,} tokens; {entry.get('dropped_entries', 0)} earlier entries are "
        "summarised (the full record stays in `history`)."
    )


def notice_item(entry: Entry, kind: str, text: str) -> list[ChatItem]:
    return [{"type": "notice", "turn": entry.get("turn"), "kind": kind, "text": text}]  # type: ignore[typeddict-item]


def has_text_fields(value: Any, keys: tuple[str, ...]) -> bool:
    return isinstance(value, dict) and all(isinstance(value.get(k), str) for k in keys)


# ---------------------------------------------------------------- checking records

TURN = Field(int, "the turn it belongs to", nullable=True)
"""Checked on every entry, of a declared type or not."""

_JSON_NAMES = {
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
    dict: "an object",
    list: "an array",
}
_ABSENT = object()


def fields_problem(declared: EntryType | None, entry: Entry) -> str | None:
    """Why a loaded entry's declared fields cannot be read (None: they can). Fields it has that
    are not declared are left alone: a newer build may have written them."""
    name = f"entry {shorten(entry['id'])}"
    fields = {"turn": TURN, **(declared.fields if declared is not None else {})}
    for key, spec in fields.items():
        if spec.required and (key not in entry or type(entry[key]) is not spec.type):
            what = "text field" if spec.type is str else "field"
            return f"{name} ({entry['type']}) has no {what} {key!r}"
    for key, spec in fields.items():
        value = entry.get(key, _ABSENT)
        if value is _ABSENT or (value is None and spec.nullable):
            continue
        if type(value) is not spec.type:  # exactly: JSON's true is not a number here
            return (
                f"{name} ({entry['type']}) has {json_type(value)} as {key!r}, "
                f"not {_JSON_NAMES[spec.type]}"
            )
    if declared is not None and declared.shape is not None:
        found = declared.shape(entry)
        if found is not None:
            return f"{name} has {found}"
    return None


def new_entry_problem(declared: EntryType | None, entry_type: str, fields: Entry) -> str | None:
    """Why `fields` do not make a declared entry that loads back (None: they do)."""
    if declared is None:
        return (
            f"session entry type {entry_type!r} is not declared in core/entry_types.py; "
            "declare it there before writing it"
        )
    extra = sorted(set(fields) - set(declared.fields))
    if extra:
        return (
            f"{entry_type} has no field {', '.join(map(repr, extra))}: declare it in "
            "core/entry_types.py before writing it"
        )
    found = fields_problem(declared, {"id": "new", "type": entry_type, **fields})
    return None if found is None else f"cannot write {entry_type}: {found}"


# ---------------------------------------------------------------- generated documentation

DOCS_BEGIN = "<!-- entry types: generated by python -m prime_agent_lab.core.entry_types --docs -->"
DOCS_END = "<!-- end of entry types -->"


def markdown_table(table: Mapping[str, EntryType]) -> str:
    """The entry types and their fields, for docs/sessions.md."""
    rows = ["| entry type | what it is | fields |", "| --- | --- | --- |"]
    for declared in table.values():
        fields = "; ".join(
            f"`{key}`{' (required)' if spec.required else ''}: {spec.about}"
            for key, spec in declared.fields.items()
        )
        rows.append(f"| `{declared.name}` | {declared.about} | {fields} |")
    return "\n".join(rows)


def docs_with_table(text: str, table: Mapping[str, EntryType]) -> str:
    """`text` (docs/sessions.md) with its generated block replaced by the current table."""
    head, found, rest = text.partition(DOCS_BEGIN)
    _, ended, tail = rest.partition(DOCS_END)
    if not found or not ended:
        raise ValueError(f"docs/sessions.md lacks the markers {DOCS_BEGIN!r} ... {DOCS_END!r}")
    return f"{head}{DOCS_BEGIN}\n{markdown_table(table)}\n{DOCS_END}{tail}"
