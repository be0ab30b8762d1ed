"""A script of one's own is not the demo: it is labelled with its file name (the panel's
`scripted · <file>`, the run's first line, the session list) and `lab` opens no demo notebook."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from prime_agent_lab import cli as cli_module
from prime_agent_lab.providers import make_provider
from prime_agent_lab.providers.scripted import DEFAULT_SCRIPT

from .test_cli import cli, json_lines


def test_a_custom_script_is_labelled_with_its_file_name_and_the_demo_stays_demo(
    tmp_path: Path,
) -> None:
    script = tmp_path / "tour.json"
    script.write_text(json.dumps({"turns": [{"text": "hi"}]}))
    assert make_provider("scripted", None, script_path=str(script)).model == "tour.json"
    assert make_provider("scripted", None, script_path=str(DEFAULT_SCRIPT)).model == "demo"
    assert make_provider("scripted", None).model == "demo"
    assert make_provider("scripted", "mine", script_path=str(script)).model == "mine"


def test_a_run_of_a_custom_script_names_it_as_the_model_everywhere(tmp_path: Path) -> None:
    (tmp_path / "tour.json").write_text(json.dumps({"turns": [{"text": "hi"}]}))
    done = cli(tmp_path, "run", "--mode", "json", "--script", "tour.json", "go")
    assert done.returncode == 0, done.stderr
    start = json_lines(done.stdout)[0]
    assert (start["type"], start["provider"], start["model"]) == (
        "run_start",
        "scripted",
        "tour.json",
    )
    listed = cli(tmp_path, "sessions")
    assert "scripted/tour.json" in listed.stdout and "scripted/demo" not in listed.stdout


class _Launch:
    """What `lab` would exec: recorded instead of replacing the test process."""

    def __init__(self) -> None:
        self.argv: list[str] | None = None

    def __call__(self, path: str, argv: list[str], env: dict[str, str]) -> None:
        self.argv = argv


@pytest.fixture
def launch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> _Launch:
    recorded = _Launch()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli_module.shutil, "which", lambda name: "/usr/bin/jupyter")
    monkeypatch.setattr(cli_module.os, "execve", recorded)
    return recorded


@pytest.mark.parametrize("how", ["--script", "server option"])
def test_lab_with_a_script_of_ones_own_creates_no_demo_notebook(
    launch: _Launch, tmp_path: Path, how: str
) -> None:
    (tmp_path / "tour.json").write_text(json.dumps({"turns": [{"text": "hi"}]}))
    words = ["--script", "tour.json"] if how == "--script" else []
    extra = [] if how == "--script" else ["--PrimeAgentLab.script_path=tour.json"]
    assert cli_module.main(["lab", *words, *extra]) == 0
    assert not (tmp_path / "prime-agent-demo.ipynb").exists()
    argv: list[Any] = launch.argv or []
    assert not any("default_url" in word or word.endswith(".ipynb") for word in argv), argv
    if how == "--script":
        assert f"--PrimeAgentLab.script_path={tmp_path / 'tour.json'}" in argv


def test_lab_without_a_script_still_opens_the_demo(launch: _Launch, tmp_path: Path) -> None:
    assert cli_module.main(["lab"]) == 0
    assert (tmp_path / "prime-agent-demo.ipynb").is_file()
    assert "prime-agent-demo.ipynb" in (launch.argv or [])


def test_lab_refuses_a_script_it_cannot_play_in_one_line(
    launch: _Launch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_module.main(["lab", "--script", "nowhere.json"]) == 2
    assert launch.argv is None
    assert capsys.readouterr().err == "prime-agent-lab: the script file nowhere.json is missing\n"
    assert not (tmp_path / "prime-agent-demo.ipynb").exists()
