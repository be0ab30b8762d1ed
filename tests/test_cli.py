"""The headless CLI: same loop, files in the current directory, JSON lines, honest exit codes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import nbformat

from prime_agent_lab.core.harness.store import HarnessStore

from .lab_process import free_port
from .test_kernel_package import HIDE_AND_LAUNCH, write_kernelspec

ROOT = Path(__file__).resolve().parent.parent


def cli(cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return cli_with_env(cwd, {}, *args, timeout=timeout)


def cli_with_env(
    cwd: Path,
    extra_env: dict[str, str],
    *args: str,
    timeout: float = 120,
    into: Path | None = None,
    stdin: str | int | None = None,
) -> subprocess.CompletedProcess[str]:
    """The CLI run in `cwd`; its output captured, or with `into` written to that file (stdout)
    and to `into` + `.err` (stderr), as a shell's `> out 2> out.err` does. `stdin`: text piped
    in, or a `subprocess` constant (`DEVNULL`)."""
    feed: dict[str, Any] = {"input": stdin} if isinstance(stdin, str) else {"stdin": stdin}
    env = {**os.environ, **extra_env}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), str(ROOT / "kernel_ext"), env.get("PYTHONPATH", "")]
    )
    command = [sys.executable, "-m", "prime_agent_lab.cli", *args]
    if into is None:
        return subprocess.run(
            command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, **feed
        )
    with into.open("w") as out, Path(f"{into}.err").open("w") as err:
        done = subprocess.run(
            command, cwd=cwd, env=env, stdout=out, stderr=err, text=True, timeout=timeout, **feed
        )
    return subprocess.CompletedProcess(
        done.args, done.returncode, into.read_text(), Path(f"{into}.err").read_text()
    )


def json_lines(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_run_in_json_mode_writes_notebook_and_session_and_ends_with_run_end(tmp_path: Path) -> None:
    done = cli(tmp_path, "run", "--mode", "json", "Find the incident in the log")

    assert done.returncode == 0, done.stderr
    records = json_lines(done.stdout)
    assert all("type" in r for r in records)
    end = records[-1]
    assert end["type"] == "run_end" and end["ok"] is True
    assert end["notebook"] == "agent.ipynb"
    assert "FOUND: INC-4471" in end["final_text"]
    assert [r["type"] for r in records].count("cell_finished") == 3

    nb = nbformat.read(tmp_path / end["notebook"], as_version=4)
    nbformat.validate(nb)
    counts = [c.execution_count for c in nb.cells]
    assert counts == [1, 2, 3]
    assert "INC-4471" in nb.cells[2].outputs[-1]["text"]
    session_file = tmp_path / end["session_dir"] / "session.jsonl"
    assert session_file.is_file()
    assert json.loads(session_file.read_text().splitlines()[0])["notebook_path"] == "agent.ipynb"


def test_run_in_text_mode_prints_progress(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(
        json.dumps(
            {
                "turns": [
                    {"text": "Adding.", "code": "x = 20 + 22\nprint(x)"},
                    {"text": "It is {last_output_line}."},
                ]
            }
        )
    )
    done = cli(tmp_path, "run", "--script", str(script), "add")
    assert done.returncode == 0, done.stderr
    assert "▶ cell" in done.stdout and "x = 20 + 22" in done.stdout
    assert "ok [1]: 42" in done.stdout
    assert "It is 42." in done.stdout


def test_history_in_the_kernel_reaches_the_cli_host_over_the_bridge(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    code = "print([e.type for e in history][:2], len(history.cells()))"
    script.write_text(
        json.dumps({"turns": [{"code": "a = 1"}, {"code": code}, {"text": "{last_output_line}"}]})
    )
    done = cli(tmp_path, "run", "--mode", "json", "--script", str(script), "look back")
    assert done.returncode == 0, done.stderr
    assert json_lines(done.stdout)[-1]["final_text"] == "['user_message', 'assistant_message'] 1"


def test_continue_resumes_the_newest_session_of_the_notebook(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [{"text": "first"}, {"text": "second"}]}))
    first = json_lines(
        cli(tmp_path, "run", "--mode", "json", "--script", str(script), "one").stdout
    )[-1]
    second = json_lines(
        cli(tmp_path, "run", "--mode", "json", "--continue", "--script", str(script), "two").stdout
    )[-1]
    assert first["session_dir"] == second["session_dir"]
    assert (first["final_text"], second["final_text"]) == ("first", "second")


def test_provider_failure_exits_nonzero_with_a_clear_message(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(
        json.dumps(
            {
                "turns": [
                    {"error": {"status": 401, "message": "invalid x-api-key"}},
                    {"text": "never"},
                ]
            }
        )
    )
    done = cli(tmp_path, "run", "--script", str(script), "hi")
    assert done.returncode == 1
    assert "prime-agent-lab:" in done.stderr and "invalid x-api-key" in done.stderr


def test_unknown_provider_is_refused_before_anything_starts(tmp_path: Path) -> None:
    done = cli(tmp_path, "run", "--provider", "bogus", "hi")
    assert done.returncode == 2
    assert "invalid choice: 'bogus'" in done.stderr
    assert not (tmp_path / "agent.ipynb").exists()


def start_run_whose_planner_waits(tmp_path: Path) -> tuple[subprocess.Popen[str], Path]:
    """A CLI run whose agent asks for a refinement; the planner's side call answers only once
    the returned file exists. Returns once the session log has the turn's end."""
    release = tmp_path / "release-planner"
    proposal = {
        "summary": "remember the units",
        "rationale": "asked",
        "expected_outcome": "metres",
        "edits": [{"action": "create", "kind": "memory", "title": "units", "content": "metres"}],
    }
    script = tmp_path / "s.json"
    script.write_text(
        json.dumps(
            {
                "turns": [
                    {"code": "print(await refine.run('remember the units'))"},
                    {"text": "Asked for a refinement."},
                ],
                "side": {"refine": [{"text": json.dumps(proposal), "wait_for": str(release)}]},
            }
        )
    )
    env = {**os.environ, "PRIME_AGENT_LAB_HARNESS_DIR": str(tmp_path / "global")}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), str(ROOT / "kernel_ext"), env.get("PYTHONPATH", "")]
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "prime_agent_lab.cli", "run", "--mode", "json",
         "--script", str(script), "refine"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    logs = tmp_path / ".prime-agent" / "sessions"
    deadline = time.monotonic() + 120
    while not any('"turn_end"' in log.read_text() for log in logs.glob("*/session.jsonl")):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise AssertionError(process.communicate())
        time.sleep(0.05)
    return process, release


