"""The session list of a notebook (`GET .../sessions?notebook=`) and deleting a session
(`DELETE .../sessions/<id>`), through a real jupyter_server (docs/pairing.md, section 1)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from prime_agent_lab.core import sessions as sessions_module
from prime_agent_lab.core.session_list import SessionCatalog, StoredSession, tree_costs
from prime_agent_lab.core.sessions import SESSION_FILE, SessionLog, SessionRepository

from .conftest import use_script, wait_for
from .test_file_fuzz import (
    BYTE_CASES,
    HOSTILE,
    good_session,
    make_at,
    valid_log,
    wrong_field_logs,
)

NOTEBOOK, OTHER = "study/a.ipynb", "b.ipynb"
SONNET = {"provider": "anthropic", "model": "claude-sonnet-4-5"}  # $3 in, $15 out per million
LONG_FIRST_MESSAGE = "Load the survey data,\n  clean the outliers " + "and plot it " * 20


async def listed(jp_fetch: Any, notebook: str | None = None) -> tuple[int, Any]:
    params = {"notebook": notebook} if notebook is not None else None
    response = await jp_fetch("prime-agent", "api", "sessions", params=params, raise_error=False)
    return response.code, json.loads(response.body)


async def delete(jp_fetch: Any, session_id: str) -> tuple[int, Any]:
    response = await jp_fetch(
        "prime-agent", "api", "sessions", session_id, method="DELETE", raise_error=False
    )
    return response.code, json.loads(response.body) if response.body else None


def priced_call(log: SessionLog, turn: int, input_tokens: int, output_tokens: int) -> None:
    usage = {"input_tokens": input_tokens, "output_tokens": output_tokens}
    log.append("assistant_message", turn=turn, text="done", tool_calls=[], usage=usage, **SONNET)


def make_sessions(repository: SessionRepository) -> dict[str, SessionLog]:
    """Two sessions of NOTEBOOK (the first with a sub-agent), one of OTHER, one without a
    message yet, and one a model without a price answered."""
    older = repository.create(notebook_path=NOTEBOOK, **SONNET)
    older.append("user_message", turn=1, text=LONG_FIRST_MESSAGE)
    priced_call(older, 1, 1_000_000, 0)  # $3.00
    child = repository.create(
        notebook_path="study/a-agents/part.ipynb",
        parent_session_id=older.session_id,
        name="part",
        depth=1,
        task="count",
        **SONNET,
    )
    child.append("user_message", turn=1, text="count the rows")
    priced_call(child, 1, 0, 100_000)  # $1.50
    time.sleep(0.01)  # entry times have millisecond resolution: newest first must be clear
    unpriced = {"provider": "openai", "model": "local-llama"}  # behind a base URL: no price
    newer = repository.create(notebook_path=NOTEBOOK, **unpriced)
    newer.append("user_message", turn=1, text="second try")
    newer.append("assistant_message", turn=1, text="ok", usage={"input_tokens": 5}, **unpriced)
    other = repository.create(notebook_path=OTHER, **SONNET)
    other.append("user_message", turn=1, text="another notebook")
    return {"older": older, "child": child, "newer": newer, "other": other}


def write_damaged(root: Path, name: str, notebook: str) -> None:
    """A log whose header is fine and whose second line is not a record."""
    (root / name).mkdir()
    header = {"type": "session", "version": 2, "session_id": name, "notebook_path": notebook}
    (root / name / SESSION_FILE).write_text(json.dumps(header) + "\n[1, 2, 3]\n")


def write_hostile(root: Path) -> None:
    """A sparse log past the size cap, and one whose token count no float can hold."""
    (root / "huge").mkdir()
    with (root / "huge" / SESSION_FILE).open("wb") as f:
        f.truncate(300 * 2**20)
    (root / "overflow").mkdir()
    header = {"type": "session", "version": 2, "session_id": "overflow", "notebook_path": NOTEBOOK}
    call = {
        "id": "e1",
        "parent_id": None,
        "ts": "2020-01-01T00:00:00.000+00:00",
        "type": "assistant_message",
        "text": "",
        "usage": {"input_tokens": 10**400},
        **SONNET,
    }
    lines = [json.dumps(header), json.dumps(call)]
    (root / "overflow" / SESSION_FILE).write_text("\n".join(lines) + "\n")


async def test_the_session_list_of_a_notebook_has_its_sessions_newest_first_with_titles_and_costs(
    jp_fetch: Any, host: Any
) -> None:
    made = make_sessions(host.repository)
    root = host.repository.root
    write_damaged(root, "damaged", NOTEBOOK)
    write_hostile(root)

    code, answer = await listed(jp_fetch, NOTEBOOK)

    assert code == 200, answer
    sessions = answer["sessions"]
    ids = [s["session_id"] for s in sessions]
    assert set(ids) == {made["newer"].session_id, made["older"].session_id, "damaged", "overflow"}
    assert ids.index(made["newer"].session_id) < ids.index(made["older"].session_id)
    by_id = {s["session_id"]: s for s in sessions}
    older, newer = by_id[made["older"].session_id], by_id[made["newer"].session_id]
    assert older["title"].startswith("Load the survey data, clean the outliers and plot it")
    assert len(older["title"]) <= 80 and older["title"].endswith("…")
    assert newer["title"] == "second try"
    assert older["cost"] == pytest.approx(3.0)
    assert older["cost_total"] == pytest.approx(4.5)  # with its sub-agent's $1.50
    assert newer["cost"] is None and newer["cost_total"] is None
    assert (older["provider"], older["model"], older["status"]) == (
        "anthropic",
        SONNET["model"],
        "inactive",
    )
    assert older["notebook_path"] == NOTEBOOK and older["turns"] == 1
    assert older["created"] and older["updated"] >= older["created"]
    assert by_id["damaged"]["status"] == "broken" and "line 2" in by_id["damaged"]["reason"]
    assert by_id["damaged"]["title"] is None
    assert by_id["overflow"]["cost"] is None and by_id["overflow"]["status"] == "inactive"

    code, answer = await listed(jp_fetch, OTHER)
    assert [s["session_id"] for s in answer["sessions"]] == [made["other"].session_id]
    code, answer = await listed(jp_fetch, "study/a-agents/part.ipynb")
    (child,) = answer["sessions"]
    assert child["parent_session_id"] == made["older"].session_id and child["name"] == "part"
    assert child["cost_total"] == pytest.approx(1.5)
    code, everything = await listed(jp_fetch)
    assert code == 200  # the route without ?notebook keeps its answer, the huge file included
    assert {s["session_id"]: s["status"] for s in everything["sessions"]}["huge"] == "broken"


async def test_the_list_shows_which_session_is_loaded_and_refuses_a_path_that_is_no_notebook(
    jp_fetch: Any, host: Any, make_notebook: Any
) -> None:
    path = make_notebook("live.ipynb")
    agent = await host.attach(path)

    code, answer = await listed(jp_fetch, path)

    assert code == 200
    (item,) = answer["sessions"]
    assert item["session_id"] == agent.session_id and item["status"] == "idle"
    assert item["title"] is None and item["cost_total"] == 0
    for bad in ("../outside.ipynb", "/etc/passwd.ipynb", "notes.txt"):
        code, answer = await listed(jp_fetch, bad)
        assert code == 400, (bad, answer)


async def test_each_item_names_its_last_user_message_and_a_fork_from_it_starts_there(
    jp_fetch: Any, host: Any
) -> None:
    log = host.repository.create(notebook_path=NOTEBOOK, **SONNET)
    log.append("user_message", turn=1, text="first question")
    log.append("turn_end", turn=1, stop_reason="end_turn", final_text="")
    asked = log.append("user_message", turn=2, text="second question")
    log.append("turn_end", turn=2, stop_reason="end_turn", final_text="")
    log.append("user_message", turn=3, text="[notice]", notice="child_completed")
    empty = host.repository.create(notebook_path=NOTEBOOK, **SONNET)

    code, answer = await listed(jp_fetch, NOTEBOOK)
    assert code == 200, answer

    by_id = {s["session_id"]: s for s in answer["sessions"]}
    assert by_id[log.session_id]["last_user_entry_id"] == asked["id"]  # not the notice
    assert "last_user_entry_id" not in by_id[empty.session_id]
    response = await jp_fetch(
        "prime-agent",
        "api",
        "sessions",
        log.session_id,
        "fork",
        method="POST",
        body=json.dumps({"entry_id": by_id[log.session_id]["last_user_entry_id"]}),
    )
    copy = json.loads(response.body)
    assert response.code == 201 and copy["text"] == "second question", copy


async def test_the_usage_of_a_session_with_a_token_count_no_float_holds_is_answered_not_a_500(
    jp_fetch: Any, host: Any
) -> None:
    write_hostile(host.repository.root)

    response = await jp_fetch(
        "prime-agent", "api", "sessions", "overflow", "usage", raise_error=False
    )

    assert response.code == 200, response.body
    report = json.loads(response.body)
    assert (report["calls"], report["usage"], report["cost"]) == (1, {}, None)


async def test_delete_refuses_an_attached_session_and_removes_a_detached_one(
    jp_fetch: Any, host: Any, make_notebook: Any
) -> None:
    path = make_notebook("pair.ipynb")
    first = await host.attach(path)
    second = await host.attach(path, new=True)  # takes the notebook over: the first detaches
    assert first.session_id not in host.agents and second.session_id in host.agents
    root = host.repository.root

    code, refused = await delete(jp_fetch, second.session_id)
    assert code == 409 and "open in a notebook" in refused["message"], refused
    assert (root / second.session_id / SESSION_FILE).is_file()

    code, done = await delete(jp_fetch, first.session_id)
    assert (code, done) == (200, {"deleted": first.session_id, "sub_agents": []})
    assert not (root / first.session_id).exists()
    code, answer = await listed(jp_fetch, path)
    assert [s["session_id"] for s in answer["sessions"]] == [second.session_id]

    code, missing = await delete(jp_fetch, first.session_id)
    assert code == 404 and first.session_id in missing["message"]


async def test_a_running_session_is_listed_running_and_cannot_be_deleted(
    jp_fetch: Any, host: Any, make_notebook: Any, agent_script: Any
) -> None:
    path = make_notebook("busy.ipynb")
    use_script(host, agent_script([{"code": "import time\ntime.sleep(600)"}, {"text": "done"}]))
    agent = await host.attach(path)
    await host.send(agent.session_id, "Wait for the data to arrive")
    try:
        await wait_for(lambda: agent.running)

        code, answer = await listed(jp_fetch, path)
        (item,) = answer["sessions"]
        assert item["status"] == "running" and item["title"] == "Wait for the data to arrive"
        code, refused = await delete(jp_fetch, agent.session_id)
        assert code == 409 and "running a turn" in refused["message"], refused
    finally:
        await host.stop(agent.session_id)
    assert (host.repository.root / agent.session_id / SESSION_FILE).is_file()


async def test_delete_refuses_path_tricks_and_links_and_removes_nothing_outside(
    jp_fetch: Any,
    host: Any,
    http_server_client: Any,
    jp_base_url: str,
    jp_auth_header: Any,
    tmp_path: Path,
) -> None:
    root = host.repository.root
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / SESSION_FILE).write_text('{"type": "session", "session_id": "linked"}\n')
    os.symlink(outside, root / "linked")
    keep = host.repository.create(notebook_path=NOTEBOOK)

    code, refused = await delete(jp_fetch, "linked")
    assert code == 409 and "link" in refused["message"], refused
    code, refused = await delete(jp_fetch, "x" * 200)  # matches the route, not a session id
    assert code == 400, refused
    for raw in ("..", "..%2F..%2Fetc", "%2e%2e", f"{keep.session_id}%2F..", ".%2E/outside"):
        url = f"{jp_base_url.rstrip('/')}/prime-agent/api/sessions/{raw}"
        response = await http_server_client.fetch(
            url, method="DELETE", headers=jp_auth_header, raise_error=False
        )
        assert response.code in (400, 404), (raw, response.code)

    assert (outside / SESSION_FILE).is_file() and (root / "linked").is_symlink()
    assert (root / keep.session_id / SESSION_FILE).is_file()


def test_tree_costs_survive_a_parent_loop_and_a_long_chain() -> None:
    def stored(session_id: str, parent: str | None, cost: float | None) -> StoredSession:
        return StoredSession(session_id, "a.ipynb", None, "", "", "", "", 0, parent, "", cost, None)

    loop = [stored("a", "b", 1.0), stored("b", "a", 2.0)]
    chain = [stored(f"s{i}", f"s{i - 1}" if i else None, 1.0) for i in range(5000)]

    totals = tree_costs(loop + chain)
    unknown_below = tree_costs([*chain, stored("unknown", "s4999", None)])

    assert {totals["a"], totals["b"]} <= {1.0, 2.0, 3.0}  # finite, no endless walk
    assert (totals["s0"], totals["s4998"]) == (5000.0, 2.0)
    assert unknown_below["s4999"] is None and unknown_below["s0"] is None


def test_a_catalog_rereads_only_changed_logs(tmp_path: Path) -> None:
    repository = SessionRepository(tmp_path / "sessions")
    log = repository.create(notebook_path="a.ipynb")
    catalog = SessionCatalog(repository.root)
    (first,) = catalog.stored()
    assert catalog.stored()[0] is first
    log.append("user_message", turn=1, text="now a title")
    (changed,) = catalog.stored()
    assert changed.title == "now a title"


def logs_read_whole(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The session ids whose logs are read whole from now on (SessionLog.read spied)."""
    names: list[str] = []
    read = SessionLog.read.__func__  # type: ignore[attr-defined]

    def spy(cls: type[SessionLog], directory: Path) -> SessionLog:
        names.append(directory.name)
        return read(cls, directory)

    monkeypatch.setattr(SessionLog, "read", classmethod(spy))
    return names


