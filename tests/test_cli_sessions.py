"""`prime-agent-lab sessions`, and which provider and model a `run` says it runs on
(docs/pairing.md, sections 1 and 2)."""

from __future__ import annotations

import json
from pathlib import Path

from prime_agent_lab.core.sessions import SESSION_FILE, SessionRepository

from .test_cli import cli, cli_with_env, json_lines

SONNET = {"provider": "anthropic", "model": "claude-sonnet-4-5"}
FAKE_KEYS = {"ANTHROPIC_API_KEY": "sk-ant-fake-7c1d9e", "OPENAI_API_KEY": "sk-fake-openai-42ab"}
DEMO_WARNING = "the scripted demo model answers, not a real one"


def test_sessions_lists_the_folders_sessions_newest_first_as_a_table_and_as_json(
    tmp_path: Path,
) -> None:
    ran = json_lines(cli(tmp_path, "run", "--mode", "json", "Find the incident").stdout)[-1]
    run_id = Path(ran["session_dir"]).name
    repository = SessionRepository(tmp_path / ".prime-agent" / "sessions")
    priced = repository.create(notebook_path="agent.ipynb", **SONNET)
    priced.append("user_message", turn=1, text="Plot \x1b[31mred\x1b[0m things")
    usage = {"input_tokens": 1_000_000, "output_tokens": 0}
    priced.append("assistant_message", turn=1, text="", tool_calls=[], usage=usage, **SONNET)
    other = repository.create(notebook_path="sub/other.ipynb", **SONNET)
    (repository.root / "damaged").mkdir()
    (repository.root / "damaged" / SESSION_FILE).write_text("not json\n")

    table = cli(tmp_path, "sessions")

    assert table.returncode == 0, table.stderr
    header, *rows = table.stdout.splitlines()
    assert header.split() == ["ID", "UPDATED", "MODEL", "STATUS", "COST", "TITLE"]
    ids = [row.split()[0] for row in rows]
    assert set(ids) == {run_id, priced.session_id, other.session_id, "damaged"}
    assert ids.index(priced.session_id) < ids.index(run_id)  # newest first
    (row,) = [r for r in rows if r.startswith(priced.session_id)]
    assert "anthropic/claude-sonnet-4-5" in row and "inactive" in row and "$3.00" in row
    assert "Plot \\x1b[31mred\\x1b[0m things" in row and "\x1b" not in table.stdout
    (row,) = [r for r in rows if r.startswith(run_id)]
    assert "scripted/demo" in row and "Find the incident" in row
    (row,) = [r for r in rows if r.startswith("damaged")]
    assert "broken" in row

    listed = cli(tmp_path, "sessions", "--notebook", "./agent.ipynb", "--json")

    assert listed.returncode == 0, listed.stderr
    sessions = json.loads(listed.stdout)["sessions"]
    assert [s["session_id"] for s in sessions] == [priced.session_id, run_id]
    assert sessions[0]["cost"] == sessions[0]["cost_total"] == 3.0
    assert sessions[1]["title"] == "Find the incident" and sessions[1]["status"] == "inactive"
    assert sessions[1]["notebook_path"] == "agent.ipynb"
    nothing = cli(tmp_path, "sessions", "--notebook", "none.ipynb")
    assert nothing.returncode == 0 and nothing.stdout.startswith("no sessions of none.ipynb")


def test_a_run_names_its_provider_and_model_in_run_start_and_on_stderr(tmp_path: Path) -> None:
    done = cli(tmp_path, "run", "--mode", "json", "hi")

    assert done.returncode == 0, done.stderr
    start = json_lines(done.stdout)[0]
    session_id = Path(json_lines(done.stdout)[-1]["session_dir"]).name
    assert start == {
        "type": "run_start",
        "provider": "scripted",
        "model": "demo",
        "session_id": session_id,
        "kernels": {"source": "local", "kernel_name": "python3"},
    }
    assert DEMO_WARNING not in done.stderr  # no key in the environment: nothing to warn of


def test_a_key_in_the_environment_without_provider_says_the_demo_answers_never_the_key(
    tmp_path: Path,
) -> None:
    text = cli_with_env(tmp_path, FAKE_KEYS, "run", "hi")
    as_json = cli_with_env(tmp_path, FAKE_KEYS, "run", "--mode", "json", "--continue", "hi")

    assert text.returncode == 0 and as_json.returncode == 0, (text.stderr, as_json.stderr)
    assert "prime-agent-lab: provider scripted, model demo" in text.stderr.splitlines()
    assert "prime-agent-lab: kernels local (python3)" in text.stderr.splitlines()
    for done in (text, as_json):
        (line,) = [ln for ln in done.stderr.splitlines() if DEMO_WARNING in ln]
        assert "ANTHROPIC_API_KEY, OPENAI_API_KEY are set" in line
        assert "--provider anthropic or --provider openai" in line
        for key in FAKE_KEYS.values():
            assert key not in done.stdout and key not in done.stderr
    assert json_lines(as_json.stdout)[0]["type"] == "run_start"

    chosen = cli_with_env(tmp_path, FAKE_KEYS, "run", "--prov", "scripted", "--continue", "hi")

    assert chosen.returncode == 0, chosen.stderr
    assert DEMO_WARNING not in chosen.stderr  # the user chose the demo (an abbreviation too)