def test_a_refinement_still_planning_when_the_turn_ends_is_applied_before_the_run_exits(
    tmp_path: Path,
) -> None:
    process, release = start_run_whose_planner_waits(tmp_path)
    try:
        release.touch()
        stdout, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 0, stderr
    assert "finishing a harness refinement" in stderr
    end = json_lines(stdout)[-1]
    assert end["ok"] is True
    harness = tmp_path / end["session_dir"] / "harness"
    local = HarnessStore(harness, "local")
    assert local.get("memory", "units").content == "metres"  # type: ignore[union-attr]
    [record] = [
        json.loads(line) for line in (harness / "refinements.jsonl").read_text().splitlines()
    ]
    assert record["summary"] == "remember the units" and record["edits"][0]["applied"] is True


def test_ctrl_c_while_a_refinement_finishes_drops_it_and_the_run_still_succeeds(
    tmp_path: Path,
) -> None:
    process, _ = start_run_whose_planner_waits(tmp_path)
    try:
        assert process.stderr is not None
        assert "finishing a harness refinement" in process.stderr.readline()
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 0, stderr
    end = json_lines(stdout)[-1]
    assert end["ok"] is True and end["final_text"] == "Asked for a refinement."
    harness = tmp_path / end["session_dir"] / "harness"
    assert HarnessStore(harness, "local").get("memory", "units") is None


def test_no_auto_refine_together_with_auto_refine_every_is_refused(tmp_path: Path) -> None:
    # Before, the last of the two won: `--no-auto-refine --auto-refine-every 1` reviewed.
    for flags in (
        ["--no-auto-refine", "--auto-refine-every", "1"],
        ["--auto-refine-every", "1", "--no-auto-refine"],
    ):
        done = cli(tmp_path, "run", *flags, "hi")
        assert done.returncode == 2, done.stderr
        assert "not allowed with argument" in done.stderr
    assert not (tmp_path / "agent.ipynb").exists()


def test_missing_script_file_is_a_clear_error(tmp_path: Path) -> None:
    done = cli(tmp_path, "run", "--script", "nope.json", "hi")
    assert done.returncode == 1
    assert "nope.json" in done.stderr


def test_a_bridge_address_that_is_not_host_port_is_refused_before_anything_starts(
    tmp_path: Path,
) -> None:
    done = cli(tmp_path, "run", "--bridge-listen", "8765", "hi")
    assert done.returncode == 2
    assert "--bridge-listen must be HOST:PORT (127.0.0.1:0, 0.0.0.0:8765), not '8765'" in (
        done.stderr
    )
    assert not (tmp_path / ".prime-agent").exists()


