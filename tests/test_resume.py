"""`prime-agent-lab run --resume SESSION PROMPT`: a headless session continues with its kernel
variables restored from its last snapshot."""

from __future__ import annotations

import json
from pathlib import Path

from .test_cli import cli, json_lines

SCRIPT = {
    "turns": [
        {"code": "x = 41\nimport math as m"},
        {"text": "set"},
        {"code": "print(x + 1, m.floor(2.5))"},
        {"text": "{last_output_line}"},
    ]
}


def write_script(tmp_path: Path) -> str:
    script = tmp_path / "s.json"
    script.write_text(json.dumps(SCRIPT))
    return str(script)


def test_resume_continues_a_headless_session_with_a_variable_from_the_first_run(
    tmp_path: Path,
) -> None:
    script = write_script(tmp_path)
    first = cli(tmp_path, "run", "--mode", "json", "--notebook", "work.ipynb", "--script", script,
                "set x")  # fmt: skip
    assert first.returncode == 0, first.stderr
    session_dir = json_lines(first.stdout)[-1]["session_dir"]
    manifest = json.loads((tmp_path / session_dir / "kernel-state" / "manifest.json").read_text())
    assert [e["name"] for e in manifest["saved"]] == ["x"]

    second = cli(tmp_path, "run", "--mode", "json", "--resume", session_dir, "--script", script,
                 "use x")  # fmt: skip

    assert second.returncode == 0, second.stderr
    records = json_lines(second.stdout)
    end = records[-1]
    assert end["final_text"] == "42 2"
    assert end["session_dir"] == session_dir and end["notebook"] == "work.ipynb"
    notices = [r for r in records if r["type"] == "notice"]
    assert notices and notices[0]["kind"] == "kernel_state_restored"
    assert "x" in notices[0]["text"] and "m (import math)" in notices[0]["text"]


def test_resume_takes_a_session_id_too(tmp_path: Path) -> None:
    script = write_script(tmp_path)
    first = cli(tmp_path, "run", "--mode", "json", "--script", script, "set x")
    session_id = Path(json_lines(first.stdout)[-1]["session_dir"]).name

    second = cli(tmp_path, "run", "--mode", "json", "--resume", session_id, "--script", script, "x")

    assert json_lines(second.stdout)[-1]["final_text"] == "42 2"


def test_resume_of_an_unknown_session_is_a_clear_error_that_starts_nothing(tmp_path: Path) -> None:
    done = cli(tmp_path, "run", "--resume", "nosuchsession", "go")
    clash = cli(tmp_path, "run", "--resume", "nosuchsession", "--continue", "go")

    assert done.returncode == 2 and "--resume: no session 'nosuchsession' here" in done.stderr
    assert clash.returncode == 2 and "cannot be combined" in clash.stderr
    assert not (tmp_path / "agent.ipynb").exists()
