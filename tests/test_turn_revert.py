"""Review and revert a turn on the real server (docs/pairing.md, section 5): the cells a turn wrote
(`GET .../turns/<turn>`), and "revert turn" (`POST .../turns/<turn>/revert`), which removes them
from the notebook and brings the kernel back to the snapshot taken before the turn where one may
be used, telling the model; a real kernel, a real live notebook, a scripted model."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

from prime_agent_lab.core.agent import Agent
from prime_agent_lab.core.kernel_gc import evaluate
from prime_agent_lab.core.snapshots import (
    MANIFEST,
    PREVIOUS_MANIFEST,
    read_manifest,
    state_directory,
)
from prime_agent_lab.core.transcript import chat_transcript
from prime_agent_lab.core.trust import sha256
from prime_agent_lab.core.turn_review import NO_SNAPSHOT_KEPT, UNTRUSTED_SNAPSHOT

from .conftest import next_event, run_turn, use_script, wait_for
from .kernel_clients import wait_for_file
from .test_permission_modes import asking_session, decide
from .test_rest_edges import message_of, post
from .test_server_e2e import read_saved_notebook, run_user_cell
from .test_snapshots import quick_snapshots

SLOW_TO_SAVE = """
import time as _time

class Slow:
    def __reduce__(self):
        _time.sleep(1.0)  # a namespace that takes a while to snapshot
        return (int, ())

