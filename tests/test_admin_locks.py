"""Settings the administrator locks (`locked_settings`, docs/jupyterhub.md, docs/gateway.md 2.6)
on a real jupyter_server reading real config files: the administrator's folder (jupyter's
system config path) against the user's own config folder and the server's command line. A
locked value wins with a warning naming it; at runtime a permission mode, a model or an
autonomy budget past the lock is refused (403); a lock anywhere else is not a lock."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from prime_agent_lab.jupyter.admin_locks import admin_files

from .lab_process import free_port, server_exit, write_json

ADMIN = {
    "provider": "scripted",
    "model": None,
    "subagent_models": ["scripted/second"],
    "max_permission": "ask",
    "autonomous_max_tokens": 5000,
    "autonomous_max_turns": 4,
    "locked_settings": [
        "provider",
        "model",
        "subagent_models",
        "max_permission",
        "autonomous_max_tokens",
        "autonomous_max_turns",
    ],
}
USER = {  # what a user's own config tries: each one past the administrator's lock
    "subagent_models": ["scripted/second", "openai/gpt-4.1"],
    "max_permission": "auto",
    "autonomous_max_tokens": 900_000,
    "autonomous_timeout": 5.0,  # not locked: the user's value stands
    "locked_settings": [],
}


@pytest.fixture
def prime_agent_config(jp_system_config_path: Path, jp_config_dir: Path) -> dict[str, Any]:
    """The administrator's file and the user's, both read by the server as it starts."""
    write_json(jp_system_config_path / "jupyter_server_config.json", {"PrimeAgentLab": ADMIN})
    write_json(jp_config_dir / "jupyter_server_config.json", {"PrimeAgentLab": USER})
    return {"autonomous_max_turns": 50}  # as the command line would: locked, not used


async def _call(jp_fetch: Any, *route: str, method: str = "GET", body: Any = None) -> Any:
    try:
        response = await jp_fetch(
            "prime-agent",
            *route,
            method=method,
            body=None if body is None else json.dumps(body),
        )
    except HTTPClientError as exc:
        assert exc.response is not None
        return exc.code, json.loads(exc.response.body or b"{}").get("message", "")
    return response.code, json.loads(response.body)


async def test_locked_settings_win_over_the_users_config_and_the_command_line(
    jp_fetch: Any, host: Any
) -> None:
    settings = host.settings
    assert settings.locked_settings == tuple(ADMIN["locked_settings"])
    assert settings.max_permission == "ask"
    assert settings.subagent_models == ("scripted/second",)
    assert settings.autonomous_max_tokens == 5000
    assert settings.autonomous_max_turns == 4
    assert settings.autonomous_timeout == 5.0  # the user's own, where nothing is locked
    status, info = await _call(jp_fetch, "api", "info")
    assert status == 200
    assert info["locked_settings"] == ADMIN["locked_settings"]


async def test_runtime_choices_past_a_lock_are_refused_naming_it(
    jp_fetch: Any, host: Any, make_notebook: Any
) -> None:
    status, attached = await _call(
        jp_fetch, "api", "sessions", method="POST", body={"notebook_path": make_notebook()}
    )
    assert status == 200, attached
    session = ("api", "sessions", attached["session_id"])

    status, message = await _call(
        jp_fetch, *session, "permission", method="PUT", body={"mode": "auto"}
    )
    assert status == 403
    assert "c.PrimeAgentLab.max_permission, locked by the administrator" in message
    status, _ = await _call(jp_fetch, *session, "permission", method="PUT", body={"mode": "ask"})
    assert status == 200

    status, message = await _call(
        jp_fetch, *session, "model", method="POST", body={"model": "openai/gpt-4.1"}
    )
    assert status == 403
    assert "locked by the administrator" in message and "scripted/second" in message
    status, models = await _call(
        jp_fetch, *session, "model", method="POST", body={"model": "second"}
    )
    assert status == 200 and models["current"] == "scripted/second"
    with pytest.raises(ValueError, match="locked by the administrator"):  # rlm(..., model=...)
        host.runtime.environment.provider("openai/gpt-4.1")

    too_much = {"enabled": True, "budgets": {"max_tokens": 5001}}
    status, message = await _call(jp_fetch, *session, "autonomy", method="PUT", body=too_much)
    assert status == 403
    assert message == (
        "budgets.max_tokens: 5001 is above 5000, the limit of "
        "c.PrimeAgentLab.autonomous_max_tokens, locked by the administrator"
    )
    within = {"enabled": True, "budgets": {"max_tokens": 4000, "timeout_minutes": 60}}
    status, state = await _call(jp_fetch, *session, "autonomy", method="PUT", body=within)
    assert status == 200, state
    assert state["budgets"]["max_tokens"] == 4000
    assert state["budgets"]["timeout_minutes"] == 60  # autonomous_timeout is not locked


def test_a_switch_recorded_before_the_lock_is_held_to_it(host: Any) -> None:
    """A session whose switch was recorded with a larger budget comes back within the lock."""
    entry = {
        "event": "configured",
        "enabled": True,
        "gates": [],
        "budgets": {"max_tokens": 70_000, "max_turns": 2},
    }
    config = host.runtime.autonomy._recorded(entry, default=None)
    assert config.enabled is True
    assert (config.budgets.max_tokens, config.budgets.max_turns) == (5000, 2)


# ---------------------------------------------------------------- a server of its own


def _environment(base: Path) -> dict[str, str]:
    """A user with a home and config folder of their own, and an administrator's folder."""
    (base / "root").mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        "HOME": str(base / "home"),
        "JUPYTER_CONFIG_DIR": str(base / "home" / ".jupyter"),
        "JUPYTER_CONFIG_PATH": str(base / "admin"),
        "JUPYTER_DATA_DIR": str(base / "home" / "data"),
        "JUPYTER_RUNTIME_DIR": str(base / "runtime"),
        "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).resolve().parents[1] / p) for p in ("", "kernel_ext")]
        ),
    }


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path, str]]:
    """A `jupyter server` whose administrator locks `max_permission` and whose user and command
    line both try to raise it; its process, log and URL."""
    write_json(
        tmp_path / "admin" / "jupyter_server_config.json",
        {"PrimeAgentLab": {"max_permission": "plan", "locked_settings": ["max_permission"]}},
    )
    write_json(
        tmp_path / "home" / ".jupyter" / "jupyter_server_config.json",
        {
            "ServerApp": {"jpserver_extensions": {"prime_agent_lab": True}},
            "PrimeAgentLab": {"max_permission": "ask", "locked_settings": []},
        },
    )
    port, token, log = free_port(), "t0ken", tmp_path / "server.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyter",
                "server",
                "--no-browser",
                "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={port}",
                "--ServerApp.port_retries=0",
                "--ServerApp.allow_root=True",
                f"--ServerApp.root_dir={tmp_path / 'root'}",
                f"--IdentityProvider.token={token}",
                "--PrimeAgentLab.max_permission=auto",
            ],
            cwd=tmp_path / "root",
            env=_environment(tmp_path),
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
    try:
        yield process, log, f"http://127.0.0.1:{port}/prime-agent/api/info?token={token}"
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def test_a_server_logs_each_value_its_lock_replaces_naming_the_setting(
    own_server: tuple[subprocess.Popen[str], Path, str],
) -> None:
    import urllib.request

    process, log, url = own_server
    deadline, info = time.monotonic() + 120, None
    while info is None and time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                info = json.loads(response.read())
        except OSError:
            time.sleep(0.25)  # polling the port until the server listens
    text = log.read_text()
    assert info is not None, text[-3000:]
    assert info["locked_settings"] == ["max_permission"]
    assert (
        "c.PrimeAgentLab.max_permission is locked by the administrator to 'plan' "
        f"({Path(log.parent / 'admin' / 'jupyter_server_config.json').resolve()}); the value "
        "'auto' given by your config or the command line is not used"
    ) in text
    assert "settings locked by the administrator" in text