def test_a_malformed_gateway_url_is_refused_before_anything_starts(tmp_path: Path) -> None:
    """A port out of range, a broken IPv6 host or another scheme: one line, exit 2 (it was an
    uncaught ValueError from deep in the start, with no `run_end` in JSON mode)."""
    for url, why in (
        ("http://127.0.0.1:99999", "is not a URL (Port out of range 0-65535)"),
        ("http://[::1", "is not a URL (Invalid IPv6 URL)"),
        ("ftp://gateway:8888", "must start with http:// or https://, not ftp"),
    ):
        done = cli(tmp_path, "run", "--gateway-url", url, "hi")
        assert done.returncode == 2, done.stderr
        assert f"--gateway-url (or JUPYTER_GATEWAY_URL) {why}" in done.stderr
        assert "Traceback" not in done.stderr
    from_env = cli_with_env(tmp_path, {"JUPYTER_GATEWAY_URL": "http://[::1"}, "run", "hi")
    assert from_env.returncode == 2 and "Invalid IPv6 URL" in from_env.stderr
    assert not (tmp_path / ".prime-agent").exists()


def test_a_kernel_that_cannot_start_still_gets_run_start_first_in_json_mode(
    tmp_path: Path,
) -> None:
    """A bad kernel name, a gateway nobody answers at: `run_start` (no session yet, the kernels
    as configured) comes before `run_end`, as in every JSON run."""
    closed = free_port()  # nothing listens there
    for args, where, error in (
        (["--kernel-name", "no-such-kernel"], {"source": "local"}, "no such kernel spec"),
        (
            ["--gateway-url", f"http://127.0.0.1:{closed}"],
            {"source": "gateway", "url": f"http://127.0.0.1:{closed}"},
            f"127.0.0.1:{closed}",
        ),
    ):
        done = cli(tmp_path, "run", "--mode", "json", *args, "hi")
        assert done.returncode == 1, done.stderr
        records = json_lines(done.stdout)
        assert [r["type"] for r in records] == ["run_start", "run_end"], records
        start, end = records
        assert start["session_id"] is None and start["provider"] == "scripted"
        assert start["kernels"].items() >= where.items(), start
        assert error in end["error"] and end["ok"] is False, end
        assert "Traceback" not in done.stderr


def test_a_kernel_without_the_package_is_told_once_and_its_missing_snapshots_not_warned_of(
    tmp_path: Path,
) -> None:
    """Text mode: the note once per run (not again as a log line), and no warning that a
    snapshot was not saved, at a turn's start or the run's end: the note said there are none."""
    data = tmp_path / "data"
    argv = [sys.executable, "-c", HIDE_AND_LAUNCH, "-f", "{connection_file}"]
    write_kernelspec(data, "bare", {"argv": argv})
    work = tmp_path / "work"
    work.mkdir()
    turns = [{"code": "print(6 * 7)"}, {"text": "one"}, {"code": "print(7 * 7)"}, {"text": "two"}]
    (work / "s.json").write_text(json.dumps({"turns": turns}))
    env = {"JUPYTER_DATA_DIR": str(data)}
    args = ("run", "--script", "s.json", "--kernel-name", "bare", "--kernel-pool-size", "0")

    runs = [
        cli_with_env(work, env, *args, "go"),
        cli_with_env(work, env, *args, "--continue", "again"),
    ]

    for done, printed in zip(runs, ("42", "49"), strict=True):
        assert done.returncode == 0, done.stderr
        everything = done.stdout + done.stderr
        assert f"ok [1]: {printed}" in done.stdout
        assert everything.count("This kernel has no `prime_agent_kernel`") == 1, everything
        assert "snapshot" not in done.stderr, done.stderr


def test_api_keys_printed_by_a_cell_never_reach_notebook_session_or_model(tmp_path: Path) -> None:
    secret = "sk-test-4f9c2e7b1d0a8e6f"
    script = tmp_path / "s.json"
    # The kernel does not get the key variable (see test_outcomes); redaction is the second line,
    # for a key that reaches a cell some other way, here a file.
    (tmp_path / "key.txt").write_text(secret)
    code = "print('key is', open('key.txt').read().strip())"
    script.write_text(json.dumps({"turns": [{"code": code}, {"text": "{last_output_line}"}]}))
    done = cli_with_env(
        tmp_path,
        {"OPENAI_API_KEY": secret},
        "run",
        "--mode",
        "json",
        "--script",
        str(script),
        "show me",
    )
    assert done.returncode == 0, done.stderr
    end = json_lines(done.stdout)[-1]
    assert end["final_text"] == "key is [redacted]"
    written = [
        p for p in tmp_path.rglob("*") if p.is_file() and p.name not in ("s.json", "key.txt")
    ]
    assert written and all(secret not in p.read_text(errors="replace") for p in written)
    assert secret not in done.stdout


