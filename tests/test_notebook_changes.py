"""The notebook changing under the agent: reloads from disk, moves, renames, deletes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_ydoc import YNotebook
from pycrdt import Provider
from pycrdt.websocket.websocket import HttpxWebsocket

from prime_agent_lab.jupyter.live_notebook import LiveNotebook

from .conftest import next_event, read_saved_notebook, run_turn, use_script, wait_for
from .test_server_e2e import live_agent_cells, wait_for_first_cell_output

COLLABORATION_EVENTS = "https://schema.jupyter.org/jupyter_collaboration/session/v1"


@pytest.fixture
def rtc_document_save_delay() -> float:
    return 0.2


@pytest.fixture
def jp_server_config(jp_server_config: dict[str, Any]) -> dict[str, Any]:
    config = dict(jp_server_config)
    config["YDocExtension"] = {**config.get("YDocExtension", {}), "file_poll_interval": 0.2}
    return config


def user_cells(count: int) -> list[Any]:
    return [nbformat.v4.new_code_cell(f"x_{i} = {i}", id=f"user-{i}") for i in range(count)]


def wait_for_go_file(go: Path, label: str) -> str:
    """Agent code that prints until the test creates `go`, so it writes during every reload."""
    return (
        "import os, time\n"
        f"print('{label} started', flush=True)\n"
        "n = 0\n"
        f"while not os.path.exists({str(go)!r}):\n"
        "    n += 1\n"
        "    print('.', end='', flush=True)\n"
        "    time.sleep(0.01)\n"
        f"print('\\n{label} done')\n"
    )


class OverwriteCounter:
    """Counts the collaboration room's "overwrite" events (a reload from disk)."""

    def __init__(self, serverapp: Any, path: str | None = None) -> None:
        self.count = 0
        self._path = path
        serverapp.event_logger.add_listener(schema_id=COLLABORATION_EVENTS, listener=self._seen)

    async def _seen(self, logger: Any, schema_id: str, data: dict[str, Any]) -> None:
        if data.get("action") == "overwrite" and self._path in (None, data.get("path")):
            self.count += 1


# No saves while the turn runs: a save racing a rewrite can swallow jupyter-collaboration's reload
# (the save task is cancelled by the next change after it took note of the new file), and this
# test needs every rewrite to be reloaded.
@pytest.mark.parametrize("rtc_document_save_delay", [60.0])
async def test_a_notebook_rewritten_on_disk_during_a_turn_keeps_every_agent_cell(
    host: Any, jp_serverapp: Any, make_notebook: Any, agent_script: Any, jp_root_dir: Path
) -> None:
    go = jp_root_dir / "go"
    script = agent_script(
        [
            {"code": "print('first cell')"},
            {"code": wait_for_go_file(go, "second")},
            {"text": "done"},
        ]
    )
    use_script(host, script)
    cells = user_cells(2000)
    path = make_notebook("big.ipynb", cells)
    agent = await host.attach(path)
    overwrites = OverwriteCounter(jp_serverapp)
    queue = agent.events.subscribe()
    await host.send(agent.session_id, "go")
    await next_event(queue, "cell_finished")
    await next_event(queue, "cell_started")
    for rewrite in range(4):
        # Another editor writes its own version of the notebook over the file.
        edited = [*cells[:-1], nbformat.v4.new_code_cell(f"edit {rewrite}")]
        nbformat.write(nbformat.v4.new_notebook(cells=edited), jp_root_dir / path)
        await wait_for(lambda n=rewrite: overwrites.count > n, timeout=30)
    go.write_text("")
    ended = await next_event(queue, "turn_ended", timeout=60)

    assert ended["stop_reason"] == "end_turn", agent.session.path()
    agent_cells = await live_agent_cells(jp_serverapp, path)
    first_lines = [c["source"].splitlines()[0] for c in agent_cells]
    assert first_lines == ["print('first cell')", "import os, time"]
    assert agent_cells[0]["outputs"][0]["text"] == "first cell\n"
    second_output = "".join(o.get("text", "") for o in agent_cells[1]["outputs"])
    assert second_output.startswith("second started\n") and "second done" in second_output
    assert all(isinstance(c["execution_count"], int) for c in agent_cells)
    notices = [e for e in agent.session.path() if e["type"] == "notice"]
    assert notices and {n["kind"] for n in notices} == {"cell_restored"}


def move_cell(notebook: YNotebook, cell_id: str, to: int) -> None:
    """What JupyterLab does on Ctrl+Shift+Up: delete the cell, insert a copy, one transaction."""
    with notebook.ydoc.transaction(origin="jupyterlab-tab"):
        index = next(i for i, c in enumerate(notebook.ycells) if c.get("id") == cell_id)
        copy = notebook.create_ycell(notebook.ycells[index].to_py())
        del notebook.ycells[index]
        notebook.ycells.insert(to, copy)


def delete_cell(notebook: YNotebook, cell_id: str) -> None:
    with notebook.ydoc.transaction(origin="jupyterlab-tab"):
        index = next(i for i, c in enumerate(notebook.ycells) if c.get("id") == cell_id)
        del notebook.ycells[index]


