"""Session entry types are declared once (core/entry_types.py): what the model reads of an entry,
its token estimate, its summary lines, its chat item and its history record all come from that
declaration, so they cannot disagree; and nothing undeclared is written."""

from __future__ import annotations

import ast
import json
import typing
from pathlib import Path
from typing import Any

import pytest

from prime_agent_lab.core import wire
from prime_agent_lab.core.compaction import _cut_index, render_entries
from prime_agent_lab.core.entry_schema import ChatContext, UndeclaredEntry
from prime_agent_lab.core.entry_types import (
    DECLARED,
    DOCS,
    NOTICE_KINDS,
    TOLD_AS_MESSAGES,
    chat_items,
    check_new,
    docs_with_table,
    in_history,
    seen,
    summarised,
)
from prime_agent_lab.core.messages import Message
from prime_agent_lab.core.sessions import SessionLog, SessionRepository, _ContextBuilder
from prime_agent_lab.core.tokens import entries_tokens, entry_tokens, estimate_tokens
from prime_agent_lab.core.transcript import chat_transcript, history_records
from tests.python_source import parse

from .test_wire import _conforms

REPO = Path(__file__).resolve().parents[1]
CALL = {"id": "c1", "name": "python", "arguments": json.dumps({"code": "x = 1"})}


def read_tokens(messages: list[Message]) -> int:
    """What the model reads, estimated message by message (the test's own oracle: the text, a
    call's arguments, a small overhead per message, call and image)."""
    total = 0
    for m in messages:
        if m.role == "assistant":
            arguments = "".join(c.arguments for c in m.tool_calls)
            total += estimate_tokens(m.text + arguments) + 4 + 8 * len(m.tool_calls)
        elif m.role == "tool":
            total += estimate_tokens(m.text) + 8 + 1_600 * len(m.images)
        else:
            total += estimate_tokens(m.text) + 4
    return total


def example(name: str) -> dict[str, Any]:
    return {"id": f"x-{name}", "type": name, **DECLARED[name].example}


def context_around(entry: dict[str, Any] | None, in_turn: bool) -> list[Message]:
    """The messages the model reads of a turn with one call open, then `entry` (inside that
    turn, or after it), then the next turn's message `next`."""
    builder = _ContextBuilder(lambda image: "aGk=")
    before = [
        {"type": "user_message", "text": "go"},
        {"type": "assistant_message", "text": "", "tool_calls": [CALL]},
    ]
    if not in_turn:
        before.append({"type": "turn_end", "stop_reason": "end_turn", "final_text": ""})
    for record in before:
        builder.feed(record)
    if entry is not None:
        builder.feed(entry)
    builder.feed({"type": "user_message", "text": "next"})
    return builder.messages_now()


# ---------------------------------------------------------------- every declared type


@pytest.mark.parametrize("in_turn", [False, True], ids=["between turns", "in a turn"])
@pytest.mark.parametrize("name", sorted(DECLARED))
def test_the_token_estimate_is_exactly_what_the_model_reads_of_each_type(
    name: str, in_turn: bool
) -> None:
    entry = example(name)
    parts = seen(entry, in_turn)
    without = context_around(None, in_turn)
    with_it = context_around(entry, in_turn)
    later = "".join(p.text for p in parts if p.when == "before_next_turn")
    if name == "compaction":  # opens a context of its own: read on its own
        builder = _ContextBuilder(lambda image: None)
        builder.feed(entry)
        assert entry_tokens(entry, in_turn) == read_tokens(builder.messages_now()) > 0
        return
    if later:  # read with the next turn's message: its text, no message of its own
        assert with_it[:-1] == without[:-1]
        assert with_it[-1].text == f"{later}next"
        assert entry_tokens(entry, in_turn) == estimate_tokens(later) > 0
        return
    told = [m for m in with_it if m not in without]  # a result replaces its "not run" one
    assert len(told) == len(parts)
    assert entry_tokens(entry, in_turn) == read_tokens(told)
    assert (entry_tokens(entry, in_turn) > 0) == bool(parts)
    if not parts:
        assert with_it == without  # nothing of it reaches the model


