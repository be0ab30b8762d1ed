"""A real JupyterHub for tests/test_jupyterhub.py: `SimpleLocalProcessSpawner`, the dummy
authenticator and configurable-http-proxy, all installed by `.ci/hub-setup` under
$PRIME_AGENT_HUB_DIR (default /opt/prime-agent-hub). Every wait is on a condition the Hub's API
or a route answers, with a generous deadline (the machine may be a loaded 2-core one); `stop`
ends every process the Hub started, the users' servers and their kernels included."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .lab_process import free_port

HUB_DIR = Path(os.environ.get("PRIME_AGENT_HUB_DIR", "/opt/prime-agent-hub"))
VENV = HUB_DIR / "venv"
PROXY = HUB_DIR / "proxy" / "node_modules" / ".bin" / "configurable-http-proxy"
IMAGE_CONFIG = VENV / "etc" / "jupyter" / "jupyter_server_config.json"  # the administrator's
HUB_START_TIMEOUT = 240.0  # Hub and proxy answering: 20 to 27 s measured under load
SPAWN_TIMEOUT = 360.0  # both single-user servers ready: 20 to 36 s measured under load


def missing_tools() -> str | None:
    """Why the Hub cannot run here (None: it can)."""
    for tool in (VENV / "bin" / "jupyterhub", VENV / "bin" / "jupyterhub-singleuser", PROXY):
        if not os.access(tool, os.X_OK):
            return f"{tool} is missing: run `bash .ci/hub-setup` first"
    if not IMAGE_CONFIG.is_file():
        return f"{IMAGE_CONFIG} is missing: run `bash .ci/hub-setup` first"
    return None


@dataclass
class Hub:
    url: str  # the proxy's public URL, ending in "/"
    service_token: str
    base: Path
    log_path: Path
    process: subprocess.Popen[bytes]
    environment: dict[str, str]  # what the Hub gives the users' servers
    tokens: dict[str, str] = field(default_factory=dict)  # each user's own API token
    timings: dict[str, float] = field(default_factory=dict)  # seconds per step, for the docs

    def call(
        self, path: str, token: str, method: str = "GET", body: Any = None, **headers: str
    ) -> tuple[int, Any]:
        """`path` under the proxy with `token` (empty: none); (status, JSON or text)."""
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body))
        request = urllib.request.Request(
            self.url + path.lstrip("/"),
            data=data.encode() if isinstance(data, str) else data,
            method=method,
            headers={"Content-Type": "application/json", **headers},
        )
        if token:
            request.add_header("Authorization", f"token {token}")
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, _decoded(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, _decoded(exc.read())

    def api(self, path: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
        """The Hub's REST API with the test's service token."""
        return self.call(f"hub/api/{path.lstrip('/')}", self.service_token, method, body)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def _decoded(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return raw.decode(errors="replace")[:500]


def write_config(
    base: Path,
    users: tuple[str, ...],
    environment: dict[str, str],
    args: list[str],
    service_token: str,
    extra_config: str = "",
) -> tuple[Path, int]:
    """The Hub's config file (`extra_config` at its end) and its public port."""
    port, hub_port, api_port = free_port(), free_port(), free_port()
    config = base / "jupyterhub_config.py"
    config.write_text(
        f"""
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub_port}
c.JupyterHub.db_url = "sqlite:///{base}/hub.sqlite"
c.JupyterHub.cookie_secret_file = "{base}/cookie_secret"
c.JupyterHub.pid_file = "{base}/hub.pid"
c.ConfigurableHTTPProxy.command = ["{PROXY}"]
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{api_port}"
c.ConfigurableHTTPProxy.pid_file = "{base}/proxy.pid"
c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.allowed_users = {set(users)!r}
c.JupyterHub.spawner_class = "simple"
c.Spawner.home_dir_template = "{base}/home/{{username}}"
c.Spawner.cmd = ["{VENV}/bin/jupyterhub-singleuser"]
c.Spawner.args = {["--ServerApp.allow_root=True", *args]!r}
c.Spawner.environment = {environment!r}
c.Spawner.start_timeout = {SPAWN_TIMEOUT:.0f}
c.Spawner.http_timeout = {SPAWN_TIMEOUT:.0f}
c.JupyterHub.services = [{{"name": "hub-test", "api_token": "{service_token}"}}]
c.JupyterHub.load_roles = [{{
    "name": "hub-test",
    "services": ["hub-test"],
    "scopes": ["admin:users", "admin:servers", "tokens", "access:servers", "list:users"],
}}]
"""
        + extra_config
    )
    return config, port