def cell_text(cell: dict[str, Any]) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []))


async def test_moving_the_running_agent_cell_keeps_its_output_and_count_in_the_moved_cell(
    host: Any,
    jp_serverapp: Any,
    make_notebook: Any,
    agent_script: Any,
    jp_root_dir: Path,
    rtc_connect_doc_client: Any,
) -> None:
    go = jp_root_dir / "go"
    use_script(host, agent_script([{"code": wait_for_go_file(go, "moved")}, {"text": "done"}]))
    path = make_notebook("move.ipynb", user_cells(3))
    agent = await host.attach(path)
    queue = agent.events.subscribe()
    await host.send(agent.session_id, "go")
    cell_id = (await next_event(queue, "cell_started"))["cell_id"]
    await wait_for_first_cell_output(jp_serverapp, path, "moved started")
    server_doc = await agent.notebook.document()
    websocket, room = await rtc_connect_doc_client("json", "notebook", path)
    tab = YNotebook()
    async with websocket as ws, Provider(tab.ydoc, HttpxWebsocket(ws, room)):
        await wait_for(lambda: any(c.get("id") == cell_id for c in tab.ycells))
        move_cell(tab, cell_id, to=0)
        await wait_for(lambda: server_doc.ycells[0].get("id") == cell_id)
        go.write_text("")
        await next_event(queue, "turn_ended")
        await wait_for(lambda: "moved done" in cell_text(tab.ycells[0].to_py()))

    cells = (await server_doc.aget())["cells"]
    agent_cells = [c for c in cells if "prime_agent" in c["metadata"]]
    assert [c["id"] for c in agent_cells] == [cell_id] and cells[0]["id"] == cell_id
    assert cell_text(agent_cells[0]).startswith("moved started\n")
    assert "moved done" in cell_text(agent_cells[0])
    assert isinstance(agent_cells[0]["execution_count"], int)

    def saved_finished() -> bool:
        nb = read_saved_notebook(jp_root_dir / path)
        return (
            nb is not None
            and nb.cells[0].get("id") == cell_id
            and isinstance(nb.cells[0].get("execution_count"), int)
            and "moved done" in cell_text(nb.cells[0])
        )

    await wait_for(saved_finished, timeout=20)


async def test_an_agent_cell_the_user_deletes_stays_deleted(
    host: Any,
    jp_serverapp: Any,
    make_notebook: Any,
    agent_script: Any,
    jp_root_dir: Path,
    rtc_connect_doc_client: Any,
) -> None:
    go = jp_root_dir / "go"
    use_script(host, agent_script([{"code": wait_for_go_file(go, "doomed")}, {"text": "done"}]))
    path = make_notebook("delete-cell.ipynb", user_cells(2))
    agent = await host.attach(path)
    queue = agent.events.subscribe()
    await host.send(agent.session_id, "go")
    cell_id = (await next_event(queue, "cell_started"))["cell_id"]
    await wait_for_first_cell_output(jp_serverapp, path, "doomed started")
    server_doc = await agent.notebook.document()
    websocket, room = await rtc_connect_doc_client("json", "notebook", path)
    tab = YNotebook()
    async with websocket as ws, Provider(tab.ydoc, HttpxWebsocket(ws, room)):
        await wait_for(lambda: any(c.get("id") == cell_id for c in tab.ycells))
        delete_cell(tab, cell_id)
        await wait_for(lambda: all(c.get("id") != cell_id for c in server_doc.ycells))
        go.write_text("")
        ended = await next_event(queue, "turn_ended")

    assert ended["stop_reason"] == "end_turn"
    assert all(c.get("id") != cell_id for c in server_doc.ycells)
    result = next(e for e in agent.session.path() if e["type"] == "tool_result")
    assert "doomed done" in result["observation"]
    assert not [e for e in agent.session.path() if e["type"] == "notice"]


async def test_a_renamed_notebook_is_followed_by_the_next_turn(
    jp_fetch: Any, host: Any, jp_serverapp: Any, make_notebook: Any, agent_script: Any
) -> None:
    script = agent_script(
        [{"code": "print('one')"}, {"text": "first"}, {"code": "print('two')"}, {"text": "second"}]
    )
    use_script(host, script)
    path = make_notebook("before.ipynb")
    agent = await host.attach(path)
    assert (await run_turn(host, agent.session_id, "one"))["stop_reason"] == "end_turn"

    await jp_fetch(
        "api", "contents", path, method="PATCH", body=json.dumps({"path": "after.ipynb"})
    )
    ended = await run_turn(host, agent.session_id, "two")

    assert ended["stop_reason"] == "end_turn", agent.session.path()[-3:]
    assert agent.notebook.path == "after.ipynb"
    cells = await live_agent_cells(jp_serverapp, "after.ipynb")
    assert [cell_text(c) for c in cells] == ["one\n", "two\n"]
    moved = [e for e in agent.session.path() if e["type"] == "notebook_moved"]
    assert [(m["old_path"], m["path"]) for m in moved] == [(path, "after.ipynb")]
    assert agent.session.header["notebook_path"] == path  # the header is never rewritten
    listing = json.loads((await jp_fetch("prime-agent", "api", "sessions")).body)["sessions"]
    assert [s["notebook_path"] for s in listing if s["session_id"] == agent.session_id] == [
        "after.ipynb"
    ]
    # Attaching the new path finds the same session.
    assert (await host.attach("after.ipynb")) is agent


