"""The wire types in `core/wire.py` are the one source of truth for what the panel reads."""

from __future__ import annotations

import ast
import json
import types
import typing
from pathlib import Path
from typing import Any, Literal, Union

from prime_agent_lab.core import wire
from prime_agent_lab.core.sessions import SessionRepository
from prime_agent_lab.core.transcript import chat_transcript
from tests.python_source import parse

REPO = Path(__file__).resolve().parents[1]
WIRE_TS = REPO / "labextension" / "src" / "wire.ts"
REGENERATE = "python -m prime_agent_lab.core.wire --ts > labextension/src/wire.ts"


def test_checked_in_typescript_is_generated_from_wire_py() -> None:
    assert WIRE_TS.read_text() == wire.typescript(), f"wire.ts is stale: run `{REGENERATE}`"


def test_typescript_declares_every_status_event_and_item_the_server_sends() -> None:
    ts = wire.typescript()
    assert "export type SessionStatus = 'idle' | 'running' | 'inactive' | 'broken';" in ts
    for status in ("aborted", "skipped", "interrupted"):
        assert f"'{status}'" in ts.split("export type CellStatus =")[1].split(";")[0]
    for event in ("notice", "cell_waiting", "cell_running", "turn_ended"):
        assert f"type: '{event}';" in ts
    assert "kind?: NoticeKind;" in ts.split("export interface INoticeItem")[1].split("}")[0]


def _dict_keys(function: ast.AST, name: str, before: int) -> set[str]:
    """The constant keys a local dict `name` holds at line `before` of `function`: those of its
    last `name = {...}` before then (its `**other` spreads resolved the same way) and of each
    `name["key"] = ...` after that assignment. Empty when it is not built that way here."""
    assigned = [
        node
        for node in ast.walk(function)
        if isinstance(node, ast.Assign | ast.AnnAssign)
        and node.lineno < before
        and isinstance(node.value, ast.Dict)
        and any(
            isinstance(t, ast.Name) and t.id == name
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        )
    ]
    if not assigned:
        return set()
    last = max(assigned, key=lambda n: n.lineno)
    assert isinstance(last.value, ast.Dict)
    keys: set[str] = set()
    for key, value in zip(last.value.keys, last.value.values, strict=True):
        if isinstance(key, ast.Constant):
            keys.add(str(key.value))
        elif key is None and isinstance(value, ast.Name):
            keys |= _dict_keys(function, value.id, last.lineno)
    for node in ast.walk(function):
        if (
            isinstance(node, ast.Assign)
            and last.lineno < node.lineno < before
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Subscript)
            and isinstance(node.targets[0].value, ast.Name)
            and node.targets[0].value.id == name
            and isinstance(node.targets[0].slice, ast.Constant)
        ):
            keys.add(str(node.targets[0].slice.value))
    return keys


def _emitted_events() -> list[tuple[str, str, set[str], bool]]:
    """Every `<x>.events.emit("type", field=...)` in the package: (where, type, fields, **).
    A `**name` of a dict built in the same function counts the keys it holds there."""
    found = []
    for path in sorted((REPO / "prime_agent_lab").rglob("*.py")):
        tree = parse(path.read_text(), str(path))
        functions = [
            f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
        ]
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "emit"
                and isinstance(node.func.value, ast.Attribute)
                and node.func.value.attr == "events"
            ):
                continue
            first = node.args[0] if node.args else None
            assert isinstance(first, ast.Constant), f"{path}:{node.lineno}: event type not literal"
            fields = {k.arg for k in node.keywords if k.arg is not None}
            spread = any(k.arg is None for k in node.keywords)
            around = [f for f in functions if f.lineno <= node.lineno <= (f.end_lineno or 0)]
            for keyword in node.keywords:
                if keyword.arg is None and isinstance(keyword.value, ast.Name) and around:
                    inner = max(around, key=lambda f: f.lineno)
                    fields |= _dict_keys(inner, keyword.value.id, node.lineno)
            where = f"{path.relative_to(REPO)}:{node.lineno}"
            found.append((where, str(first.value), fields, spread))
    return found


