"""`prime-agent-lab lab` passes options of its own to `jupyter lab`; a user who gives one of them
too (`--ServerApp.allow_root=True` in a container) gets their value, not a traitlets error about
an option given twice."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from jupyterlab.labapp import LabApp

from prime_agent_lab import cli as cli_module

from .test_outcomes import free_port, popen_cli

STATE, DEMO = Path("/state"), "prime-agent-demo.ipynb"


def lab_config(argv: list[str]) -> dict[str, dict[str, object]]:
    """What `jupyter lab` makes of `argv` (its own command-line loader, no server started)."""
    app = LabApp()
    app.parse_command_line(argv)
    return {section: dict(values) for section, values in app.config.items()}


def lab_argv(cli_args: list[str], as_root: bool = False) -> tuple[list[str], list[str]]:
    """The CLI's own options for `lab ...cli_args`, and the extra arguments it passes on."""
    args, extra = cli_module._parser().parse_known_args(["lab", *cli_args])
    return cli_module._lab_options(args, extra, STATE, DEMO, as_root=as_root), extra


def test_a_users_allow_root_is_taken_once_and_wins() -> None:
    for given in (["--ServerApp.allow_root=False"], ["--ServerApp.allow_root", "False"]):
        options, extra = lab_argv(given, as_root=True)
        assert not any("allow_root" in option for option in options)
        assert lab_config(options + extra)["ServerApp"]["allow_root"] is False
    options, extra = lab_argv([], as_root=True)
    assert "--ServerApp.allow_root=True" in options
    assert lab_config(options + extra)["ServerApp"]["allow_root"] is True


@pytest.mark.parametrize(
    ("given", "section", "trait", "value"),
    [
        ("--PrimeAgentLab.provider=anthropic", "PrimeAgentLab", "provider", "anthropic"),
        ("--PrimeAgentLab.model=m2", "PrimeAgentLab", "model", "m2"),
        ("--PrimeAgentLab.script_path=/b.json", "PrimeAgentLab", "script_path", "/b.json"),
        ("--SQLiteYStore.db_path=/mine.db", "SQLiteYStore", "db_path", "/mine.db"),
        ("--BaseFileIdManager.db_path=/ids.db", "BaseFileIdManager", "db_path", "/ids.db"),
        ("--LabApp.default_url=/lab/tree/x.ipynb", "LabApp", "default_url", "/lab/tree/x.ipynb"),
        ("--PrimeAgentLab.step_delay=0", "PrimeAgentLab", "step_delay", "0"),
    ],
)
def test_any_option_the_cli_also_passes_is_the_users(
    given: str, section: str, trait: str, value: str, tmp_path: Path
) -> None:
    script = tmp_path / "a.json"
    script.write_text('{"turns": []}')
    options, extra = lab_argv(["--model", "m1", "--script-path", str(script), given])
    config = lab_config(options + extra)
    assert str(config[section][trait]) == value  # an extension's options stay text here
    spelled = given.split("=")[0]
    assert not any(option.startswith(spelled) for option in options)


def test_lab_starts_with_the_users_own_allow_root(tmp_path: Path) -> None:
    """The real command, as root in a container would type it (the CLI adds the flag as root)."""
    port = free_port()
    process = popen_cli(
        tmp_path,
        "lab",
        "--no-browser",
        f"--port={port}",
        "--ServerApp.ip=127.0.0.1",
        "--ServerApp.allow_root=True",
        start_new_session=True,
        env_extra={"JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "user-settings")},
    )
    assert process.stderr is not None
    lines: list[str] = []
    try:
        for line in process.stderr:
            lines.append(line)
            if f"127.0.0.1:{port}/" in line and "token=" in line:
                break
        assert process.poll() is None, "".join(lines)
        assert f"127.0.0.1:{port}/" in lines[-1], "".join(lines)
        assert not any("only accepts one value" in line for line in lines)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
        process.communicate(timeout=60)