@pytest.mark.parametrize("in_turn", [False, True], ids=["between turns", "in a turn"])
@pytest.mark.parametrize("name", sorted(DECLARED))
def test_what_the_model_reads_of_each_type_is_in_a_summary(name: str, in_turn: bool) -> None:
    entry = example(name)
    lines = "\n".join(summarised(entry, in_turn))
    for part in seen(entry, in_turn):
        if part.when == "opens_context":
            continue  # a compaction is never among the entries a later one drops
        said = part.text.strip().removeprefix("[notice] ")
        assert said and said[:200] in lines, (name, lines)
    if DECLARED[name].summarised is None:
        assert lines == ""


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_each_type_makes_its_declared_chat_items_or_none(name: str) -> None:
    declared = DECLARED[name]
    context = ChatContext(lambda child: ("running", None))
    context.code_by_call["c1"] = "x = 1"
    items = chat_items(example(name), context)
    if declared.chat is None:
        assert items == [] and declared.chat_items == ()
        return
    assert items, f"{name}: its example makes no chat item"
    item_types = wire.chat_item_types()
    for item in items:
        assert item["type"] in declared.chat_items, item
        assert _conforms(item, item_types[item["type"]]), item


def test_the_chat_items_the_types_declare_are_the_wire_chat_items() -> None:
    declared = {name for t in DECLARED.values() for name in t.chat_items}
    assert declared == set(wire.chat_item_types())


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_each_example_is_a_record_that_is_written_and_loads_back(name: str, tmp_path: Path) -> None:
    log = SessionRepository(tmp_path).create(notebook_path="a.ipynb")
    first = log.append("user_message", turn=1, text="go")
    fields = dict(DECLARED[name].example)
    if name == "compaction":
        fields["first_kept_entry_id"] = first["id"]
    written = log.append(name, **fields)
    assert SessionLog.load(log.directory).by_id[written["id"]] == written


def test_notices_for_the_user_only_reach_neither_the_model_nor_its_tokens_summary_or_history(
    tmp_path: Path,
) -> None:
    for kind in wire.FOR_THE_USER_ONLY:
        entry = {"id": "n", "type": "notice", "kind": kind, "text": "variables: secret_plan"}
        for in_turn in (False, True):
            assert seen(entry, in_turn) == () and entry_tokens(entry, in_turn) == 0
            assert summarised(entry, in_turn) == []
        assert not in_history(entry)
    log = SessionRepository(tmp_path).create(notebook_path="a.ipynb")
    log.append("notice", kind="session_untrusted", text="variables: secret_plan")
    log.append("user_message", turn=1, text="go")
    assert "secret_plan" not in json.dumps(history_records(log))
    assert "secret_plan" not in "".join(m.text for m in log.context_messages())
    assert [i["type"] for i in chat_transcript(log)] == ["notice", "user"]  # the user sees it


# ---------------------------------------------------------------- the fix: one rule for all three


def told_turn(tmp_path: Path) -> SessionLog:
    """A turn with a notice the cell's output already said, a kernel clean-up and a
    refinement; then, between turns, a notice and a refinement."""
    log = SessionRepository(tmp_path).create(notebook_path="a.ipynb")
    log.append("user_message", turn=1, text="fit the model")
    log.append("assistant_message", turn=1, text="", tool_calls=[CALL])
    log.append("tool_result", turn=1, tool_call_id="c1", observation="[kernel restarted] x")
    log.append("notice", turn=1, kind="kernel_restarted", text="The kernel was restarted.")
    log.append("kernel_gc", turn=1, text="Kernel clean-up after compaction: deleted big.")
    log.append("refinement", turn=1, text="[refinement r1] A note on plots.", refinement={})
    log.append("assistant_message", turn=1, text="Done.", tool_calls=[])
    log.append("turn_end", turn=1, stop_reason="end_turn", final_text="Done.")
    return log