def test_an_older_notebook_is_upgraded_so_agent_cells_keep_it_valid(tmp_path: Path) -> None:
    old = nbformat.v4.new_notebook()
    old.nbformat_minor = 4
    old.cells.append(nbformat.v4.new_markdown_cell("# notes"))
    del old.cells[0]["id"]
    nbformat.write(old, tmp_path / "old.ipynb")
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [{"code": "print(1)"}, {"text": "ok"}]}))
    done = cli(tmp_path, "run", "--notebook", "old.ipynb", "--script", str(script), "go")
    assert done.returncode == 0, done.stderr
    nb = nbformat.read(tmp_path / "old.ipynb", as_version=4)
    nbformat.validate(nb)
    assert [c.cell_type for c in nb.cells] == ["markdown", "code"]


def test_text_mode_shows_sub_agents_and_the_messages_that_start_turns_each_on_its_own_line(
    tmp_path: Path,
) -> None:
    spawn = (
        'a = await rlm("alpha words", name="part-a")\nb = await rlm("beta words", name="part-b")'
    )
    reply = "await agent_message.send(f'summary {found}', receiver_role='parent')"
    script = tmp_path / "tree.json"
    script.write_text(
        json.dumps(
            {
                "turns": [
                    {"text": "Fan out.", "code": spawn},
                    {"text": "Waiting for replies."},
                    {"text": "Got one."},
                    {"text": "Got both."},
                ],
                "child": {
                    "turns": [
                        {"code": "found = '{task}'.upper()"},
                        {"code": reply},
                        {"text": "replied"},
                    ]
                },
            }
        )
    )
    done = cli(tmp_path, "run", "--script", str(script), "--notebook", "analysis.ipynb", "go")

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for name in ("part-a", "part-b"):
        assert f"  sub-agent {name} started: analysis.agents/{name}.ipynb" in lines
        assert f"  sub-agent {name}: replied" in lines
    assert "Waiting for replies." in lines
    assert "Got one." in lines and "Got both." in lines
    received = [line for line in lines if line.startswith("◀ message from child ")]
    assert sorted(received) == [
        "◀ message from child part-a: summary ALPHA WORDS",
        "◀ message from child part-b: summary BETA WORDS",
    ]


def test_agents_that_keep_messaging_each_other_are_stopped_at_the_turn_limit(
    tmp_path: Path,
) -> None:
    ping = (
        "subs = await rlm.list_subagents()\n"
        "if not subs:\n"
        "    await rlm('answer every message', name='kid')\n"
        "else:\n"
        "    await agent_message.send('ping', receiver_role='child', receiver_name='kid')"
    )
    pong = "await agent_message.send('pong', receiver_role='parent')"
    script = tmp_path / "pingpong.json"
    script.write_text(
        json.dumps(
            {
                "restart_each_message": True,
                "turns": [{"code": ping}, {"text": "sent"}],
                "child": {"restart_each_message": True, "turns": [{"code": pong}, {"text": "ok"}]},
            }
        )
    )
    done = cli(tmp_path, "run", "--mode", "json", "--max-turns", "4", "--script", str(script), "go")
    assert done.returncode == 1
    end = json_lines(done.stdout)[-1]
    assert end["ok"] is False
    assert "ran 4 turns in this run (--max-turns)" in end["error"]


def test_a_script_that_cannot_be_read_is_one_plain_line(tmp_path: Path) -> None:
    done = cli(tmp_path, "run", "--script", str(tmp_path / "nowhere.json"), "hi")
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert lines == [f"prime-agent-lab: the script file {tmp_path / 'nowhere.json'} is missing"]


def test_a_run_cut_by_the_iteration_limit_names_the_flag_that_sets_it(
    tmp_path: Path, agent_script: Any
) -> None:
    script = agent_script([{"code": "x = 1"}, {"code": "x = 2"}, {"text": "never"}])
    done = cli(tmp_path, "run", "--script", script, "--max-iterations", "2", "go")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "prime-agent-lab: Stopped after 2 model calls in one turn (--max-iterations)."
    )
