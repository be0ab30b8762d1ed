"""End to end through a real jupyter_server, live document and kernel, with the scripted demo."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import nbformat

from .conftest import next_event, read_saved_notebook, run_turn, use_script, wait_for


async def live_agent_cells(jp_serverapp: Any, path: str) -> list[dict[str, Any]]:
    ext = jp_serverapp.web_app.settings["jupyter_server_ydoc"]
    doc = await ext.get_document(path=path, content_type="notebook", file_format="json", copy=False)
    cells = doc.get()["cells"]
    return [c for c in cells if "prime_agent" in c.get("metadata", {})]


async def wait_for_first_cell_output(jp_serverapp: Any, path: str, text: str) -> None:
    """Until the first agent cell of the live notebook shows `text` (it is really running)."""

    async def shown() -> bool:
        cells = await live_agent_cells(jp_serverapp, path)
        return bool(cells) and text in "".join(o.get("text", "") for o in cells[0]["outputs"])

    await wait_for(shown, timeout=30)


async def run_user_cell(jp_serverapp: Any, kernel_id: str, code: str) -> str:
    """Run a cell the way a browser would: its own client with its own session id."""
    km = jp_serverapp.kernel_manager.get_kernel(kernel_id)
    client = km.client_factory(parent=km)
    client.load_connection_info(km.get_connection_info())
    client.start_channels()
    try:
        await client.wait_for_ready(timeout=30)
        chunks: list[str] = []

        def hook(msg: dict[str, Any]) -> None:
            if msg["header"]["msg_type"] == "stream":
                chunks.append(msg["content"]["text"])

        reply = await client.execute_interactive(code, output_hook=hook, timeout=30)
        assert reply["content"]["status"] == "ok", reply["content"]
        return "".join(chunks)
    finally:
        client.stop_channels()


async def test_demo_turn_writes_three_live_cells_the_user_can_build_on(
    host: Any, jp_serverapp: Any, make_notebook: Any, jp_root_dir: Path
) -> None:
    path = make_notebook("work/demo.ipynb")
    agent = await host.attach(path)

    ended = await run_turn(host, agent.session_id, "Find the incident in the server log.")

    assert ended["stop_reason"] == "end_turn", ended
    assert "FOUND: INC-4471" in ended["final_text"]
    cells = await live_agent_cells(jp_serverapp, path)
    assert len(cells) == 3
    counts = [c["execution_count"] for c in cells]
    assert all(isinstance(n, int) for n in counts) and counts == sorted(counts)
    for cell in cells:
        assert cell["outputs"], cell
        assert cell["metadata"]["prime_agent"] == {
            "session_id": agent.session_id,
            "turn": 1,
            "role": "agent",
        }
        assert cell["metadata"]["trusted"] is True
    assert "INC-4471" in "".join(o.get("text", "") for o in cells[2]["outputs"])

    # The user's own cell on the same kernel reads what the agent made.
    out = await run_user_cell(jp_serverapp, agent.kernel.kernel_id, "print(incident, len(hits))")
    assert out.strip() == "INC-4471 1"

    # The room saves the notebook; the file is a valid notebook with the agent's cells.
    notebook_file = jp_root_dir / path

    def saved() -> bool:
        nb = read_saved_notebook(notebook_file)
        return (
            nb is not None
            and sum("prime_agent" in c.metadata for c in nb.cells) == 3
            and all(c.get("execution_count") for c in nb.cells if "prime_agent" in c.metadata)
        )

    await wait_for(saved, timeout=20)
    nbformat.validate(nbformat.read(notebook_file, as_version=4))


async def test_session_log_records_the_turn_and_survives_reload(
    host: Any, make_notebook: Any, jp_root_dir: Path
) -> None:
    path = make_notebook()
    agent = await host.attach(path)
    await run_turn(host, agent.session_id, "go")

    log_file = jp_root_dir / ".prime-agent" / "sessions" / agent.session_id / "session.jsonl"
    records = [json.loads(line) for line in log_file.read_text().splitlines()]
    assert records[0]["type"] == "session" and records[0]["notebook_path"] == path
    types = [r["type"] for r in records[1:]]
    assert types.count("tool_result") == 3
    assert types[0] == "user_message" and types[-1] == "turn_end"
    results = [r for r in records if r["type"] == "tool_result"]
    assert all(r["cell_id"] for r in results)
    assistant = [r for r in records if r["type"] == "assistant_message"]
    assert all("usage" in r for r in assistant)
    for record in records[1:]:
        assert record["parent_id"] is None or record["parent_id"] in {r.get("id") for r in records}


async def test_rest_api_attach_send_and_list(jp_fetch: Any, host: Any, make_notebook: Any) -> None:
    path = make_notebook("rest.ipynb")
    response = await jp_fetch(
        "prime-agent", "api", "sessions", method="POST", body=json.dumps({"notebook_path": path})
    )
    info = json.loads(response.body)
    assert info["notebook_path"] == path and info["status"] == "idle"
    session_id = info["session_id"]

    response = await jp_fetch(
        "prime-agent",
        "api",
        "sessions",
        session_id,
        "messages",
        method="POST",
        body=json.dumps({"text": "go"}),
    )
    assert response.code == 202 and json.loads(response.body)["turn"] == 1
    await wait_for(lambda: not host.agent(session_id).running, timeout=60)

    detail = json.loads((await jp_fetch("prime-agent", "api", "sessions", session_id)).body)
    kinds = [item["type"] for item in detail["transcript"]]
    assert kinds.count("cell") == 3 and kinds[0] == "user" and kinds[-1] == "assistant"
    cells = [item for item in detail["transcript"] if item["type"] == "cell"]
    assert cells[0]["code"].startswith("import random")
    assert cells[2]["preview"].startswith("FOUND: INC-4471")

    listing = json.loads((await jp_fetch("prime-agent", "api", "sessions")).body)
    assert session_id in [s["session_id"] for s in listing["sessions"]]


async def test_events_websocket_streams_a_turn_and_replays_after_reconnect(
    jp_fetch: Any, jp_ws_fetch: Any, host: Any, make_notebook: Any
) -> None:
    agent = await host.attach(make_notebook("ws.ipynb"))
    ws = await jp_ws_fetch("prime-agent", "api", "sessions", agent.session_id, "events")
    await jp_fetch(
        "prime-agent",
        "api",
        "sessions",
        agent.session_id,
        "messages",
        method="POST",
        body=json.dumps({"text": "go"}),
    )
    seen: list[dict[str, Any]] = []
    async with asyncio.timeout(60):
        while not seen or seen[-1]["type"] != "turn_ended":
            seen.append(json.loads(await ws.read_message()))
    ws.close()
    kinds = [e["type"] for e in seen]
    assert kinds[:2] == ["status", "turn_started"]
    assert kinds.count("cell_started") == kinds.count("cell_finished") == 3
    assert "text_delta" in kinds and "assistant_message" in kinds
    assert [e["seq"] for e in seen] == sorted(e["seq"] for e in seen)

    # A panel that reconnects with the last seq it saw gets only what it missed.
    middle = seen[len(seen) // 2]["seq"]
    ws = await jp_ws_fetch(
        "prime-agent", "api", "sessions", agent.session_id, "events", params={"since": str(middle)}
    )
    first = json.loads(await ws.read_message())
    ws.close()
    assert first["seq"] == middle + 1


async def test_stop_interrupts_a_long_agent_cell_and_keeps_the_kernel(
    jp_fetch: Any, host: Any, make_notebook: Any, agent_script: Any
) -> None:
    script = agent_script(
        [
            {"code": "state = 'kept'\nimport time\nprint('sleeping', flush=True)\ntime.sleep(60)"},
            {"text": "never reached"},
        ]
    )
    use_script(host, script)
    path = make_notebook("stop.ipynb")
    agent = await host.attach(path)
    queue = agent.events.subscribe()
    await host.send(agent.session_id, "sleep")
    await next_event(queue, "cell_started")
    await wait_for_first_cell_output(host.serverapp, path, "sleeping")

    response = await jp_fetch(
        "prime-agent", "api", "sessions", agent.session_id, "stop", method="POST", body="{}"
    )

    assert json.loads(response.body) == {"stopped": True}
    end = agent.session.path()[-1]
    assert end["type"] == "turn_end" and end["stop_reason"] == "stopped"
    result = next(e for e in agent.session.path() if e["type"] == "tool_result")
    assert result["status"] == "interrupted"
    out = await run_user_cell(host.serverapp, agent.kernel.kernel_id, "print(state)")
    assert out.strip() == "kept"


async def test_user_cells_run_meanwhile_are_neither_lost_nor_mixed_in(
    host: Any, jp_serverapp: Any, make_notebook: Any, agent_script: Any
) -> None:
    script = agent_script(
        [{"code": "import time\ntime.sleep(1.0)\nprint('agent output')"}, {"text": "done"}]
    )
    use_script(host, script)
    agent = await host.attach(make_notebook("mixed.ipynb"))
    queue = agent.events.subscribe()
    await host.send(agent.session_id, "work")
    await next_event(queue, "cell_started")

    user_out = await run_user_cell(jp_serverapp, agent.kernel.kernel_id, "print('user output')")
    await next_event(queue, "turn_ended")

    assert user_out.strip() == "user output"
    result = next(e for e in agent.session.path() if e["type"] == "tool_result")
    assert result["observation"] == "[stdout]\nagent output"


async def test_rooms_the_agent_opens_keep_their_store_out_of_the_working_directory(
    host: Any, jp_serverapp: Any, make_notebook: Any, jp_root_dir: Path
) -> None:
    path = make_notebook("store.ipynb")
    agent = await host.attach(path)
    doc = await agent.notebook.document()  # no tab has it open: the agent creates the room
    ext = jp_serverapp.web_app.settings["jupyter_server_ydoc"]
    rooms = [
        r for r in ext.ywebsocket_server.rooms.values() if getattr(r, "_document", None) is doc
    ]
    assert rooms, "the agent's document lives in a collaboration room"
    assert Path(rooms[0].ystore.db_path) == jp_root_dir / ".rtc_test.db"


async def test_a_cell_whose_room_was_dropped_mid_run_still_reaches_the_notebook(
    host: Any, jp_serverapp: Any, make_notebook: Any, agent_script: Any, jp_root_dir: Path
) -> None:
    code = "import time\nprint('before', flush=True)\ntime.sleep(1.5)\nprint('after')"
    use_script(host, agent_script([{"code": code}, {"text": "done"}]))
    path = make_notebook("dropped.ipynb")
    agent = await host.attach(path)
    queue = agent.events.subscribe()
    await host.send(agent.session_id, "go")
    await next_event(queue, "cell_started")
    await wait_for_first_cell_output(jp_serverapp, path, "before")
    # Every tab closed long enough ago: jupyter-collaboration drops the room.
    ext = jp_serverapp.web_app.settings["jupyter_server_ydoc"]
    doc = await agent.notebook.document()
    room = next(r for r in ext.ywebsocket_server.rooms.values() if r._document is doc)
    await ext.ywebsocket_server.delete_room(room=room)
    await next_event(queue, "turn_ended")

    cells = await live_agent_cells(jp_serverapp, path)
    assert len(cells) == 1
    assert "".join(o["text"] for o in cells[0]["outputs"]) == "before\nafter\n"
    assert cells[0]["execution_count"] == 1

    def saved() -> bool:
        nb = read_saved_notebook(jp_root_dir / path)
        return nb is not None and any("after" in str(c.get("outputs")) for c in nb.cells)

    await wait_for(saved, timeout=20)


async def test_a_turn_fetches_the_live_document_once_per_cell(
    host: Any, jp_serverapp: Any, make_notebook: Any, agent_script: Any, monkeypatch: Any
) -> None:
    """Settling a cell whose room is still open needs no second fetch (and no file checks)."""
    use_script(host, agent_script([{"code": "x = 1"}, {"code": "y = 2"}, {"code": "z = 3"}]))
    path = make_notebook("fetches.ipynb")
    agent = await host.attach(path)
    ext = jp_serverapp.web_app.settings["jupyter_server_ydoc"]
    get_document = ext.get_document
    fetches: list[str] = []

    async def counting_get_document(*args: Any, **kwargs: Any) -> Any:
        fetches.append(kwargs.get("path", ""))
        return await get_document(*args, **kwargs)

    monkeypatch.setattr(ext, "get_document", counting_get_document)
    result = await run_turn(host, agent.session_id, "go")
    fetched_by_the_turn = len(fetches)

    assert result["stop_reason"] == "end_turn"
    cells = await live_agent_cells(jp_serverapp, path)
    assert [c["source"] for c in cells] == ["x = 1", "y = 2", "z = 3"]
    assert fetched_by_the_turn == 3