def test_the_token_estimate_of_a_turn_is_what_the_model_reads_of_it(tmp_path: Path) -> None:
    """Before, `kernel_gc` and `refinement` entries were counted as 0 tokens though the model
    reads them, and a notice in a turn was counted though the model never reads it."""
    log = told_turn(tmp_path)
    messages = log.context_messages()
    assert [m.text for m in messages if m.text.startswith("[notice]")] == [
        "[notice] Kernel clean-up after compaction: deleted big.",
        "[notice] [refinement r1] A note on plots.",
    ]
    assert entries_tokens(log.path()) == read_tokens(messages)


def test_between_turns_a_notice_and_a_refinement_are_read_and_counted_once(
    tmp_path: Path,
) -> None:
    log = told_turn(tmp_path)
    log.append("notice", kind="kernel_restarted_externally", text="Restarted from the menu.")
    log.append("notice", kind="child_completed", text="Sub-agent 'a' finished.")  # its message
    log.append("refinement", text="[refinement r2] Another note.", refinement={})
    before = read_tokens(log.context_messages())
    log.append("user_message", turn=2, text="go on")
    messages = log.context_messages()
    assert messages[-1].text == (
        "[notice] Restarted from the menu.\n\n[notice] [refinement r2] Another note.\n\ngo on"
    )
    counted = entries_tokens(log.path()[-4:], in_turn=False)
    assert abs(counted - (read_tokens(messages) - before)) <= 2  # rounding of the joined text
    assert "child_completed" in TOLD_AS_MESSAGES


def test_a_summary_renders_what_the_model_read_and_where_a_turn_broke_off(
    tmp_path: Path,
) -> None:
    """Before, a summary rendered the notice the model never read and left out the clean-up and
    the refinement it did read."""
    log = told_turn(tmp_path)
    log.append("error", turn=1, message="model call failed (overloaded): 529", kind="provider")
    text = render_entries(log.path())
    assert "The kernel was restarted." not in text  # said by the cell's output above
    assert "[cell output] [kernel restarted] x" in text
    assert "[notice] Kernel clean-up after compaction: deleted big." in text
    assert "[notice] [refinement r1] A note on plots." in text
    assert "[error] model call failed (overloaded): 529" in text


def test_after_a_compaction_that_cut_a_turn_its_notices_still_stay_out_of_the_context(
    tmp_path: Path,
) -> None:
    """The turn's opening message was compacted away: a notice later in that turn is still one
    the model does not read (before, it was read with the next turn's message)."""
    log = SessionRepository(tmp_path).create(notebook_path="a.ipynb")
    log.append("user_message", turn=1, text="a long task")
    for n in range(3):
        call = {**CALL, "id": f"c{n}"}
        step = log.append("assistant_message", turn=1, text="", tool_calls=[call])
        log.append("tool_result", turn=1, tool_call_id=f"c{n}", observation="z" * 400)
    log.append("compaction", turn=1, summary="## Goal\na long task", first_kept_entry_id=step["id"])
    log.append("notice", turn=1, kind="kernel_restarted", text="The kernel was restarted.")
    log.append("turn_end", turn=1, stop_reason="end_turn", final_text="")
    log.append("user_message", turn=2, text="next")

    messages = log.context_messages()
    assert messages[-1].text == "next"
    compaction, kept = log.context_entries()
    assert compaction is not None
    in_turn = log.in_turn_before(kept[0])
    assert entry_tokens(compaction) + entries_tokens(kept, in_turn) == read_tokens(messages)


def test_the_cut_counts_what_the_model_reads() -> None:
    """A clean-up the model reads counts toward the recent part a compaction keeps."""
    entries: list[dict[str, Any]] = [{"type": "user_message", "text": "go"}]
    for n in range(4):
        call = {**CALL, "id": f"c{n}"}
        entries.append({"type": "assistant_message", "text": "", "tool_calls": [call]})
        entries.append({"type": "tool_result", "tool_call_id": f"c{n}", "observation": "z" * 40})
    entries.append({"type": "kernel_gc", "text": "y" * 40_000})  # about 10,000 tokens
    assert _cut_index(entries, 5_000) == len(entries) - 3  # only the last step is kept


