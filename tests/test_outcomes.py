"""Outcomes must be honest: what the CLI, the loop and a reopened session report is true."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat
import pytest

from prime_agent_lab import cli as cli_module
from prime_agent_lab.adapters.file_notebook import FileNotebook
from prime_agent_lab.core.events import EventBus
from prime_agent_lab.core.messages import ModelResponse
from prime_agent_lab.core.ports import OutputEvent, ProviderError
from prime_agent_lab.core.sessions import SessionRepository

from .fake_llm_server import FakeLLMServer
from .test_cli import ROOT, cli, cli_with_env, json_lines
from .test_core import ListProvider, call, make_agent


def write_script(directory: Path, turns: list[dict[str, Any]], **options: Any) -> str:
    path = directory / "script.json"
    path.write_text(json.dumps({"turns": turns, **options}))
    return str(path)


def session_types(directory: Path) -> list[str]:
    [log] = directory.glob(".prime-agent/sessions/*/session.jsonl")
    return [json.loads(line)["type"] for line in log.read_text().splitlines()[1:] if line]


def session_entries(directory: Path) -> list[dict[str, Any]]:
    [log] = directory.glob(".prime-agent/sessions/*/session.jsonl")
    return [json.loads(line) for line in log.read_text().splitlines()[1:] if line]


def popen_cli(
    cwd: Path, *args: str, env_extra: dict[str, str] | None = None, **kwargs: Any
) -> subprocess.Popen[str]:
    env = {**os.environ, **(env_extra or {})}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), str(ROOT / "kernel_ext"), env.get("PYTHONPATH", "")]
    )
    return subprocess.Popen(
        [sys.executable, "-m", "prime_agent_lab.cli", *args],
        cwd=cwd,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kwargs,
    )


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def cell_outputs_text(path: Path) -> str:
    """The stream output of every cell in the notebook file (not the sources)."""
    if not path.exists():
        return ""
    cells = nbformat.read(path, as_version=4).cells
    return "".join(o.get("text", "") for cell in cells for o in cell.get("outputs", []))


# ---------------------------------------------------------------- CLI numbers


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--cell-timeout", "-1"),
        ("--cell-timeout", "0"),
        ("--cell-timeout", "nan"),
        ("--output-cap", "-5"),
        ("--output-cap", "0"),
        ("--max-iterations", "0"),
        ("--max-iterations", "-3"),
    ],
)
def test_non_positive_cli_numbers_are_refused_with_a_clear_error(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli_module.main(["run", flag, value, "go"])
    assert exited.value.code == 2
    assert f"argument {flag}: must be a positive" in capsys.readouterr().err


# ---------------------------------------------------------------- kernels that cannot start


def test_an_unknown_kernel_fails_the_run_before_the_first_model_request(tmp_path: Path) -> None:
    with FakeLLMServer() as server:
        env = {"OPENAI_BASE_URL": server.openai_base_url, "OPENAI_API_KEY": "sk-fake-key-123"}
        done = cli_with_env(
            tmp_path, env, "run", "--provider", "openai", "--kernel", "no-such-kernel", "go"
        )
        assert server.requests == []
    assert done.returncode == 1
    assert "cannot start kernel 'no-such-kernel': no such kernel spec" in done.stderr
    assert "python3" in done.stderr  # the installed ones are named
    assert not (tmp_path / "agent.ipynb").exists()


def run_with_kernel_spec(tmp_path: Path, name: str, argv: list[str]) -> list[dict[str, Any]]:
    """`prime-agent-lab run --kernel NAME` with a kernel spec of that argv; its JSON lines.
    The run must fail, with a run_end that says the kernel could not start."""
    spec_dir = tmp_path / "jupyter" / "kernels" / name
    spec_dir.mkdir(parents=True)
    spec = {"argv": argv, "display_name": name, "language": "python"}
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    env = {"JUPYTER_PATH": str(tmp_path / "jupyter")}
    done = cli_with_env(tmp_path, env, "run", "--mode", "json", "--kernel", name, "go")
    assert done.returncode == 1, done.stdout
    records = json_lines(done.stdout)
    assert records[-1]["ok"] is False
    assert f"the kernel {name!r} could not start" in records[-1]["error"]
    return records


def test_a_kernel_that_cannot_be_launched_fails_the_run_before_any_model_request(
    tmp_path: Path,
) -> None:
    argv = [str(tmp_path / "no-such-python"), "-m", "ipykernel", "-f", "{connection_file}"]
    records = run_with_kernel_spec(tmp_path, "broken", argv)
    assert [r["type"] for r in records].count("assistant_message") == 0


def test_a_kernel_whose_boot_fails_ends_the_run_with_a_clear_error(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", "import sys; sys.exit(3)", "{connection_file}"]
    records = run_with_kernel_spec(tmp_path, "dies", argv)
    assert [r["type"] for r in records].count("assistant_message") == 1
    assert session_types(tmp_path)[-1] == "turn_end"


# ---------------------------------------------------------------- listeners and closed output


def test_a_failing_listener_is_isolated_from_emit_and_from_other_listeners() -> None:
    bus = EventBus("s")
    seen: list[str] = []

    def broken(_event: dict[str, Any]) -> None:
        raise BrokenPipeError("reader went away")

    bus.add_listener(broken)
    bus.add_listener(lambda event: seen.append(event["type"]))
    bus.emit("one")
    bus.emit("two")
    assert seen == ["one", "two"]


def test_a_listener_that_raises_cannot_end_a_turn_without_turn_end(tmp_path: Path) -> None:
    provider = ListProvider([ModelResponse(tool_calls=[call("x = 1")]), ModelResponse(text="ok")])
    agent, _ = make_agent(tmp_path, provider)
    ended: list[dict[str, Any]] = []

    def broken(event: dict[str, Any]) -> None:
        if event["type"] in ("assistant_message", "error"):
            raise BrokenPipeError

    agent.events.add_listener(broken)
    agent.events.add_listener(lambda e: ended.append(e) if e["type"] == "turn_ended" else None)
    outcome = asyncio.run(agent.run_turn("go"))
    assert (outcome.stop_reason, outcome.final_text) == ("end_turn", "ok")
    assert [e["type"] for e in agent.session.path()][-1] == "turn_end"
    assert [e["stop_reason"] for e in ended] == ["end_turn"]


def test_a_closed_stdout_stops_the_turn_cleanly_without_a_traceback(tmp_path: Path) -> None:
    flag = tmp_path / "go.flag"
    code = (
        "import os, time\n"
        "deadline = time.time() + 60\n"
        f"while not os.path.exists({str(flag)!r}) and time.time() < deadline:\n"
        "    time.sleep(0.02)\n"
        "print('after the reader left')"
    )
    script = write_script(tmp_path, [{"text": "Waiting.", "code": code}, {"text": "done"}])
    process = popen_cli(tmp_path, "run", "--mode", "json", "--script", script, "go")
    assert process.stdout is not None and process.stderr is not None
    first = json.loads(process.stdout.readline())
    assert first["type"] == "run_start"  # the stream opens with it (README, Headless)
    process.stdout.close()  # like `| head -1`
    flag.touch()  # only now does the cell print, and the CLI write again
    stderr = process.stderr.read()
    assert process.wait(timeout=90) == 1
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr
    assert "the output was closed, so the turn was stopped" in stderr
    entries = session_entries(tmp_path)
    assert entries[-1]["type"] == "turn_end"
    assert entries[-1]["stop_reason"] == "stopped"


# ---------------------------------------------------------------- SIGTERM, SIGKILL, recovery

SLOW_CELL = "import time\nprint('step 1 done', flush=True)\ntime.sleep(600)\nprint('never')"


def test_sigterm_stops_the_turn_as_terminated_and_keeps_the_partial_output(tmp_path: Path) -> None:
    script = write_script(tmp_path, [{"code": SLOW_CELL}, {"text": "never"}])
    process = popen_cli(tmp_path, "run", "--mode", "json", "--script", script, "go")
    notebook = tmp_path / "agent.ipynb"
    try:
        wait_until(lambda: "step 1 done" in cell_outputs_text(notebook), "the cell's first output")
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 1, (stdout, stderr)
    end = json_lines(stdout)[-1]
    assert end["type"] == "run_end" and end["error"] == "terminated by SIGTERM"
    assert "Traceback" not in stderr
    entries = session_entries(tmp_path)
    assert entries[-1]["type"] == "turn_end" and entries[-1]["stop_reason"] == "shutdown"
    [result] = [e for e in entries if e["type"] == "tool_result"]
    assert result["status"] == "interrupted"
    assert "The run was terminated (SIGTERM), which stopped the turn" in result["observation"]
    assert "user stopped" not in result["observation"]
    [cell] = nbformat.read(notebook, as_version=4).cells
    assert cell.outputs[0]["text"].startswith("step 1 done")


def test_ctrl_c_while_only_a_sub_agent_works_stops_it_and_the_run_reports_the_stop(
    tmp_path: Path,
) -> None:
    child_cell = "open('child.started', 'w').close()\nimport time\ntime.sleep(600)"
    script = write_script(
        tmp_path,
        [{"text": "Fan out.", "code": "await rlm('wait', name='slow')"}, {"text": "Waiting."}],
        child={"turns": [{"code": child_cell}, {"text": "never"}]},
    )
    process = popen_cli(tmp_path, "run", "--mode", "json", "--script", script, "go")
    try:
        wait_until(lambda: (tmp_path / "child.started").exists(), "the sub-agent's cell")
        process.send_signal(signal.SIGINT)  # the root's turn has ended; only the child runs
        stdout, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 1, (stdout, stderr)
    end = json_lines(stdout)[-1]
    assert end["type"] == "run_end" and end["ok"] is False
    assert end["error"] == "stopped by SIGINT"
    [child_log] = [
        log
        for log in tmp_path.glob(".prime-agent/sessions/*/session.jsonl")
        if '"slow"' in log.read_text().splitlines()[0]
    ]
    last = json.loads(child_log.read_text().splitlines()[-1])
    assert last["type"] == "turn_end" and last["stop_reason"] == "stopped"


def test_ctrl_c_while_the_cli_is_still_loading_stops_the_run_without_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from prime_agent_lab import headless

    loading = headless.HeadlessRun.__init__

    def interrupted_while_loading(self: Any, *args: Any, **kwargs: Any) -> None:
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C before the run has started anything
        loading(self, *args, **kwargs)

    monkeypatch.setattr(headless.HeadlessRun, "__init__", interrupted_while_loading)
    monkeypatch.chdir(tmp_path)
    script = write_script(tmp_path, [{"code": "x = 1"}, {"text": "done"}])
    try:
        code = cli_module.main(["run", "--mode", "json", "--script", script, "go"])
    except KeyboardInterrupt:
        pytest.fail("Ctrl-C while loading escaped as a KeyboardInterrupt traceback")
    assert code == 1
    end = json_lines(capsys.readouterr().out)[-1]
    assert end["type"] == "run_end" and end["error"] == "stopped by SIGINT"


def test_after_a_sigkill_mid_cell_the_model_is_told_the_cell_ran_partly_with_its_output(
    tmp_path: Path,
) -> None:
    script = write_script(tmp_path, [{"code": SLOW_CELL}, {"text": "{last_output}"}])
    process = popen_cli(
        tmp_path, "run", "--mode", "json", "--script", script, "go", start_new_session=True
    )
    notebook = tmp_path / "agent.ipynb"
    try:
        # The output reaches the file within about a second although the cell is still running.
        wait_until(lambda: "step 1 done" in cell_outputs_text(notebook), "the cell's first output")
    finally:
        os.killpg(process.pid, signal.SIGKILL)  # the CLI and its kernel, with no chance to clean
        process.communicate(timeout=30)
    assert "cell_started" in session_types(tmp_path)
    assert "turn_end" not in session_types(tmp_path)

    done = cli(tmp_path, "run", "--mode", "json", "--continue", "--script", script, "and now?")
    assert done.returncode == 0, done.stderr
    first = [r["type"] for r in json_lines(done.stdout)[:2]]
    assert first == ["run_start", "recovered"]  # the user hears of it too, before anything else
    told = json_lines(done.stdout)[-1]["final_text"]
    assert "step 1 done" in told
    assert "stopped while this cell was running" in told and "ran partly" in told
    assert "was not run" not in told
    interrupted = [e for e in session_entries(tmp_path) if e.get("status") == "interrupted"]
    assert [e["type"] for e in interrupted] == ["tool_result"]


async def test_reopening_without_the_notebook_still_says_the_cell_ran(tmp_path: Path) -> None:
    session = SessionRepository(tmp_path).create(notebook_path="gone.ipynb")
    session.append("user_message", text="go", turn=1)
    arguments = json.dumps({"code": "work()"})
    tool_calls = [{"id": "c1", "name": "python", "arguments": arguments}]
    session.append("assistant_message", turn=1, text="", tool_calls=tool_calls)
    session.append("cell_started", turn=1, tool_call_id="c1", cell_id="abc")
    notebook = FileNotebook(tmp_path / "other.ipynb", 1000)  # the cell is not in it
    from prime_agent_lab.core.recovery import close_interrupted_turn

    assert await close_interrupted_turn(session, notebook, output_cap=1000) == 1
    [message] = [m for m in session.context_messages() if m.role == "tool"]
    assert "ran partly" in message.text and "could not be read" in message.text
    assert session.path()[-1]["stop_reason"] == "interrupted"


async def test_the_file_notebook_writes_a_running_cells_output_within_a_second(
    tmp_path: Path,
) -> None:
    path = tmp_path / "n.ipynb"
    notebook = FileNotebook(path, 1000, flush_interval=0.2)
    cell = await notebook.append_code_cell("loop()", {})
    cell.set_running()
    for n in range(3):
        cell.apply(
            OutputEvent("output", {"output_type": "stream", "name": "stdout", "text": f"{n}\n"})
        )
    deadline = time.monotonic() + 10
    while "2\\n" not in path.read_text() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    [written] = nbformat.read(path, as_version=4).cells
    assert written.outputs[0]["text"] == "0\n1\n2\n"
    assert written.execution_count is None  # still running


# ---------------------------------------------------------------- retries


def test_a_retry_after_longer_than_the_backoff_cap_is_honoured(tmp_path: Path) -> None:
    provider = ListProvider(
        [
            ProviderError("slow down", kind="rate_limit", retryable=True, retry_after=0.3),
            ModelResponse(text="ok"),
        ]
    )
    agent, _ = make_agent(tmp_path, provider, retry_max_delay=0.01)
    delays: list[float] = []
    agent.events.add_listener(lambda e: delays.append(e["delay"]) if e["type"] == "retry" else None)
    outcome = asyncio.run(agent.run_turn("go"))
    assert outcome.final_text == "ok"
    assert delays == [0.3]


def test_a_retry_after_beyond_max_retry_after_ends_the_turn_at_once(tmp_path: Path) -> None:
    error = ProviderError("slow down", kind="rate_limit", retryable=True, retry_after=3600)
    agent, _ = make_agent(tmp_path, ListProvider([error]), max_retry_after=60)
    seen: list[str] = []
    agent.events.add_listener(lambda e: seen.append(e["type"]))
    outcome = asyncio.run(agent.run_turn("go"))  # waiting the hour would outlast the timeout
    assert outcome.stop_reason == "error" and "retry" not in seen
    assert "retry after 3600 s" in (outcome.error or "")


# ---------------------------------------------------------------- secrets


def test_a_kernel_the_cli_starts_has_no_provider_keys(tmp_path: Path) -> None:
    code = (
        "import os\n"
        "print([os.environ.get(k) for k in "
        "('OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'ANTHROPIC_AUTH_TOKEN')], "
        "os.environ.get('KEEP_ME'))"
    )
    script = write_script(tmp_path, [{"code": code}, {"text": "{last_output_line}"}])
    keys = {
        "OPENAI_API_KEY": "sk-test-4f9c2e7b1d0a8e6f",
        "ANTHROPIC_API_KEY": "sk-ant-test-77aa88bb99cc",
        "ANTHROPIC_AUTH_TOKEN": "tok-test-1234567890",
        "KEEP_ME": "visible",
    }
    done = cli_with_env(tmp_path, keys, "run", "--mode", "json", "--script", script, "env?")
    assert done.returncode == 0, done.stderr
    assert json_lines(done.stdout)[-1]["final_text"] == "[None, None, None] visible"


# ---------------------------------------------------------------- the first ten minutes


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def get_json_when_up(url: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=30) as response:
                return json.load(response)
        except urllib.error.URLError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_lab_prints_the_demo_notebooks_url_and_does_not_ask_about_news(tmp_path: Path) -> None:
    port = free_port()
    process = popen_cli(
        tmp_path,
        "lab",
        "--no-browser",
        f"--port={port}",
        "--ServerApp.ip=127.0.0.1",
        start_new_session=True,
        # this user's own JupyterLab settings (an answered news prompt) are not the question
        env_extra={"JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "user-settings")},
    )
    assert process.stderr is not None
    lines: list[str] = []
    try:
        for line in process.stderr:
            lines.append(line)
            if f"127.0.0.1:{port}/" in line and "token=" in line:
                break
        url_line = lines[-1]
        assert f"http://127.0.0.1:{port}/lab/tree/prime-agent-demo.ipynb?token=" in url_line
        token = url_line.split("token=")[1].split()[0]
        settings_url = (
            f"http://127.0.0.1:{port}/lab/api/settings/"
            f"@jupyterlab/apputils-extension:notification?token={token}"
        )
        settings = get_json_when_up(settings_url)
        # JupyterLab asks "notified about official Jupyter news?" only while this is "none".
        assert settings["schema"]["properties"]["fetchNews"]["default"] == "false"
        assert "fetchNews" not in settings["settings"]
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.communicate(timeout=60)
    assert (tmp_path / "prime-agent-demo.ipynb").is_file()


def test_lab_paces_the_scripted_demo_unless_told_otherwise() -> None:
    args = cli_module._parser().parse_args(["lab"])
    state, demo = Path("/state"), "prime-agent-demo.ipynb"
    options = cli_module._lab_options(args, [], state, demo)
    assert "--PrimeAgentLab.step_delay=1.0" in options
    own = cli_module._lab_options(args, ["--PrimeAgentLab.step_delay=0"], state, demo)
    assert not any("step_delay" in option for option in own)
    real = cli_module._parser().parse_args(["lab", "--provider", "anthropic"])
    assert not any("step_delay" in o for o in cli_module._lab_options(real, [], state, demo))


# ---------------------------------------------------------------- fenced code and images

ANSWER_WITH_EXAMPLE = "Done. To print it yourself:\n\n```python\nprint('hi')\n```\n"


def test_example_code_in_a_final_answer_is_not_run(tmp_path: Path) -> None:
    script = write_script(tmp_path, [{"code": "x = 1"}, {"text": ANSWER_WITH_EXAMPLE}])
    done = cli(tmp_path, "run", "--mode", "json", "--script", script, "go")
    assert done.returncode == 0, done.stderr
    records = json_lines(done.stdout)
    assert [r["type"] for r in records].count("cell_started") == 1
    assert records[-1]["final_text"] == ANSWER_WITH_EXAMPLE
    assert len(nbformat.read(tmp_path / "agent.ipynb", as_version=4).cells) == 1


def test_fenced_code_runs_only_when_asked_for(tmp_path: Path) -> None:
    script = write_script(tmp_path, [{"text": ANSWER_WITH_EXAMPLE}, {"text": "{last_output}"}])
    done = cli(tmp_path, "run", "--mode", "json", "--fenced-code", "--script", script, "go")
    assert done.returncode == 0, done.stderr
    assert json_lines(done.stdout)[-1]["final_text"] == "[stdout]\nhi"


PLOT = (
    "import base64\nfrom IPython.display import Image, display\n"
    "display(Image(data=base64.b64decode("
    "'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==')))"
)


@pytest.mark.parametrize(
    ("flags", "seen"),
    [
        ((), "<image/png image attached>"),
        (("--no-images",), "<image/png image shown in the notebook"),
    ],
)
def test_no_images_describes_plots_to_the_model_instead_of_sending_them(
    tmp_path: Path, flags: tuple[str, ...], seen: str
) -> None:
    script = write_script(tmp_path, [{"code": PLOT}, {"text": "{last_output}"}])
    done = cli(tmp_path, "run", "--mode", "json", *flags, "--script", script, "plot")
    assert done.returncode == 0, done.stderr
    assert seen in json_lines(done.stdout)[-1]["final_text"]
    [result] = [e for e in session_entries(tmp_path) if e["type"] == "tool_result"]
    assert ("images" in result) is (not flags)


# ---------------------------------------------------------------- the checkout stays clean


@pytest.mark.parametrize("name", ["prime-agent-demo.ipynb", "agent.ipynb", "sub/agent.ipynb"])
def test_notebooks_written_in_the_checkout_are_outside_lint_and_git(name: str) -> None:
    ugly = nbformat.v4.new_notebook()
    ugly.cells.append(nbformat.v4.new_code_cell("x=[1,2 ,3]\nprint( x )"))
    checked = subprocess.run(
        ["ruff", "format", "--check", "--force-exclude", "--stdin-filename", name],
        input=nbformat.writes(ugly),
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    if "/" not in name:  # root notebooks come from runs; notebooks elsewhere may be real sources
        ignored = subprocess.run(["git", "check-ignore", "-q", name], cwd=ROOT)
        assert ignored.returncode == 0


def test_the_notebook_records_the_kernel_it_ran_with_found_in_ipythons_xdg_folder(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    spec_dir = home / ".config" / "ipython" / "kernels" / "xdgkernel"
    spec_dir.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    spec = {"argv": argv, "display_name": "XDG Python", "language": "python"}
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    script = write_script(tmp_path, [{"code": "print(1)"}, {"text": "done"}])
    done = cli_with_env(
        tmp_path,
        {"HOME": str(home), "XDG_CONFIG_HOME": "", "IPYTHONDIR": "~/.ipython"},
        "run",
        "--mode",
        "json",
        "--kernel",
        "xdgkernel",
        "--script",
        script,
        "go",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    kernelspec = json.loads((tmp_path / "agent.ipynb").read_text())["metadata"]["kernelspec"]
    assert (kernelspec["name"], kernelspec["display_name"]) == ("xdgkernel", "XDG Python")
