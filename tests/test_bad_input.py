"""Bad input through the real server: each gives the model a clear message and loses nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
import pytest

from .conftest import read_saved_notebook, run_turn, use_script, wait_for
from .lab_process import server_exit
from .test_server_e2e import live_agent_cells


def tool_results(agent: Any) -> list[dict[str, Any]]:
    return [e for e in agent.session.path() if e["type"] == "tool_result"]


async def test_huge_output_reaches_model_as_head_and_tail_and_stays_in_notebook(
    host: Any, jp_serverapp: Any, make_notebook: Any, agent_script: Any, jp_root_dir: Path
) -> None:
    code = 'big = "".join(f"{i:08d}\\n" for i in range(600_000))\nprint(big, end="")'
    use_script(host, agent_script([{"code": code}, {"text": "saw: {last_output_line}"}]))
    path = make_notebook("big.ipynb")
    agent = await host.attach(path)

    ended = await run_turn(host, agent.session_id, "print a lot")

    assert ended["stop_reason"] == "end_turn"
    observation = tool_results(agent)[0]["observation"]
    assert len(observation) < 21_000
    assert observation.startswith("[stdout]\n00000000\n00000001")
    assert observation.rstrip().endswith("00599999")
    assert "characters cut here (cap 20,000)" in observation
    assert "5,400,000 characters" in observation
    # The last line the model saw is the real tail, so the model was given the tail.
    assert ended["final_text"] == "saw: 00599999"

    cells = await live_agent_cells(jp_serverapp, path)
    assert len("".join(o["text"] for o in cells[0]["outputs"])) == 5_400_000

    def saved() -> bool:
        nb = read_saved_notebook(jp_root_dir / path)
        return nb is not None and any(c.get("execution_count") for c in nb.cells)

    await wait_for(saved, timeout=30)
    nbformat.validate(nbformat.read(jp_root_dir / path, as_version=4))


async def test_cell_that_raises_shows_the_model_a_clean_traceback(
    host: Any, make_notebook: Any, agent_script: Any
) -> None:
    code = "def ratio(a, b):\n    return a / b\n\nratio(1, 0)"
    use_script(host, agent_script([{"code": code}, {"text": "ok"}]))
    agent = await host.attach(make_notebook())

    await run_turn(host, agent.session_id, "divide")

    result = tool_results(agent)[0]
    assert result["status"] == "error"
    observation = result["observation"]
    assert observation.startswith("[error]")
    assert "ZeroDivisionError" in observation and "return a / b" in observation
    assert "\x1b[" not in observation


async def test_endless_loop_times_out_is_interrupted_and_kernel_keeps_state(
    host: Any, make_notebook: Any, agent_script: Any
) -> None:
    script = agent_script(
        [
            {"code": "kept = 41"},
            {"code": "while True:\n    pass"},
            {"code": "print(kept + 1)"},
            {"text": "done"},
        ]
    )
    use_script(host, script, cell_timeout=2.0)
    agent = await host.attach(make_notebook())

    ended = await run_turn(host, agent.session_id, "loop")

    assert ended["stop_reason"] == "end_turn"
    _first, looped, after = tool_results(agent)
    assert looped["status"] == "timeout"
    assert "longer than 2 s and was interrupted" in looped["observation"]
    assert "KeyboardInterrupt" in looped["observation"]
    assert after["status"] == "ok" and after["observation"].strip().endswith("42")


async def test_kernel_that_dies_mid_cell_is_reported_restarted_and_loop_goes_on(
    host: Any, jp_serverapp: Any, make_notebook: Any, agent_script: Any
) -> None:
    script = agent_script(
        [
            {"code": "import os\nprint('about to exit', flush=True)\nos._exit(1)"},
            {"code": "print('alive again', 'history' in dir())"},
            {"text": "recovered"},
        ]
    )
    use_script(host, script)
    path = make_notebook()
    agent = await host.attach(path)

    ended = await run_turn(host, agent.session_id, "crash", timeout=90)

    assert ended["stop_reason"] == "end_turn"
    died, after = tool_results(agent)
    assert died["status"] == "died"
    assert "kernel died" in died["observation"] and "restarted" in died["observation"]
    assert after["status"] == "ok" and "alive again True" in after["observation"]
    ext = jp_serverapp.web_app.settings["jupyter_server_ydoc"]
    doc = await ext.get_document(path=path, content_type="notebook", file_format="json", copy=False)
    states = [c["execution_state"] for c in doc.ycells if "prime_agent" in c["metadata"]]
    assert states == ["idle", "idle"]  # no cell is left showing [*] after the restart


async def test_malformed_tool_arguments_are_rejected_without_running_anything(
    host: Any, jp_serverapp: Any, make_notebook: Any, agent_script: Any
) -> None:
    script = agent_script(
        [
            {"tool_calls": [{"arguments": '{"code": "print(1)"'}]},
            {"code": "print('fixed')"},
            {"text": "done"},
        ]
    )
    use_script(host, script)
    path = make_notebook()
    agent = await host.attach(path)
    queue = agent.events.subscribe()

    ended = await run_turn(host, agent.session_id, "go")

    assert ended["stop_reason"] == "end_turn"
    rejected, fixed = tool_results(agent)
    assert rejected["status"] == "invalid_arguments" and rejected["cell_id"] is None
    assert "not valid JSON" in rejected["observation"]
    assert fixed["status"] == "ok"
    assert len(await live_agent_cells(jp_serverapp, path)) == 1
    events = []
    while not queue.empty():
        events.append(queue.get_nowait())
    assert any(e["type"] == "error" and e["kind"] == "tool_arguments" for e in events)


async def test_provider_failing_with_500_is_retried_then_the_turn_succeeds(
    host: Any, make_notebook: Any, agent_script: Any
) -> None:
    script = agent_script(
        [
            {"error": {"status": 500, "message": "upstream exploded"}, "repeat": 1},
            {"code": "print('after retry')"},
            {"text": "done"},
        ]
    )
    use_script(host, script)
    agent = await host.attach(make_notebook())
    queue = agent.events.subscribe()

    ended = await run_turn(host, agent.session_id, "go")

    assert ended["stop_reason"] == "end_turn"
    events = []
    while not queue.empty():
        events.append(queue.get_nowait())
    retries = [e for e in events if e["type"] == "retry"]
    assert len(retries) == 1 and "upstream exploded" in retries[0]["message"]


async def test_provider_error_that_is_not_retryable_ends_the_turn_and_keeps_the_session(
    host: Any, make_notebook: Any, agent_script: Any
) -> None:
    script = agent_script(
        [
            {"error": {"status": 401, "message": "invalid x-api-key"}},
            {"code": "print(1)"},
            {"text": "ok"},
        ]
    )
    use_script(host, script)
    agent = await host.attach(make_notebook())

    ended = await run_turn(host, agent.session_id, "go")

    assert ended["stop_reason"] == "error"
    errors = [e for e in agent.session.path() if e["type"] == "error"]
    assert errors and "auth" in errors[0]["message"]
    # The session goes on: the next message is accepted and runs.
    again = await run_turn(host, agent.session_id, "try again")
    assert again["stop_reason"] == "end_turn"


def test_unknown_provider_name_stops_the_server_at_start(tmp_path: Path) -> None:
    done = server_exit(tmp_path, "--PrimeAgentLab.provider=bogus")
    assert done.returncode == 1
    assert "Prime Agent Lab cannot start: Unknown model provider 'bogus'" in done.stderr
    assert "anthropic, openai, scripted" in done.stderr


@pytest.mark.parametrize(
    ("notebook_path", "status"),
    [
        ("../outside.ipynb", 400),
        ("/etc/passwd.ipynb", 400),
        ("notes/../../x.ipynb", 400),
        ("data.csv", 400),
        ("missing.ipynb", 404),
        ("", 400),
    ],
)
async def test_attach_refuses_path_tricks_and_missing_notebooks(
    jp_fetch: Any, host: Any, notebook_path: str, status: int
) -> None:
    response = await jp_fetch(
        "prime-agent",
        "api",
        "sessions",
        method="POST",
        body=json.dumps({"notebook_path": notebook_path}),
        raise_error=False,
    )
    assert response.code == status
    assert json.loads(response.body)["message"]


async def test_malformed_requests_get_clear_errors(jp_fetch: Any, host: Any) -> None:
    bad_json = await jp_fetch(
        "prime-agent", "api", "sessions", method="POST", body="{not json", raise_error=False
    )
    assert bad_json.code == 400 and "not JSON" in json.loads(bad_json.body)["message"]
    unknown = await jp_fetch(
        "prime-agent", "api", "sessions", "20260101-000000-abcdef", raise_error=False
    )
    assert unknown.code == 404