def test_a_notebooks_list_reads_only_its_sessions_and_their_sub_agents_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repository = SessionRepository(tmp_path / "sessions")
    logs = make_sessions(repository)
    moved = repository.create(notebook_path=OTHER, **SONNET)
    moved.append("user_message", turn=1, text="started in the other notebook")
    moved.append("notebook_moved", path=NOTEBOOK)
    write_damaged(repository.root, "damaged", NOTEBOOK)
    read = logs_read_whole(monkeypatch)

    items = SessionCatalog(repository.root).listing(NOTEBOOK)

    listed_ids = {item["session_id"] for item in items}
    own = {logs["older"].session_id, logs["newer"].session_id, moved.session_id, "damaged"}
    assert listed_ids == own
    assert logs["other"].session_id not in read  # told apart by its header alone
    assert set(read) == own | {logs["child"].session_id}  # the child counts in its parent's cost
    older = next(i for i in items if i["session_id"] == logs["older"].session_id)
    assert older["cost_total"] == pytest.approx(4.5)


def test_finding_a_notebooks_latest_session_reads_no_other_notebooks_log_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repository = SessionRepository(tmp_path / "sessions")
    logs = make_sessions(repository)
    read = logs_read_whole(monkeypatch)

    latest = repository.latest_for_notebook(OTHER)

    assert latest == logs["other"].session_id
    assert read == [logs["other"].session_id]
    assert repository.latest_for_notebook(OTHER) == latest and len(read) == 1  # cached


