"""Outcomes on the server: kernels the agent starts lack the provider keys; a session cut mid-cell
tells the model what the cell printed, read from the live notebook."""

from __future__ import annotations

import json
from typing import Any

import nbformat
import pytest

from .conftest import run_turn, use_script


async def test_a_kernel_the_server_starts_for_the_agent_has_no_provider_keys(
    host: Any, make_notebook: Any, agent_script: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-server-5e6f7a8b9c")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-server-0a1b2c3d4e")
    code = (
        "import os\n"
        "print(os.environ.get('OPENAI_API_KEY'), os.environ.get('ANTHROPIC_API_KEY'),"
        " os.environ.get('JPY_SESSION_NAME', '').endswith('keys.ipynb'))"
    )
    use_script(host, agent_script([{"code": code}, {"text": "{last_output_line}"}]))
    path = make_notebook("keys.ipynb")
    agent = await host.attach(path)  # no kernel yet: the host starts the notebook's session

    ended = await run_turn(host, agent.session_id, "env?")

    assert ended["final_text"] == "None None True"
    sessions = await host.serverapp.session_manager.list_sessions()
    assert [s["path"] for s in sessions] == [path]  # the browser will reuse this session


async def test_reopening_a_session_cut_mid_cell_reads_the_partial_output_from_the_notebook(
    host: Any, make_notebook: Any, agent_script: Any
) -> None:
    cell = nbformat.v4.new_code_cell("for i in range(10**9): print(i)")
    cell["id"] = "cut0cell0001"
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="0\n1\n2\n")]
    path = make_notebook("cut.ipynb", [cell])
    log = host.repository.create(notebook_path=path, provider="scripted", model="demo")
    log.append("user_message", text="count", turn=1)
    arguments = json.dumps({"code": cell.source})
    calls = [{"id": "scripted_0_0", "name": "python", "arguments": arguments}]
    log.append("assistant_message", turn=1, text="", tool_calls=calls)
    log.append("cell_started", turn=1, tool_call_id="scripted_0_0", cell_id=cell["id"])
    # The server died here, with the cell running.
    use_script(host, agent_script([{"code": "unused"}, {"text": "{last_output}"}]))

    agent = await host.attach(path)

    [result] = [e for e in agent.session.path() if e["type"] == "tool_result"]
    assert (result["status"], result["cell_id"]) == ("interrupted", cell["id"])
    assert result["observation"].startswith("[stdout]\n0\n1\n2")
    assert "ran partly" in result["observation"]
    assert agent.session.path()[-1]["stop_reason"] == "interrupted"
    ended = await run_turn(host, agent.session_id, "what happened?")
    assert "stopped while this cell was running" in ended["final_text"]