slow = Slow()
"""
SET_X = [{"code": "x = 1"}, {"text": "x is set"}]
CHANGE_X = [{"code": "x = 2\ny = 3"}, {"code": "print(x + y)"}, {"text": "changed"}]


async def review(jp_fetch: Any, session_id: str, turn: int) -> Any:
    route = ("prime-agent", "api", "sessions", session_id, "turns", str(turn))
    return await jp_fetch(*route, raise_error=False)


async def revert(jp_fetch: Any, session_id: str, turn: int, body: Any = None) -> Any:
    route = ("sessions", session_id, "turns", str(turn), "revert")
    return await post(jp_fetch, *route, body={} if body is None else body)


async def kernel_value(agent: Agent, expression: str) -> Any:
    return await evaluate(agent.kernel, f"repr({expression})", 30)


async def settled(host: Any, agent: Agent) -> None:
    """Until the snapshot after the last turn is written."""
    await wait_for(lambda: not host.runtime.snapshots.pending_save(agent.session_id))


async def two_turns(
    host: Any,
    make_notebook: Any,
    agent_script: Any,
    name: str,
    more: list[Any] = (),  # type: ignore[assignment]
) -> Agent:
    """Turn 1 sets `x = 1`; turn 2 sets `x = 2` and creates `y` (two cells)."""
    use_script(host, agent_script([*SET_X, *CHANGE_X, *more]))
    quick_snapshots(host)
    agent: Agent = await host.attach(make_notebook(name))
    await run_turn(host, agent.session_id, "set x")
    await settled(host, agent)
    await run_turn(host, agent.session_id, "change x")
    await settled(host, agent)
    return agent


async def agent_cells(agent: Agent) -> list[str]:
    """The ids of the agent cells in the live notebook (a blank cell of the user's may follow)."""
    cells = await agent.notebook.cells()  # type: ignore[attr-defined]
    return [c["id"] for c in cells if "prime_agent" in c.get("metadata", {})]


async def test_reverting_a_turn_removes_its_cells_and_brings_the_kernel_back_to_before_it(
    host: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any, jp_root_dir: Path
) -> None:
    agent = await two_turns(
        host, make_notebook, agent_script, "revert.ipynb", more=[{"text": "noted"}]
    )
    sid = agent.session_id
    before = await review(jp_fetch, sid, 2)
    assert before.code == 200, before.body
    shown = json.loads(before.body)
    assert [c["first_line"] for c in shown["cells"]] == ["x = 2", "print(x + y)"]
    assert all(c["in_notebook"] and c["status"] == "ok" for c in shown["cells"])
    assert shown["kernel"]["restorable"] is True and shown["kernel"]["reason"] is None
    assert shown["reverted"] is False
    # measured: a manifest keeps IPython's next count, the count of the turn's first cell
    previous = json.loads(
        (state_directory(agent.session.directory) / PREVIOUS_MANIFEST).read_text()
    )
    assert previous["execution_count"] == shown["cells"][0]["execution_count"]
    assert shown["kernel"]["snapshot_time"] == previous["time"]

    events = agent.events.subscribe()
    answer = await revert(jp_fetch, sid, 2)

    assert answer.code == 200, answer.body
    reverted = json.loads(answer.body)
    turn_two = [c["cell_id"] for c in shown["cells"]]
    assert reverted["cells_removed"] == turn_two and reverted["whole_turn"] is True
    assert reverted["kernel"] == "restored" and reverted["removed"] == ["y"]
    assert "x" in reverted["restored"] and reverted["failed"] == [] and reverted["reason"] is None
    assert reverted["text"].startswith("The user reverted your turn 2: its 2 cells were removed")
    event = await next_event(events, "turn_reverted")
    assert {k: event[k] for k in reverted} == reverted
    assert await kernel_value(agent, "x") == "1"
    assert await kernel_value(agent, "'y' in globals()") == "False"
    live = await agent_cells(agent)
    assert not set(turn_two) & set(live) and len(live) == 1  # turn 1's cell stays

    def saved_without_them() -> bool:
        nb = read_saved_notebook(jp_root_dir / "revert.ipynb")
        return nb is not None and not set(turn_two) & {c.get("id") for c in nb.cells}

    await wait_for(saved_without_them, timeout=20)
    again = json.loads((await review(jp_fetch, sid, 2)).body)
    assert again["reverted"] is True and not any(c["in_notebook"] for c in again["cells"])
    twice = await revert(jp_fetch, sid, 2)
    assert twice.code == 409 and "reverted already" in message_of(twice)
    names = lambda: {e["name"] for e in (read_manifest(agent.session.directory) or {})["saved"]}  # noqa: E731
    await wait_for(lambda: names() == {"x"})  # the latest snapshot is the reverted kernel

    (line,) = [i for i in chat_transcript(agent.session) if i.get("kind") == "turn_reverted"]
    assert line == {"type": "notice", "turn": 2, "kind": "turn_reverted", "text": reverted["text"]}

    requests: list[Any] = []
    play = agent.provider.stream

    def recording(request: Any) -> Any:
        requests.append(request)
        return play(request)

    agent.provider.stream = recording  # type: ignore[method-assign]
    await run_turn(host, sid, "what now?")
    sent = json.dumps([m.__dict__ for m in requests[0].messages], default=str)
    assert "[notice] The user reverted your turn 2" in sent and "deleted: y" in sent


async def test_without_a_snapshot_from_before_the_turn_its_cells_go_and_the_kernel_stays(
    host: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any
) -> None:
    agent = await two_turns(host, make_notebook, agent_script, "nosnap.ipynb")
    directory = state_directory(agent.session.directory)
    (directory / PREVIOUS_MANIFEST).unlink()  # only the snapshot after the turn is kept

    shown = json.loads((await review(jp_fetch, agent.session_id, 2)).body)
    assert shown["kernel"] == {
        "restorable": False,
        "reason": NO_SNAPSHOT_KEPT,
        "snapshot_time": None,
    }
    answer = json.loads((await revert(jp_fetch, agent.session_id, 2)).body)

    assert answer["kernel"] == "not_restored" and answer["reason"] == NO_SNAPSHOT_KEPT
    assert len(answer["cells_removed"]) == 2 and answer["restored"] == answer["removed"] == []
    assert f"the kernel was not restored ({NO_SNAPSHOT_KEPT})" in answer["text"]
    assert await kernel_value(agent, "(x, y)") == "(2, 3)"
    assert len(await agent_cells(agent)) == 1


async def test_a_cell_the_user_ran_after_the_turn_keeps_the_kernel_as_it_is(
    host: Any, jp_serverapp: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any
) -> None:
    agent = await two_turns(host, make_notebook, agent_script, "usercell.ipynb")
    await run_user_cell(jp_serverapp, agent.kernel.kernel_id, "mine = x * 10")  # type: ignore[attr-defined]

    shown = json.loads((await review(jp_fetch, agent.session_id, 2)).body)
    why = "1 cell ran in the kernel after this turn; restoring it would undo that work"
    assert shown["kernel"]["restorable"] is False and shown["kernel"]["reason"] == why
    answer = json.loads((await revert(jp_fetch, agent.session_id, 2)).body)

    assert answer["kernel"] == "not_restored" and answer["reason"] == why
    assert await kernel_value(agent, "(x, y, mine)") == "(2, 3, 20)"
    assert "what those cells set is still in the kernel" in answer["text"]


async def test_an_unsigned_snapshot_from_before_the_turn_is_never_loaded(
    host: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any, tmp_path: Path
) -> None:
    agent = await two_turns(host, make_notebook, agent_script, "unsigned.ipynb")
    directory = state_directory(agent.session.directory)
    manifest = json.loads((directory / PREVIOUS_MANIFEST).read_text())
    marker = tmp_path / "loaded.txt"
    payload = pickle.dumps(Opens(str(marker)))
    entry = next(e for e in manifest["saved"] if e["name"] == "x")
    (directory / entry["file"]).write_bytes(payload)
    entry.update(bytes=len(payload), sha256=sha256(payload))  # the files match; no signature
    del manifest["signature"]
    (directory / PREVIOUS_MANIFEST).write_text(json.dumps(manifest))

    answer = json.loads((await revert(jp_fetch, agent.session_id, 2)).body)

    assert answer["kernel"] == "not_restored" and answer["reason"] == UNTRUSTED_SNAPSHOT
    assert not marker.exists()
    assert await kernel_value(agent, "x") == "2"
    assert read_manifest(agent.session.directory) is not None
    assert (directory / MANIFEST).exists()


class Opens:
    """A pickle that writes a file when it is loaded."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> Any:
        return (open, (self.path, "w"))


async def test_removing_one_cell_leaves_the_kernel_and_tells_the_model(
    host: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any
) -> None:
    agent = await two_turns(host, make_notebook, agent_script, "onecell.ipynb")
    shown = json.loads((await review(jp_fetch, agent.session_id, 2)).body)
    first = shown["cells"][0]["cell_id"]

    body = {"cells_removed": [first], "restore_kernel": False}
    answer = json.loads((await revert(jp_fetch, agent.session_id, 2, body)).body)

    assert answer["whole_turn"] is False and answer["kernel"] == "untouched"
    assert answer["cells_removed"] == [first]
    assert answer["text"] == (
        "The user removed one cell of your turn 2 from the notebook (`x = 2`); what it set is "
        "still in the kernel."
    )
    assert await kernel_value(agent, "(x, y)") == "(2, 3)"
    (entry,) = [e for e in agent.session.entries if e["type"] == "turn_reverted"]
    assert entry["whole_turn"] is False and entry["turn"] == 2
    later = json.loads((await review(jp_fetch, agent.session_id, 2)).body)
    assert later["reverted"] is False  # the whole turn can still be reverted


async def test_bad_requests_say_why_and_change_nothing(
    host: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any
) -> None:
    use_script(host, agent_script(SET_X))
    agent: Agent = await host.attach(make_notebook("bad.ipynb"))
    await run_turn(host, agent.session_id, "set x")
    sid = agent.session_id

    forged = await revert(jp_fetch, sid, 1, {"cells_removed": ["not-a-cell"]})
    assert forged.code == 400 and "not a cell of turn 1: 'not-a-cell'" in message_of(forged)
    for body in (
        {"cells_removed": "abc"},
        {"restore_kernel": "no"},
        {"cells": []},
        [1],
        {"cells_removed": [], "restore_kernel": False},
    ):
        refused = await revert(jp_fetch, sid, 1, body)
        assert refused.code == 400, (body, refused.body)
    assert (await review(jp_fetch, sid, 9)).code == 404
    assert (await revert(jp_fetch, sid, 9)).code == 404
    assert (await review(jp_fetch, "no-such-session", 1)).code == 404
    assert not any(e["type"] == "turn_reverted" for e in agent.session.entries)
    assert len(await agent_cells(agent)) == 1


async def test_a_revert_while_the_agent_runs_is_refused_with_409(
    host: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any, tmp_path: Path
) -> None:
    flag = tmp_path / "go"
    use_script(host, agent_script([*SET_X, {"code": wait_for_file(flag)}, {"text": "done"}]))
    agent: Agent = await host.attach(make_notebook("running.ipynb"))
    await run_turn(host, agent.session_id, "set x")
    events = agent.events.subscribe()
    await host.send(agent.session_id, "wait")
    await next_event(events, "cell_started")

    refused = await revert(jp_fetch, agent.session_id, 1)

    assert refused.code == 409 and "stop it first" in message_of(refused)
    shown = json.loads((await review(jp_fetch, agent.session_id, 2)).body)
    assert shown["cells"][0]["status"] == "running"
    assert "running a turn" in shown["kernel"]["reason"]
    flag.write_text("")
    await next_event(events, "turn_ended", timeout=60)


async def test_an_edited_cell_in_ask_mode_lists_both_cells_of_the_turn(
    host: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any
) -> None:
    agent, events, waiting = await asking_session(
        host, jp_fetch, make_notebook, agent_script, "askrevert.ipynb"
    )
    await decide(jp_fetch, agent, waiting["tool_call_id"], "approve", code="print(6 * 9)")
    await next_event(events, "turn_ended", timeout=60)

    shown = json.loads((await review(jp_fetch, agent.session_id, 1)).body)

    cells = [(c["first_line"], c["status"], c["in_notebook"]) for c in shown["cells"]]
    assert cells == [("print(6 * 7)", "skipped", True), ("print(6 * 9)", "ok", True)]
    assert shown["cells"][0]["cell_id"] == waiting["cell_id"]
    answer = json.loads((await revert(jp_fetch, agent.session_id, 1)).body)
    assert len(answer["cells_removed"]) == 2
    assert await agent_cells(agent) == []


async def test_a_variable_the_user_set_before_the_turn_comes_back(
    host: Any, jp_serverapp: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any
) -> None:
    """The user's own cell sets `x = 1` and the turn that follows overwrites it: the snapshot
    taken as that turn starts (it overlaps the model's answer, so it is written after the
    turn's first cell was logged as started) is the one the revert restores."""
    use_script(host, agent_script(CHANGE_X))
    quick_snapshots(host)
    agent: Agent = await host.attach(make_notebook("user-x.ipynb"))
    kernel_id = agent.kernel.kernel_id  # type: ignore[attr-defined]
    await run_user_cell(jp_serverapp, kernel_id, f"x = 1\n{SLOW_TO_SAVE}")
    await run_turn(host, agent.session_id, "change x")
    await settled(host, agent)

    answer = json.loads((await revert(jp_fetch, agent.session_id, 1)).body)

    assert answer["kernel"] == "restored", answer
    assert "x" in answer["restored"] and answer["removed"] == ["y"]
    assert await kernel_value(agent, "(x, 'y' in globals())") == "(1, False)"


async def test_a_cell_still_running_in_the_kernel_keeps_the_kernel_as_it_is(
    host: Any, jp_serverapp: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any,
    tmp_path: Path,
) -> None:  # fmt: skip
    """A restore would wait behind the user's running cell and then undo what it set: the
    kernel part is refused, with the reason, and the cells still go."""
    agent = await two_turns(host, make_notebook, agent_script, "busy.ipynb")
    flag = tmp_path / "done"
    km = jp_serverapp.kernel_manager.get_kernel(agent.kernel.kernel_id)  # type: ignore[attr-defined]
    client = km.client_factory(parent=km)
    client.load_connection_info(km.get_connection_info())
    client.start_channels()
    try:
        await client.wait_for_ready(timeout=30)
        msg_id = client.execute(f"{wait_for_file(flag)}\nx = 'the user'")
        answer = json.loads((await revert(jp_fetch, agent.session_id, 2)).body)
        flag.write_text("")
        while True:
            reply = await client.get_shell_msg(timeout=30)
            if reply["parent_header"].get("msg_id") == msg_id:
                break
    finally:
        client.stop_channels()

    assert answer["kernel"] == "not_restored" and "the kernel is busy" in answer["reason"]
    assert len(answer["cells_removed"]) == 2
    assert await kernel_value(agent, "(x, y)") == "('the user', 3)"


async def edit_source(agent: Agent, cell_id: str, more: str) -> None:
    """The user types into a cell of the live notebook."""
    doc = await agent.notebook.document()  # type: ignore[attr-defined]
    cell = next(c for c in doc.ycells if c.get("id") == cell_id)
    with doc.ydoc.transaction():
        source = cell["source"]
        source.insert(len(source), more)


async def live_sources(agent: Agent) -> dict[str, str]:
    cells = await agent.notebook.cells()  # type: ignore[attr-defined]
    return {c["id"]: c["source"] for c in cells}


async def test_a_cell_the_user_changed_is_kept_by_the_servers_revert_and_named_to_the_model(
    host: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any
) -> None:
    agent = await two_turns(host, make_notebook, agent_script, "changed.ipynb")
    shown = json.loads((await review(jp_fetch, agent.session_id, 2)).body)
    first, second = (c["cell_id"] for c in shown["cells"])
    assert shown["cells"][0]["code"] == "x = 2\ny = 3"  # the logged code the panel compares
    await edit_source(agent, first, "\nmine = 'typed by the user'")

    answer = json.loads((await revert(jp_fetch, agent.session_id, 2)).body)

    assert answer["cells_removed"] == [second]
    assert answer["cells_kept"] == [
        {"cell_id": first, "first_line": "x = 2", "reason": "changed by you"}
    ]
    assert (await live_sources(agent))[first] == "x = 2\ny = 3\nmine = 'typed by the user'"
    assert second not in await live_sources(agent)
    assert answer["text"].startswith("The user reverted your turn 2: 1 cell of it was removed")
    assert answer["text"].endswith("Kept in the notebook: `x = 2` (the user changed it).")
    (entry,) = [e for e in agent.session.entries if e["type"] == "turn_reverted"]
    assert entry["cells_kept"] == answer["cells_kept"]


async def test_a_cell_the_log_names_that_is_not_this_agents_cell_of_the_turn_is_never_removed(
    host: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any
) -> None:
    """A session log edited so that turn 2 names the user's cell: neither a Remove that names
    it nor the server's own removal deletes it."""
    agent = await two_turns(host, make_notebook, agent_script, "forged.ipynb")
    doc = await agent.notebook.document()  # type: ignore[attr-defined]
    with doc.ydoc.transaction():
        doc.ycells.append(doc.create_ycell({"cell_type": "code", "source": "precious = 1"}))
    user_id = str(doc.ycells[len(doc.ycells) - 1].get("id"))
    agent.session.append(
        "tool_result", turn=2, tool_call_id="forged", cell_id=user_id, status="ok",
        execution_count=None,
    )  # fmt: skip

    named = await revert(
        jp_fetch, agent.session_id, 2, {"cells_removed": [user_id], "restore_kernel": False}
    )
    assert named.code == 200, named.body
    assert json.loads(named.body)["cells_removed"] == []
    whole = json.loads((await revert(jp_fetch, agent.session_id, 2)).body)

    assert (await live_sources(agent))[user_id] == "precious = 1"
    assert user_id not in whole["cells_removed"] and len(whole["cells_removed"]) == 2
    assert {"cell_id": user_id, "first_line": "", "reason": "not this agent's cell"} in whole[
        "cells_kept"
    ]


async def test_a_revert_counts_each_cell_once_and_removes_only_what_the_panel_chose(
    host: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any
) -> None:
    agent = await two_turns(host, make_notebook, agent_script, "dupes.ipynb")
    shown = json.loads((await review(jp_fetch, agent.session_id, 2)).body)
    first, second = (c["cell_id"] for c in shown["cells"])

    twice = {"cells_removed": [first, first], "restore_kernel": False}
    one = json.loads((await revert(jp_fetch, agent.session_id, 2, twice)).body)

    assert one["cells_removed"] == [first]
    assert one["text"].startswith("The user removed one cell of your turn 2")
    assert first not in await live_sources(agent)  # the server makes its notice true
    # The panel's choice holds for a whole turn: a cell it did not name stays (the user's edit
    # of it may not have reached the server's document yet), and the notice says so.
    empty = {"cells_removed": [], "restore_kernel": True}
    whole = json.loads((await revert(jp_fetch, agent.session_id, 2, empty)).body)
    assert whole["whole_turn"] is True and whole["cells_removed"] == []
    assert [k["cell_id"] for k in whole["cells_kept"]] == [second]
    assert whole["cells_kept"][0]["reason"] == "kept by you"
    assert "(the user kept it)" in whole["text"]
    assert second in await live_sources(agent)