def test_a_linked_session_folder_is_listed_broken_and_never_read_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = SessionRepository(tmp_path / "elsewhere").create(notebook_path=NOTEBOOK)
    root = tmp_path / "sessions"
    root.mkdir()
    (root / "linked").symlink_to(elsewhere.directory, target_is_directory=True)
    files_read: list[str] = []
    real_read_bytes = sessions_module.read_bytes

    def watched(path: Any, max_bytes: int) -> bytes:
        files_read.append(str(path))
        return real_read_bytes(path, max_bytes)

    monkeypatch.setattr(sessions_module, "read_bytes", watched)
    catalog = SessionCatalog(root)

    assert catalog.listing(NOTEBOOK) == []
    (everything,) = catalog.listing()

    assert everything["status"] == "broken" and files_read == []


def test_no_hostile_session_file_stops_the_list_and_each_is_listed_broken_or_read(
    tmp_path: Path,
) -> None:
    root = tmp_path / "sessions"
    good_session(root)
    for case, make in HOSTILE.items():
        make_at(root / f"log-{case}", SESSION_FILE, make)
    for case, make in BYTE_CASES.items():  # a hostile line after a valid header
        line = root / f"line-{case}" / "line"
        make_at(line.parent, "line", make)
        raw = valid_log(f"line-{case}", NOTEBOOK) + line.read_bytes() + b"\n"
        (line.parent / SESSION_FILE).write_bytes(raw)
    wrong = dict(wrong_field_logs())  # every field of every entry, of every other JSON type
    for session_id, raw in wrong.items():
        (root / session_id).mkdir()
        (root / session_id / SESSION_FILE).write_bytes(raw)
    calls = [{"input_tokens": v, "output_tokens": 1} for v in (10**400, 2**63, -5, 1.5e300)]
    (root / "usage").mkdir()
    records = [json.loads(r) for r in valid_log("usage", NOTEBOOK).splitlines()[:2]]
    for n, usage in enumerate(calls):  # numbers no model reports: too large, negative, floats
        call = {"id": f"u{n}", "parent_id": records[-1]["id"], "type": "assistant_message"}
        records.append({**call, "turn": 1, "text": "", "usage": usage, **SONNET})
    (root / "usage" / SESSION_FILE).write_text("\n".join(json.dumps(r) for r in records) + "\n")

    items = SessionCatalog(root).listing()

    json.dumps(items, allow_nan=False)  # what the route answers is JSON
    by_id = {item["session_id"]: item for item in items}
    assert len(by_id) == 1 + len(HOSTILE) + len(BYTE_CASES) + len(wrong) + 1
    assert by_id["good"]["status"] == "inactive" and by_id["good"]["title"] == "price in € please"
    for case in HOSTILE:
        assert by_id[f"log-{case}"]["status"] == "broken", case
        assert SESSION_FILE in by_id[f"log-{case}"]["reason"], case
    assert by_id["usage"]["cost"] is None and by_id["usage"]["status"] == "inactive"
