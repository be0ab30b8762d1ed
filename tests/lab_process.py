"""A real `jupyter lab` in a subprocess, for the browser tests and the server crash tests.

The server runs from a base directory with its own root, config, data, runtime, settings and
workspace directories, so nothing on the machine (or a previous run) leaks in; starting it again
on the same base directory is a server restart (same root, sessions and stores). It loads the
labextension straight from this checkout's build output (`prime_agent_lab/labextension`), so a
stale copy installed by `pip install -e` cannot shadow the code under test.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
LABEXTENSION_BUILD = REPO / "prime_agent_lab" / "labextension"
SERVER_START_TIMEOUT = 90.0
LOG_TAIL_LINES = 150


class ServerDidNotStart(RuntimeError):
    pass


@dataclass
class LabServer:
    """A running `jupyter lab` and the paths it uses."""

    url: str  # base URL, ending in "/"
    token: str
    base: Path
    root_dir: Path
    log_path: Path
    process: subprocess.Popen[bytes]
    extra: dict[str, Any] = field(default_factory=dict)

    def api(self, method: str, path: str, body: Any = None, timeout: float = 10.0) -> Any:
        """Call the server's REST API with the token; returns decoded JSON (or None)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path.lstrip("/"),
            data=data,
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            payload = response.read()
        return json.loads(payload) if payload else None

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as exc:
            return f"(no server log: {exc})"
        return "\n".join(text.splitlines()[-lines:])

    def lab_url(self, path: str = "lab") -> str:
        return f"{self.url}{path}?token={self.token}"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))


def start_lab(
    base: Path,
    script: dict[str, Any],
    user_settings: dict[str, dict[str, Any]] | None = None,
    extra_args: tuple[str, ...] = (),
    provider: str = "scripted",
) -> LabServer:
    """Start `jupyter lab` on `base` (created if new, reused as it is otherwise) and wait until
    it and the Prime Agent routes answer. `script` is played when `provider` is "scripted"."""
    if not (LABEXTENSION_BUILD / "package.json").exists():
        raise ServerDidNotStart(
            f"The labextension is not built ({LABEXTENSION_BUILD} is missing): "
            "run `cd labextension && jlpm install && jlpm build:prod`."
        )
    root = base / "root"
    root.mkdir(parents=True, exist_ok=True)
    script_path = base / "script.json"
    write_json(script_path, script)

    # Serve this checkout's build, ahead of any installed copy (first path wins).
    link = base / "labextensions" / "@prime-agent-lab" / "labextension"
    if not link.is_symlink():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(LABEXTENSION_BUILD, target_is_directory=True)

    config_dir = base / "config"
    write_json(
        config_dir / "jupyter_server_config.json",
        {"ServerApp": {"jpserver_extensions": {"prime_agent_lab": True}}},
    )
    settings_dir = base / "settings"
    for plugin, values in (user_settings or {}).items():
        write_json(settings_dir / f"{plugin}.jupyterlab-settings", values)

    token = secrets.token_hex(16)
    runtime_dir = base / "runtime"
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        # The server binds a port the system picks and says which in its runtime file: a port
        # picked here and bound seconds later can be taken in between on a busy machine.
        "--ServerApp.port=0",
        f"--ServerApp.root_dir={root}",
        f"--IdentityProvider.token={token}",
        "--ServerApp.allow_root=True",
        f"--LabApp.user_settings_dir={settings_dir}",
        f"--LabApp.workspaces_dir={base / 'workspaces'}",
        f"--LabApp.extra_labextensions_path={base / 'labextensions'}",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        f"--SQLiteYStore.db_path={base / 'ystore.db'}",
        f"--BaseFileIdManager.db_path={base / 'fileid.db'}",
        f"--BaseFileIdManager.root_dir={root}",
        f"--PrimeAgentLab.provider={provider}",
        f"--PrimeAgentLab.script_path={script_path}",
        f"--PrimeAgentLab.sessions_dir={base / 'sessions'}",
        *extra_args,
    ]
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(config_dir),
        "JUPYTER_DATA_DIR": str(base / "data"),
        # the lab's own signing secret, where the lab finds it by default (docs/trust.md)
        "PRIME_AGENT_LAB_SECRET_FILE": str(base / "data" / "prime_agent_lab" / "signing_secret"),
        "JUPYTER_RUNTIME_DIR": str(runtime_dir),
        # The checkout's packages, for the server and for kernels it starts (they inherit it).
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(REPO), str(REPO / "kernel_ext"), os.environ.get("PYTHONPATH", "")) if p
        ),
        "PYTHONUNBUFFERED": "1",
    }
    log_path = base / "jupyter-lab.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            command,
            cwd=root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = LabServer(
        url="",  # known once the server has bound its port
        token=token,
        base=base,
        root_dir=root,
        log_path=log_path,
        process=process,
    )
    deadline = time.monotonic() + SERVER_START_TIMEOUT
    try:
        server.url = f"http://127.0.0.1:{_bound_port(server, runtime_dir, deadline)}/"
        _wait_until_serving(server, deadline)
    except BaseException:
        shutdown(server)
        raise
    return server


def _exited(server: LabServer) -> ServerDidNotStart:
    return ServerDidNotStart(
        f"jupyter lab exited with {server.process.returncode} before serving.\n"
        f"--- server log ---\n{server.log_tail()}"
    )


def _bound_port(server: LabServer, runtime_dir: Path, deadline: float) -> int:
    """The port the server bound, from the runtime file it writes once it has bound it."""
    info = runtime_dir / f"jpserver-{server.process.pid}.json"
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError, KeyError):
            return int(json.loads(info.read_text())["port"])
        if server.process.poll() is not None:
            raise _exited(server)
        time.sleep(0.1)
    raise ServerDidNotStart(
        f"jupyter lab wrote no runtime file within {SERVER_START_TIMEOUT:.0f}s.\n"
        f"--- server log ---\n{server.log_tail()}"
    )


def _wait_until_serving(server: LabServer, deadline: float) -> None:
    """Poll until the server and the Prime Agent routes answer, or fail with the log."""
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise _exited(server)
        try:
            server.api("GET", "api/status", timeout=2)
            server.api("GET", "prime-agent/api/info", timeout=2)
            return
        except (OSError, urllib.error.URLError) as exc:
            last_error = exc
            time.sleep(0.25)
    raise ServerDidNotStart(
        f"jupyter lab did not answer within {SERVER_START_TIMEOUT:.0f}s ({last_error}).\n"
        f"--- server log ---\n{server.log_tail()}"
    )


def shutdown(server: LabServer) -> None:
    """Shut kernels down through the API, then end the server's process group."""
    process = server.process
    if process.poll() is None:
        with contextlib.suppress(Exception):
            for kernel in server.api("GET", "api/kernels", timeout=5):
                server.api("DELETE", f"api/kernels/{kernel['id']}", timeout=10)
    for sig, grace in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 5.0)):
        if process.poll() is not None:
            break
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace)


def server_exit(
    root: Path, *options: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `jupyter server` in `root` with `options` (in `env`, else this environment) until it
    exits (a server that refuses to start); its return code and output. One that starts runs
    into the timeout."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "jupyter",
            "server",
            "--no-browser",
            "--ServerApp.port=0",
            "--ServerApp.allow_root=True",
            f"--ServerApp.root_dir={root}",
            *options,
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        env={**(os.environ if env is None else env), "JUPYTER_RUNTIME_DIR": str(root / "runtime")},
    )