# ---------------------------------------------------------------- writing only what is declared


def test_writing_an_undeclared_type_or_field_fails_and_writes_nothing(tmp_path: Path) -> None:
    log = SessionRepository(tmp_path).create(notebook_path="a.ipynb")
    first = log.append("user_message", turn=1, text="go")
    size = log.file.stat().st_size
    with pytest.raises(UndeclaredEntry, match=r"'wish' is not declared in core/entry_types\.py"):
        log.append("wish", turn=1, text="ship it")
    with pytest.raises(UndeclaredEntry, match=r"user_message has no field 'mood'"):
        log.append("user_message", turn=2, text="go", mood="glad")
    with pytest.raises(UndeclaredEntry, match=r"has a string as 'turn', not a number"):
        log.append("user_message", turn="2", text="go")
    with pytest.raises(UndeclaredEntry, match=r"has no text field 'tool_call_id'"):
        log.append("tool_result", turn=1, observation="x")
    assert log.file.stat().st_size == size and log.leaf_id == first["id"]
    assert [e["id"] for e in SessionLog.load(log.directory).entries] == [first["id"]]
    check_new("user_message", {"turn": 1, "text": "go"})  # declared: nothing raised


def _appends() -> list[tuple[str, str, set[str]]]:
    """Every `<...>session.append("type", field=...)` (and the log's own `self.append`) in the
    package: (where, type, fields written by name)."""
    found = []
    for path in sorted((REPO / "prime_agent_lab").rglob("*.py")):
        tree = parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            receiver = node.func.value
            on_a_log = (isinstance(receiver, ast.Name) and receiver.id == "session") or (
                isinstance(receiver, ast.Attribute) and receiver.attr == "session"
            )
            if path.name == "sessions.py" and isinstance(receiver, ast.Name):
                on_a_log = on_a_log or receiver.id == "self"
            if node.func.attr != "append" or not on_a_log:
                continue
            first = node.args[0] if node.args else None
            where = f"{path.relative_to(REPO)}:{node.lineno}"
            assert isinstance(first, ast.Constant), f"{where}: entry type not a literal"
            fields = {k.arg for k in node.keywords if k.arg is not None}
            found.append((where, str(first.value), fields))
    return found


def test_every_append_in_the_package_names_a_declared_type_and_fields() -> None:
    appends = _appends()
    assert len(appends) >= 20, appends  # the scan sees the loop's, the runtime's, the mailbox's
    for where, entry_type, fields in appends:
        assert entry_type in DECLARED, f"{where}: {entry_type!r} is not declared"
        undeclared = fields - set(DECLARED[entry_type].fields)
        assert not undeclared, f"{where}: {entry_type} fields {undeclared} are not declared"


# ---------------------------------------------------------------- generated copies


def test_the_docs_table_of_entry_types_is_generated_from_the_declarations() -> None:
    text = DOCS.read_text()
    assert docs_with_table(text, DECLARED) == text, (
        "docs/sessions.md is stale: run `python -m prime_agent_lab.core.entry_types --docs`"
    )


def test_the_typescript_entry_types_are_the_declared_ones() -> None:
    ts = wire.typescript()
    declared = ts.split("export type SessionEntryType = ")[1].split(";")[0]
    assert declared == " | ".join(f"'{name}'" for name in DECLARED)
    assert "type: SessionEntryType;" in ts.split("export interface ITreeNode")[1].split("}")[0]
    warnings = ts.split("export const WARNING_NOTICES")[1].split(";")[0]
    for kind, spec in NOTICE_KINDS.items():
        assert (f"'{kind}'" in warnings) == spec.warning, kind
    assert set(typing.get_args(wire.NoticeKind)) == set(NOTICE_KINDS)