def test_every_event_the_server_emits_is_declared_in_wire_py() -> None:
    declared = wire.event_types()
    emitted = _emitted_events()
    assert len(emitted) >= 8, emitted  # the scan sees the agent loop's emits
    for where, event_type, fields, spread in emitted:
        assert event_type in declared, f"{where}: event {event_type!r} is not in wire.py"
        cls = declared[event_type]
        own = set(typing.get_type_hints(cls)) - wire.EVENT_FIELDS_ADDED_BY_BUS
        required = set(cls.__required_keys__) - wire.EVENT_FIELDS_ADDED_BY_BUS
        assert fields <= own, f"{where}: {event_type} fields {fields - own} not in wire.py"
        if not spread:
            assert required <= fields, f"{where}: {event_type} lacks {required - fields}"


def _conforms(value: Any, annotation: Any) -> bool:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is Any:
        return True
    if annotation is type(None):
        return value is None
    if annotation is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if annotation in (str, int, bool):
        return isinstance(value, annotation) and not (annotation is int and value is True)
    if origin is Literal:
        return value in args
    if origin in (Union, types.UnionType):
        return any(_conforms(value, arg) for arg in args)
    if origin is list:
        return isinstance(value, list) and all(_conforms(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(_conforms(v, args[1]) for v in value.values())
    if typing.is_typeddict(annotation):
        hints = typing.get_type_hints(annotation)
        return (
            isinstance(value, dict)
            and set(annotation.__required_keys__) <= set(value)
            and set(value) <= set(hints)
            and all(_conforms(value[k], hints[k]) for k in value)
        )
    raise TypeError(annotation)


def test_chat_transcript_items_conform_to_the_wire_types(tmp_path: Path) -> None:
    session = SessionRepository(tmp_path).create(notebook_path="a.ipynb")
    session.append("user_message", turn=1, text="hi")
    call = {"id": "c1", "name": "python", "arguments": json.dumps({"code": "print(1)"})}
    session.append("assistant_message", turn=1, text="Running it.", tool_calls=[call])
    session.append(
        "tool_result",
        turn=1,
        tool_call_id="c1",
        cell_id="cell-1",
        status="interrupted",
        execution_count=2,
        observation="KeyboardInterrupt",
        preview="KeyboardInterrupt",
    )
    session.append("error", turn=1, message="model call failed", kind="provider")
    session.append("turn_end", turn=1, stop_reason="stopped", final_text="")
    items = chat_transcript(session)
    assert [item["type"] for item in items] == ["user", "assistant", "cell", "error", "notice"]
    for item in items:
        assert _conforms(item, wire.ChatItem), item
    assert items[-1]["text"] == wire.STOP_NOTICES["stopped"]


def test_conformance_check_rejects_what_the_panel_could_not_read() -> None:
    cell = {"type": "cell", "turn": 1, "cell_id": "x", "code": "", "execution_count": None}
    assert _conforms({**cell, "status": "skipped", "preview": ""}, wire.ChatItem)
    assert not _conforms({**cell, "status": "exploded", "preview": ""}, wire.ChatItem)
    assert not _conforms({**cell, "status": "ok"}, wire.ChatItem)  # no preview
    assert not _conforms({"type": "mystery", "turn": 1}, wire.ChatItem)


def test_frontend_test_fixtures_conform_to_the_wire_types() -> None:
    """The panel's unit tests replay these files, so they must be what the server can send."""
    fixtures = sorted((REPO / "labextension" / "test" / "fixtures").glob("*.json"))
    assert fixtures
    for path in fixtures:
        data = json.loads(path.read_text())
        assert _conforms(data["session"], wire.SessionWithTranscript), path.name
        for event in data["events"]:
            assert _conforms(event, wire.AgentEvent), (path.name, event)