async def test_a_deleted_notebook_ends_the_next_turn_with_a_clear_error(
    jp_fetch: Any, host: Any, make_notebook: Any, agent_script: Any
) -> None:
    script = agent_script(
        [{"code": "print('one')"}, {"text": "first"}, {"code": "print('two')"}, {"text": "second"}]
    )
    use_script(host, script)
    path = make_notebook("doomed.ipynb")
    agent = await host.attach(path)
    assert (await run_turn(host, agent.session_id, "one"))["stop_reason"] == "end_turn"
    queue = agent.events.subscribe()

    await jp_fetch("api", "contents", path, method="DELETE")
    ended = await run_turn(host, agent.session_id, "two")

    assert ended["stop_reason"] == "error"
    error = await next_event(queue, "error")
    assert error["kind"] == "notebook"
    assert f"the notebook {path} was deleted" in error["message"]
    reloaded = host.repository.load(agent.session_id)
    kinds = [e["type"] for e in reloaded.path()]
    assert kinds.count("tool_result") == 1 and kinds[-2:] == ["error", "turn_end"]


@pytest.mark.parametrize("rtc_document_save_delay", [0.5])
async def test_one_file_reached_through_a_symlink_keeps_the_agent_cells_of_both_rooms(
    host: Any, jp_serverapp: Any, make_notebook: Any, agent_script: Any, jp_root_dir: Path
) -> None:
    go = jp_root_dir / "go"
    use_script(host, agent_script([{"code": wait_for_go_file(go, "linked")}, {"text": "done"}]))
    real = make_notebook("real.ipynb", user_cells(50))
    (jp_root_dir / "link.ipynb").symlink_to(jp_root_dir / real)
    agent = await host.attach(real)
    overwrites = OverwriteCounter(jp_serverapp, path=real)
    queue = agent.events.subscribe()
    await host.send(agent.session_id, "go")
    await next_event(queue, "cell_started")
    await wait_for_first_cell_output(jp_serverapp, real, "linked started")
    # The user has the same file open under its other name and adds a cell there.
    ext = jp_serverapp.web_app.settings["jupyter_server_ydoc"]
    other = await ext.get_document(
        path="link.ipynb", content_type="notebook", file_format="json", copy=False, create=True
    )
    with other.ydoc.transaction(origin="jupyterlab-tab"):
        other.ycells.append(other.create_ycell({"cell_type": "code", "source": "user_edit = 1"}))
    agent_doc = await agent.notebook.document()
    # The agent's room reloads the file the other room saved: the user's cell arrives there.
    await wait_for(
        lambda: (
            overwrites.count > 0
            and any(str(c["source"]) == "user_edit = 1" for c in agent_doc.ycells)
        ),
        timeout=30,
    )
    go.write_text("")
    ended = await next_event(queue, "turn_ended")

    assert ended["stop_reason"] == "end_turn", agent.session.path()
    assert any(str(c["source"]) == "user_edit = 1" for c in agent_doc.ycells)
    cells = await live_agent_cells(jp_serverapp, real)
    assert len(cells) == 1
    assert cell_text(cells[0]).startswith("linked started\n")
    assert "linked done" in cell_text(cells[0])
    assert isinstance(cells[0]["execution_count"], int)


class _DocumentOnly:
    """The collaboration extension as LiveNotebook uses it, serving one document, no room."""

    def __init__(self, doc: YNotebook) -> None:
        self.doc = doc

    async def get_document(
        self, path: str, content_type: str, file_format: str, copy: bool, create: bool
    ) -> YNotebook:
        return self.doc


async def test_cells_a_reload_took_away_come_back_in_turn_order_whichever_is_written_first() -> (
    None
):
    doc = YNotebook()
    doc.set({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    notebook = LiveNotebook(_DocumentOnly(doc), "order.ipynb", 10_000)
    meta = {"prime_agent": {"session_id": "s", "turn": 1, "role": "agent"}}
    first = await notebook.append_code_cell("print('first')", meta)
    second = await notebook.append_code_cell("print('second')", meta)
    with doc.ydoc.transaction():  # a reload from a file without the agent's cells
        del doc.ycells[:]
        doc.ycells.append(doc.create_ycell({"cell_type": "code", "source": "user", "id": "u1"}))
    second.restore_after_reload()  # the running cell gets there first
    first.restore_after_reload()
    await second.settled()
    await first.settled()
    assert [c.get("id") for c in doc.ycells] == ["u1", first.cell_id, second.cell_id]