def start(
    base: Path,
    users: tuple[str, ...],
    environment: dict[str, str],
    args: list[str],
    extra_config: str = "",
) -> Hub:
    """Start the Hub (and its proxy) whose spawner gives the users' servers `environment` and
    `args`; wait until its API answers through the proxy."""
    base.mkdir(parents=True, exist_ok=True)
    token = secrets.token_hex(16)
    config, port = write_config(base, users, environment, args, token, extra_config)
    log_path = base / "hub.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [str(VENV / "bin" / "jupyterhub"), "-f", str(config)],
            cwd=base,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "PATH": f"{VENV / 'bin'}{os.pathsep}{os.environ['PATH']}"},
        )
    hub = Hub(f"http://127.0.0.1:{port}/", token, base, log_path, process, environment)
    try:
        wait_until(lambda: _answers(hub), HUB_START_TIMEOUT, "the Hub's API", hub)
    except BaseException:
        stop(hub)
        raise
    return hub


def _answers(hub: Hub) -> bool:
    with contextlib.suppress(OSError):
        return hub.api("users")[0] == 200
    return False


def wait_until(condition: Any, timeout: float, what: str, hub: Hub) -> Any:
    """Poll `condition` until it is true (its value) or `timeout` passes (fails with the Hub's
    log); a Hub that exits fails at once."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if hub.process.poll() is not None:
            raise AssertionError(
                f"the Hub exited ({hub.process.returncode}) while waiting for "
                f"{what}\n--- hub log ---\n{hub.log()[-6000:]}"
            )
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{what} not there within {timeout:.0f}s\n--- hub log ---\n{hub.log()[-6000:]}"
            )
        time.sleep(0.5)  # the next poll of the condition


def spawn(hub: Hub, users: tuple[str, ...]) -> dict[str, float]:
    """Start every user's server at once; wait until each is ready. Seconds to each ready."""
    started = time.monotonic()
    for user in users:
        status, answer = hub.api(f"users/{user}", "POST")
        assert status in (201, 409), (status, answer)
        status, answer = hub.api(f"users/{user}/server", "POST", {})
        assert status in (201, 202), (status, answer)
    ready: dict[str, float] = {}

    def all_ready() -> bool:
        for user in users:
            if user in ready:
                continue
            status, model = hub.api(f"users/{user}")
            server = (model or {}).get("servers", {}).get("", {}) if status == 200 else {}
            if server.get("ready"):
                ready[user] = time.monotonic() - started
        return len(ready) == len(users)

    wait_until(all_ready, SPAWN_TIMEOUT, "the users' servers", hub)
    for user in users:
        status, answer = hub.api(
            f"users/{user}/tokens", "POST", {"note": "hub test", "expires_in": 3600}
        )
        assert status in (200, 201), (status, answer)
        hub.tokens[user] = answer["token"]
    return ready


def _started_at(pid: int) -> str | None:
    """A process's start time (field 22 of its stat): with the pid, who it is."""
    with contextlib.suppress(OSError, IndexError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat[stat.rindex(")") + 2 :].split()[19]
    return None


def descendants(pid: int) -> list[tuple[int, str]]:
    """`pid`'s descendants now (from /proc), each with its start time."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = (entry / "stat").read_text()
            parent = int(stat[stat.rindex(")") + 2 :].split()[1])
            children.setdefault(parent, []).append(int(entry.name))
    found, queue = [], [pid]
    while queue:
        for child in children.get(queue.pop(0), []):
            started = _started_at(child)
            if started is not None:
                found.append((child, started))
            queue.append(child)
    return found


def stop(hub: Hub) -> None:
    """End the users' servers (SIGTERM: each shuts its kernels down, as on a Hub's stop), then
    the Hub (it stops the proxy); whatever the Hub started and is still alive is killed."""
    started = descendants(hub.process.pid)  # servers, kernels and proxy: each in its own session
    servers = [pid for pid, _ in started if _is_single_user_server(pid)]
    for pid in servers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 90
    while any(_alive(pid) for pid in servers) and time.monotonic() < deadline:
        time.sleep(0.5)  # the next look at whether the servers have exited
    if hub.process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(hub.process.pid, signal.SIGTERM)
        try:
            hub.process.wait(60)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(hub.process.pid, signal.SIGKILL)
            hub.process.wait(10)
    for pid, started_at in started:
        if _started_at(pid) == started_at:  # still that process, not a reused pid
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def _is_single_user_server(pid: int) -> bool:
    with contextlib.suppress(OSError):
        return b"jupyterhub-singleuser" in Path(f"/proc/{pid}/cmdline").read_bytes()
    return False


def _alive(pid: int) -> bool:
    """Running (a zombie has exited: its parent, the Hub, has not reaped it yet)."""
    with contextlib.suppress(OSError, IndexError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat[stat.rindex(")") + 2] != "Z"
    return False
