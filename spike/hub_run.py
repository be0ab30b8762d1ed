"""Spike for issue 20 (may be deleted): a real JupyterHub (SimpleLocalProcessSpawner, the dummy
authenticator, configurable-http-proxy from npm) with two users whose servers load this
extension; times the steps and checks /prime-agent/api/info per user, and each user's token on
the other's route.

    nice -n 19 python spike/hub_run.py
Every process it starts is stopped at the end (the Hub stops the user servers and the proxy).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SPIKE = Path("/opt/gwspike")
BASE = SPIKE / "run-hub"
HUB_VENV = SPIKE / "hub"
CHP = SPIKE / "chp" / "node_modules" / ".bin" / "configurable-http-proxy"
USERS = ("alice", "bob")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def call(url: str, token: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url,
        data=data,
        method=method,
        headers={"Authorization": f"token {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")[:300]


def main() -> None:
    shutil.rmtree(BASE, ignore_errors=True)
    BASE.mkdir(parents=True)
    service_token = secrets.token_hex(16)
    port, hub_port, api_port = free_port(), free_port(), free_port()
    script = BASE / "script.json"
    script.write_text(
        json.dumps({"turns": [{"code": "print(6*7)"}, {"text": "{last_output_line}"}]})
    )
    config = BASE / "jupyterhub_config.py"
    config.write_text(
        f"""
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub_port}
c.JupyterHub.db_url = "sqlite:///{BASE}/hub.sqlite"
c.JupyterHub.cookie_secret_file = "{BASE}/cookie_secret"
c.JupyterHub.pid_file = "{BASE}/hub.pid"
c.ConfigurableHTTPProxy.command = ["nice", "-n", "19", "{CHP}"]
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{api_port}"
c.ConfigurableHTTPProxy.pid_file = "{BASE}/proxy.pid"
c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.allowed_users = {set(USERS)!r}
c.JupyterHub.spawner_class = "simple"
c.Spawner.home_dir_template = "{BASE}/home/{{username}}"
c.Spawner.cmd = ["nice", "-n", "19", "{HUB_VENV}/bin/jupyterhub-singleuser"]
c.Spawner.args = [
    "--ServerApp.allow_root=True",
    "--PrimeAgentLab.provider=scripted",
    "--PrimeAgentLab.script_path={script}",
]
c.Spawner.environment = {{
    "PYTHONPATH": "{REPO}:{REPO / "kernel_ext"}",
    "JUPYTER_CONFIG_DIR": "{BASE}/config",
}}
c.Spawner.start_timeout = 180
c.Spawner.http_timeout = 180
c.JupyterHub.services = [{{"name": "spike", "api_token": "{service_token}"}}]
c.JupyterHub.load_roles = [{{
    "name": "spike", "services": ["spike"],
    "scopes": ["admin:users", "admin:servers", "tokens", "access:servers", "list:users"],
}}]
"""
    )
    (BASE / "config").mkdir()
    (BASE / "config" / "jupyter_server_config.json").write_text(
        # The hub venv's sys.prefix is not the machine's, so the machine's
        # etc/jupyter/jupyter_server_config.d (which enables these) is not read.
        json.dumps(
            {
                "ServerApp": {
                    "jpserver_extensions": {
                        "prime_agent_lab": True,
                        "jupyter_server_ydoc": True,
                        "jupyter_server_fileid": True,
                    }
                }
            }
        )
    )
    log = open(BASE / "hub.log", "wb")  # noqa: SIM115 (held by a child process)
    t0 = time.monotonic()
    hub = subprocess.Popen(
        ["nice", "-n", "19", str(HUB_VENV / "bin" / "jupyterhub"), "-f", str(config)],
        cwd=BASE,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, "PATH": f"{HUB_VENV}/bin:{os.environ['PATH']}"},
    )
    hub_api = f"http://127.0.0.1:{port}/hub/api"
    try:
        while time.monotonic() - t0 < 120:
            try:
                status, _ = call(f"{hub_api}/users", service_token)
                if status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.3)
        print(f"hub + proxy answering in {time.monotonic() - t0:.1f}s")
        tokens: dict[str, str] = {}
        for user in USERS:
            print(user, "create:", call(f"{hub_api}/users/{user}", service_token, "POST")[0])
        t1 = time.monotonic()
        for user in USERS:
            print(
                user,
                "spawn request:",
                call(f"{hub_api}/users/{user}/server", service_token, "POST", {})[0],
            )
        ready: dict[str, float] = {}
        while len(ready) < len(USERS) and time.monotonic() - t1 < 240:
            for user in USERS:
                if user in ready:
                    continue
                status, model = call(f"{hub_api}/users/{user}", service_token)
                server = (model or {}).get("servers", {}).get("", {}) if status == 200 else {}
                if server.get("ready"):
                    ready[user] = time.monotonic() - t1
                    print(f"  {user}'s server ready {ready[user]:.1f}s after the spawn requests")
            time.sleep(0.5)
        for user in USERS:
            status, body = call(
                f"{hub_api}/users/{user}/tokens",
                service_token,
                "POST",
                {"note": "spike", "expires_in": 600},
            )
            tokens[user] = body["token"] if status in (200, 201) else ""
            print(user, "token:", status)
        for user in USERS:
            for caller in USERS:
                url = f"http://127.0.0.1:{port}/user/{user}/prime-agent/api/info"
                t2 = time.monotonic()
                status, body = call(url, tokens[caller])
                print(
                    f"GET /user/{user}/prime-agent/api/info with {caller}'s token: {status} "
                    f"({time.monotonic() - t2:.2f}s) {json.dumps(body)[:200]}"
                )
        sessions: dict[str, str] = {}
        for user in USERS:
            base = f"http://127.0.0.1:{port}/user/{user}/"
            status, _ = call(
                base + "api/contents/analysis.ipynb",
                tokens[user],
                "PUT",
                {
                    "type": "notebook",
                    "format": "json",
                    "content": {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5},
                },
            )
            t2 = time.monotonic()
            status, info = call(
                base + "prime-agent/api/sessions",
                tokens[user],
                "POST",
                {"notebook_path": "analysis.ipynb"},
            )
            print(f"{user} attach: {status} ({time.monotonic() - t2:.1f}s)")
            sessions[user] = info["session_id"] if status == 200 else ""
            call(
                base + f"prime-agent/api/sessions/{sessions[user]}/messages",
                tokens[user],
                "POST",
                {"text": "go"},
            )
        for user in USERS:
            base = f"http://127.0.0.1:{port}/user/{user}/"
            t2 = time.monotonic()
            while time.monotonic() - t2 < 120:
                status, info = call(
                    base + f"prime-agent/api/sessions/{sessions[user]}", tokens[user]
                )
                if status == 200 and info.get("turns", 0) >= 1 and info.get("status") == "idle":
                    break
                time.sleep(0.5)
            log = (
                BASE
                / "home"
                / user
                / ".prime-agent"
                / "sessions"
                / sessions[user]
                / "session.jsonl"
            )
            results = (
                [json.loads(line) for line in log.read_text().splitlines()[1:]]
                if log.exists()
                else []
            )
            answer = [e.get("final_text") for e in results if e.get("type") == "turn_end"]
            where = "found" if log.exists() else f"not at {log}"
            print(f"{user}'s agent answered: {answer} (session log {where})")
        other = {"alice": "bob", "bob": "alice"}
        for user in USERS:
            base = f"http://127.0.0.1:{port}/user/{user}/"
            for route in (f"prime-agent/api/sessions/{sessions[user]}", "prime-agent/api/sessions"):
                status, body = call(base + route, tokens[other[user]])
                print(f"GET /user/{user}/{route} with {other[user]}'s token: {status}")
            status, body = call(
                base + f"prime-agent/api/sessions/{sessions[user]}/messages",
                tokens[other[user]],
                "POST",
                {"text": "hijack"},
            )
            print(f"POST /user/{user}/.../messages with {other[user]}'s token: {status}")
        print(f"total {time.monotonic() - t0:.1f}s")
    finally:
        os.killpg(hub.pid, signal.SIGTERM)
        try:
            hub.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(hub.pid, signal.SIGKILL)
        print("--- hub log (warnings/errors) ---")
        for line in (BASE / "hub.log").read_text(errors="replace").splitlines():
            if any(w in line for w in ("[W ", "[E ", "Error", "Traceback", "EBADENGINE")):
                print("  ", line[:300])


if __name__ == "__main__":
    main()