def test_a_lock_naming_no_setting_stops_the_server_naming_it(tmp_path: Path) -> None:
    write_json(
        tmp_path / "admin" / "jupyter_server_config.json",
        {"PrimeAgentLab": {"locked_settings": ["max_permision"]}},
    )
    write_json(
        tmp_path / "home" / ".jupyter" / "jupyter_server_config.json",
        {"ServerApp": {"jpserver_extensions": {"prime_agent_lab": True}}},
    )
    done = server_exit(tmp_path / "root", env=_environment(tmp_path))
    assert done.returncode == 1, done.stderr[-3000:]
    assert (
        "Prime Agent Lab cannot start: c.PrimeAgentLab.locked_settings "
        f"({(tmp_path / 'admin' / 'jupyter_server_config.json').resolve()}) names "
        "'max_permision', which is not a setting of the server"
    ) in done.stderr


def test_a_lock_in_the_users_own_config_locks_nothing(tmp_path: Path) -> None:
    """The user's folder is no administrator's: a `locked_settings` there is ignored, said."""
    write_json(
        tmp_path / "home" / ".jupyter" / "jupyter_server_config.json",
        {
            "ServerApp": {"jpserver_extensions": {"prime_agent_lab": True}},
            "PrimeAgentLab": {"locked_settings": ["max_permission"], "cell_timeout": -1},
        },
    )
    # cell_timeout out of bounds stops the server once the locks are applied: the log is whole.
    done = server_exit(tmp_path / "root", env=_environment(tmp_path))
    assert done.returncode == 1, done.stderr[-3000:]
    assert (
        "c.PrimeAgentLab.locked_settings is read only from the administrator's config folders"
        in done.stderr
    )
    assert "the value ['max_permission'] given elsewhere is not used" in done.stderr


def test_only_json_files_in_folders_outside_the_users_home_are_the_administrators(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Python config file is not run again; the user's config folder, and any folder in the
    user's home (a venv of theirs on `JUPYTER_CONFIG_PATH`), are not the administrator's."""
    admin, home = tmp_path / "admin", tmp_path / "home"
    user, own_venv = home / ".jupyter", home / "venv" / "etc" / "jupyter"
    for folder in (admin, user, own_venv):
        folder.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(user))
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", os.pathsep.join([str(admin), str(own_venv)]))
    loaded = [
        str(folder / name)
        for folder in (admin, user, own_venv)
        for name in ("jupyter_server_config.py", "jupyter_server_config.json")
    ]
    assert admin_files(loaded) == [(admin / "jupyter_server_config.json").resolve()]
