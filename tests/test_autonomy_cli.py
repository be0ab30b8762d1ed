"""Autonomous runs from the CLI (`run --autonomous`, docs/autonomy.md), with the scripted model
and a real kernel: gates, the workspace fingerprint, budgets, `run_end.reason` and exit status."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from prime_agent_lab.core.sessions import SessionRepository

from .test_cli import ROOT, cli, cli_with_env, json_lines
from .test_gates import _gone_soon

NEVER_ENDING = {"turns": [{"text": "Working.", "code": "x = 1"}] * 200}


def _script(folder: Path, script: dict[str, Any]) -> Path:
    path = folder.parent / f"{folder.name}-script.json"  # outside the fingerprinted folder
    path.write_text(json.dumps(script))
    return path


def _run(folder: Path, script: dict[str, Any], *flags: str, timeout: float = 180):  # type: ignore[no-untyped-def]
    done = cli(
        folder,
        "run",
        "--mode",
        "json",
        "--script",
        str(_script(folder, script)),
        *flags,
        "do the task",
        timeout=timeout,
    )
    records = json_lines(done.stdout)
    assert records and records[-1]["type"] == "run_end", done.stderr
    return done, records


def _entries(folder: Path, end: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    lines = (folder / end["session_dir"] / "session.jsonl").read_text().splitlines()[1:]
    return [e for e in map(json.loads, lines) if e.get("type") == kind]


def _work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


def test_a_failed_gate_reaches_the_model_which_fixes_the_file_and_the_run_ends_gates_passed(
    tmp_path: Path,
) -> None:
    folder = _work(tmp_path)
    gate = 'test -f fixed.txt || { echo "fixed.txt is missing"; exit 1; }'
    script = {
        "turns": [
            {"text": "All done."},
            {"text": "Fixing.", "code": "open('fixed.txt', 'w').write('ok')"},
            {"text": "Fixed."},
        ]
    }
    done, records = _run(folder, script, "--autonomous-gate", gate)
    assert done.returncode == 0, done.stderr
    end = records[-1]
    assert (end["ok"], end["reason"]) == (True, "gates_passed")
    gate_runs = [r for r in records if r["type"] == "gate_run"]
    assert [(g["passed"], g["exit_status"]) for g in gate_runs] == [(False, 1), (True, 0)]
    (continuation,) = _entries(folder, end, "continuation")
    assert "fixed.txt is missing" in continuation["text"]
    assert "terminal evidence" in continuation["text"]
    types = [r["type"] for r in records]
    for kind in ("turn_started", "cell_finished", "gate_run", "autonomy", "turn_ended"):
        assert kind in types, kind
    notices = [r for r in records if r["type"] == "notice"]
    assert {"continuation", "gate_failed", "gate_passed", "autonomy"} <= {
        n["kind"] for n in notices
    }
    assert notices[-1]["text"].startswith("Autonomous run ended: gates passed after 3 turns")
    states = [r["state"] for r in records if r["type"] == "autonomy"]
    assert states[-1]["run"]["reason"] == "gates_passed"
    assert states[-1]["run"]["turns"] == 3
    assert [e["event"] for e in _entries(folder, end, "autonomy")] == ["started", "ended"]


def test_an_impossible_gate_on_an_unchanged_workspace_runs_once_and_retries_are_exhausted(
    tmp_path: Path,
) -> None:
    folder = _work(tmp_path)
    (folder / "data.txt").write_text("input")
    counter = tmp_path / "gate-runs.txt"
    gate = f"echo ran >> {counter}; echo impossible; exit 1"
    done, records = _run(
        folder, {"turns": [{"text": "I cannot do more."}]}, "--autonomous-gate", gate
    )
    assert done.returncode == 1
    end = records[-1]
    assert (end["ok"], end["reason"]) == (False, "retries_exhausted")
    assert counter.read_text().splitlines() == ["ran"]
    gate_runs = [r for r in records if r["type"] == "gate_run"]
    assert [(g["attempt"], g["skipped_unchanged"]) for g in gate_runs] == [
        (1, False),
        (2, True),
        (3, True),
    ]
    continuations = _entries(folder, end, "continuation")
    assert len(continuations) == 2
    assert "workspace is unchanged since the failed run" in continuations[-1]["text"]
    assert "impossible" in continuations[-1]["text"]
    assert "gate retries exhausted" in end["error"]


def test_the_runs_own_output_files_in_its_folder_are_no_change_of_the_workspace(
    tmp_path: Path,
) -> None:
    folder = _work(tmp_path)
    counter = tmp_path / "gate-runs.txt"
    script = _script(folder, {"turns": [{"text": "I cannot do more."}]})
    gate = f"echo ran >> {counter}; sleep 1; false"
    flags = ("--mode", "json", "--script", str(script), "--autonomous-gate", gate)
    done = cli_with_env(folder, {}, "run", *flags, "x", into=folder / "out.jsonl")
    assert done.returncode == 1, done.stderr
    assert json_lines(done.stdout)[-1]["reason"] == "retries_exhausted"
    assert counter.read_text().splitlines() == ["ran"]  # `> out.jsonl 2> out.jsonl.err` changed


def test_a_change_to_an_untracked_file_lets_a_failed_gate_run_again(tmp_path: Path) -> None:
    folder = _work(tmp_path)
    for args in (["init", "-q"], ["config", "user.email", "t@e"], ["config", "user.name", "t"]):
        subprocess.run(["git", *args], cwd=folder, check=True)
    (folder / "tracked.txt").write_text("v1")
    subprocess.run(["git", "add", "tracked.txt"], cwd=folder, check=True)
    subprocess.run(["git", "commit", "-qm", "init"], cwd=folder, check=True)
    counter = tmp_path / "gate-runs.txt"
    script = {
        "turns": [
            {"text": "Done."},
            {"text": "Notes.", "code": "open('notes.txt', 'w').write('tried again')"},
            {"text": "Done again."},
        ]
    }
    _, records = _run(folder, script, "--autonomous-gate", f"echo ran >> {counter}; exit 1")
    assert records[-1]["reason"] == "retries_exhausted"
    assert counter.read_text().splitlines() == ["ran", "ran"]
    skipped = [r["skipped_unchanged"] for r in records if r["type"] == "gate_run"]
    assert skipped == [False, False, True]


def test_a_python_gate_sees_the_kernel_and_runs_again_after_a_cell(tmp_path: Path) -> None:
    folder = _work(tmp_path)
    script = {
        "turns": [
            {"text": "Computing.", "code": "answer = 41"},
            {"text": "Done."},
            {"text": "Correcting.", "code": "answer = 42"},
            {"text": "Done now."},
        ]
    }
    done, records = _run(folder, script, "--autonomous-gate", "py:assert answer == 42, answer")
    assert done.returncode == 0, done.stderr
    assert records[-1]["reason"] == "gates_passed"
    gate_runs = [r for r in records if r["type"] == "gate_run"]
    assert [(g["kind"], g["passed"], g["skipped_unchanged"]) for g in gate_runs] == [
        ("python", False, False),
        ("python", True, False),
    ]
    assert "AssertionError: 41" in gate_runs[0]["output"]


def test_without_gates_the_continuation_prompt_keeps_the_run_going_then_it_ends(
    tmp_path: Path,
) -> None:
    folder = _work(tmp_path)
    done, records = _run(folder, {"turns": []}, "--autonomous", "--autonomous-continuations", "2")
    assert done.returncode == 0, done.stderr
    end = records[-1]
    assert (end["reason"], end["autonomy"]["continuations"], end["autonomy"]["turns"]) == (
        "continuations_used",
        2,
        3,
    )
    texts = [c["text"] for c in _entries(folder, end, "continuation")]
    assert len(texts) == 2 and "No human is available" in texts[0]


def test_the_turn_budget_stops_a_run_that_would_go_on_forever(tmp_path: Path) -> None:
    folder = _work(tmp_path)
    flags = ("--script", str(_script(folder, NEVER_ENDING)), "--autonomous-max-turns", "3")
    done = cli(folder, "run", *flags, "do the task")  # text mode: one line says how it ended
    assert done.returncode == 1
    assert done.stdout.count("▶ cell") == 3
    (line,) = [ln for ln in done.stderr.splitlines() if "autonomous run ended" in ln]
    assert "turn budget used after 3 turns" in line
    assert "(reason max_turns; budgets 3 turns, 80,000 tokens, 30 min)" in line


def test_the_time_budget_stops_a_run_in_the_middle_of_a_cell(tmp_path: Path) -> None:
    folder = _work(tmp_path)
    script = {"turns": [{"text": "Waiting.", "code": "import time\ntime.sleep(120)"}]}
    started = time.monotonic()
    done, records = _run(folder, script, "--autonomous-timeout", "0.05")  # 3 seconds
    assert time.monotonic() - started < 60
    assert done.returncode == 1
    end = records[-1]
    assert end["reason"] == "timeout"
    assert 3 <= end["autonomy"]["seconds"] < 50
    (cell,) = [r for r in records if r["type"] == "cell_finished"]
    assert cell["status"] == "interrupted"


DELEGATE_AND_WAIT = (
    'r = await rlm("write a lot", name="kid")\n'
    "import asyncio\n"
    "for _ in range(600):  # the parent waits while only the child spends tokens\n"
    "    await asyncio.sleep(0.2)"
)
"""`rlm` returns at once: without the wait the parent's own calls race the child's kernel start
and, on a loaded machine, reach the budget alone."""


def test_the_token_budget_counts_a_sub_agents_tokens(tmp_path: Path) -> None:
    folder = _work(tmp_path)
    words = "word " * 2000  # about 2,500 output tokens per child call
    script = {
        "turns": [
            {"text": "Delegating.", "code": DELEGATE_AND_WAIT},
            *[{"text": "Next.", "code": "x = 1"}] * 50,
        ],
        "child": {"turns": [{"text": words, "code": "y = 1"}] * 50},
    }
    done, records = _run(folder, script, "--autonomous-max-tokens", "12000")
    assert done.returncode == 1
    end = records[-1]
    assert end["reason"] == "max_tokens"
    assert end["autonomy"]["tokens"] >= 12000
    own = sum(
        e["usage"]["input_tokens"] + e["usage"]["output_tokens"]
        for e in _entries(folder, end, "assistant_message")
    )
    assert own < 12000, "the parent alone stayed under the budget: the child's tokens counted"


def test_ctrl_c_during_a_gate_kills_the_gate_s_tree_and_the_run_ends_stopped(
    tmp_path: Path,
) -> None:
    folder = _work(tmp_path)
    sleeper = tmp_path / "sleeper.pid"
    gate = f"sleep 300 & echo $! > {sleeper}; wait"
    env = {**os.environ}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "kernel_ext")])
    script = _script(folder, {"turns": [{"text": "Done."}]})
    process = subprocess.Popen(
        [sys.executable, "-m", "prime_agent_lab.cli", "run", "--mode", "json",
         "--script", str(script), "--autonomous-gate", gate, "go"],
        cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not sleeper.exists() or not sleeper.read_text().strip():
            assert process.poll() is None and time.monotonic() < deadline, process.communicate()
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 1, stderr
    end = json_lines(stdout)[-1]
    assert (end["reason"], end["error"]) == ("stopped", "stopped by SIGINT")
    assert _gone_soon(int(sleeper.read_text()))
    assert not [r for r in json_lines(stdout) if r["type"] == "gate_run"], "a cut gate is no result"


def test_a_python_gate_that_does_not_compile_is_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    done = cli(tmp_path, "run", "--autonomous-gate", "py:assert (", "go")
    assert done.returncode == 2
    assert "--autonomous-gate 'py:assert ('" in done.stderr and "never closed" in done.stderr
    assert not (tmp_path / "agent.ipynb").exists()


def test_a_session_switched_on_in_the_panel_is_not_autonomous_when_the_cli_continues_it(
    tmp_path: Path,
) -> None:
    folder = _work(tmp_path)
    _, records = _run(folder, {"turns": [{"text": "first"}, {"text": "second"}]})
    session_dir = folder / records[-1]["session_dir"]
    session = SessionRepository(session_dir.parent).load(session_dir.name)
    budgets = {"max_turns": 12, "max_tokens": 80000, "timeout_minutes": 30, "continuations": 3}
    session.append("autonomy", event="configured", enabled=True, budgets=budgets, gates=[])
    done, records = _run(folder, {"turns": [{"text": "first"}, {"text": "second"}]}, "--continue")
    assert done.returncode == 0, done.stderr
    assert records[-1]["final_text"] == "second" and "reason" not in records[-1]
    assert not [r for r in records if r["type"] in ("autonomy", "gate_run")]


def test_a_failed_model_call_ends_the_run_with_reason_error_and_says_why(tmp_path: Path) -> None:
    folder = _work(tmp_path)
    script = {"turns": [{"error": {"status": 401, "message": "invalid x-api-key"}}, {"text": "no"}]}
    done, records = _run(folder, script, "--autonomous")
    assert done.returncode == 1
    end = records[-1]
    assert end["reason"] == "error"
    assert "invalid x-api-key" in end["error"] and "autonomous run ended: error" in end["error"]


def test_text_mode_ends_a_successful_run_with_one_line_saying_how(tmp_path: Path) -> None:
    folder = _work(tmp_path)
    script = _script(folder, {"turns": [{"text": "Done."}]})
    flags = ("--script", str(script), "--autonomous-continuations", "0")
    done = cli(folder, "run", *flags, "do the task")
    assert done.returncode == 0, done.stderr
    (line,) = [ln for ln in done.stdout.splitlines() if ln.startswith("autonomous run ended")]
    assert line.startswith("autonomous run ended: continuations used after 1 turn, ")
    assert line.endswith("(reason continuations_used; budgets 12 turns, 80,000 tokens, 30 min)")


def test_text_mode_says_1_turn_and_shows_a_multi_line_gate_by_its_first_line(
    tmp_path: Path,
) -> None:
    folder = _work(tmp_path)
    script = _script(folder, {"turns": [{"text": "Done."}]})
    gates = ("--autonomous-gate", "true\necho second line", "--autonomous-gate", "echo a, b")
    done = cli(folder, "run", "--script", str(script), "--autonomous-max-turns", "1", *gates, "go")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    (started,) = [ln for ln in lines if "Autonomous run started" in ln]
    assert started.endswith("(1 turn, 80,000 tokens, 30.0 min; gates: `true …`, `echo a, b`).")
    assert any(ln.strip().startswith("note: Gate `true …` passed (exit 0") for ln in lines)
    (line,) = [ln for ln in lines if ln.startswith("autonomous run ended")]
    assert line.endswith("(reason gates_passed; budgets 1 turn, 80,000 tokens, 30 min)")
