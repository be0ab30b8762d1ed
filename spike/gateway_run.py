"""Spike for issue 20 (may be deleted): a Kernel Gateway as another Unix user, a jupyter server
with this extension pointed at it, one agent attached over REST on the scripted provider.

Run as root from the worktree (PYTHONPATH set to it):
    nice -n 19 python spike/gateway_run.py [kg|eg]
Prints what it observes, step by step; every process it starts is stopped at the end.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SPIKE = Path("/opt/gwspike")
USER = "gwkernel"
USER_WORK = Path("/home/gwkernel/work")
FLAVOUR = sys.argv[1] if len(sys.argv) > 1 else "kg"
BASE = SPIKE / f"run-{FLAVOUR}"  # the server's folder (mode 700: the gateway user cannot read it)
ROOT = BASE / "root"
SESSIONS = BASE / "sessions"

SCRIPT: dict[str, Any] = {
    "turns": [
        {
            "code": (
                "import os, getpass, sys\n"
                "print('user', getpass.getuser(), 'cwd', os.getcwd(), 'exe', sys.executable)\n"
                "print('rlm bound:', 'rlm' in globals())\n"
                "x = {'answer': 42}\n"
                "print('x set')"
            )
        },
        {"text": "turn1 {last_output_line}"},
        {"code": "u = await rlm.usage()\nprint('bridge ok', type(u).__name__)"},
        {"text": "turn2 {last_output_line}"},
        {
            "code": (
                "print('after restart x =', globals().get('x'), 'rlm bound:', 'rlm' in globals())"
            )
        },
        {"text": "turn3 {last_output_line}"},
        {"code": "kid = await rlm('say hi', name='kid')\nprint('spawned', kid.name)"},
        {"text": "turn4 {last_output_line}"},
    ],
    "child": {"turns": [{"code": "print('child here')"}, {"text": "child done"}]},
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def call(url: str, token: str, method: str = "GET", body: Any = None, timeout: float = 30) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url,
        data=data,
        method=method,
        headers={"Authorization": f"token {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read()
        return json.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        return {"http_error": exc.code, "body": exc.read().decode(errors="replace")[:2000]}


def wait_for(check: Any, what: str, timeout: float = 120) -> Any:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        try:
            value = check()
        except (OSError, urllib.error.URLError):
            value = None
        if value:
            print(f"  [{time.monotonic() - start:.1f}s] {what}")
            return value
        time.sleep(0.3)
    print(f"  TIMEOUT after {timeout}s waiting for {what}")
    return None


def entries(session_id: str) -> list[dict[str, Any]]:
    log = SESSIONS / session_id / "session.jsonl"
    if not log.exists():
        return []
    out = []
    for line in log.read_text().splitlines()[1:]:
        with contextlib.suppress(json.JSONDecodeError):
            out.append(json.loads(line))
    return out


def show_turn(session_id: str, since: int) -> int:
    items = entries(session_id)
    for e in items[since:]:
        keep = {
            k: v
            for k, v in e.items()
            if k in ("type", "text", "observation", "stop_reason", "kind")
        }
        for key in ("observation", "text"):
            if isinstance(keep.get(key), str):
                keep[key] = keep[key][-500:]
        print("   ", json.dumps(keep)[:900])
    return len(items)


def turn_count(session_id: str) -> int:
    return sum(1 for e in entries(session_id) if e.get("type") == "turn_end")


def main() -> None:
    procs: list[subprocess.Popen[bytes]] = []
    shutil.rmtree(BASE, ignore_errors=True)
    ROOT.mkdir(parents=True)
    import nbformat

    nbformat.write(nbformat.v4.new_notebook(), ROOT / "analysis.ipynb")
    os.chmod(BASE, 0o700)
    check = subprocess.run(
        ["su", USER, "-c", f"ls {BASE}"], capture_output=True, text=True, check=False
    )
    print("gateway user reads the server folder?", check.returncode == 0, check.stderr.strip())

    gw_token = secrets.token_hex(16)
    gw_port = free_port()
    venv = SPIKE / FLAVOUR
    app = "kernelgateway" if FLAVOUR == "kg" else "enterprisegateway"
    cls = "KernelGatewayApp" if FLAVOUR == "kg" else "EnterpriseGatewayApp"
    gw_cmd = (
        f"cd {USER_WORK} && exec nice -n 19 {venv}/bin/jupyter {app} --{cls}.ip=127.0.0.1 "
        f"--{cls}.port={gw_port} --{cls}.auth_token={gw_token} --{cls}.port_retries=0 "
        + (
            " --JupyterWebsocketPersonality.list_kernels=True"
            if FLAVOUR == "kg"
            else f" --{cls}.list_kernels=True"
        )
    )
    gw_log = open(SPIKE / f"logs/gateway-{FLAVOUR}.log", "wb")  # noqa: SIM115 (held by a child process)
    t0 = time.monotonic()
    gw = subprocess.Popen(
        ["su", "-", USER, "-c", gw_cmd],
        stdout=gw_log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    procs.append(gw)
    gw_url = f"http://127.0.0.1:{gw_port}"
    wait_for(
        lambda: call(f"{gw_url}/api/kernelspecs", gw_token), "gateway answers /api/kernelspecs"
    )
    print(f"gateway up in {time.monotonic() - t0:.1f}s")
    print(
        "gateway kernelspecs:",
        list((call(f"{gw_url}/api/kernelspecs", gw_token) or {}).get("kernelspecs", {})),
    )

    token = secrets.token_hex(16)
    port = free_port()
    config = BASE / "config"
    config.mkdir()
    (config / "jupyter_server_config.json").write_text(
        json.dumps({"ServerApp": {"jpserver_extensions": {"prime_agent_lab": True}}})
    )
    (BASE / "script.json").write_text(json.dumps(SCRIPT))
    if os.environ.get("SPIKE_PATCH_CLIENT"):
        shutil.copy(REPO / "spike" / "gateway_client_patch.py", config / "jupyter_server_config.py")
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(config),
        "JUPYTER_DATA_DIR": str(BASE / "data"),
        "JUPYTER_RUNTIME_DIR": str(BASE / "runtime"),
        "PRIME_AGENT_LAB_SECRET_FILE": str(BASE / "data" / "signing_secret"),
        "PYTHONPATH": f"{REPO}:{REPO / 'kernel_ext'}",
        "PYTHONUNBUFFERED": "1",
    }
    server_log_path = BASE / "server.log"
    server_log = open(server_log_path, "wb")  # noqa: SIM115 (held by a child process)
    t0 = time.monotonic()
    server = subprocess.Popen(
        [
            "nice",
            "-n",
            "19",
            sys.executable,
            "-m",
            "jupyter_server",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={port}",
            "--ServerApp.port_retries=0",
            f"--ServerApp.root_dir={ROOT}",
            f"--IdentityProvider.token={token}",
            "--ServerApp.allow_root=True",
            f"--gateway-url={gw_url}",
            f"--GatewayClient.auth_token={gw_token}",
            "--GatewayClient.request_timeout=120",
            "--PrimeAgentLab.provider=scripted",
            f"--PrimeAgentLab.script_path={BASE / 'script.json'}",
            f"--PrimeAgentLab.sessions_dir={SESSIONS}",
            f"--BaseFileIdManager.db_path={BASE / 'fileid.db'}",
            f"--BaseFileIdManager.root_dir={ROOT}",
            f"--SQLiteYStore.db_path={BASE / 'ystore.db'}",
            *[a for a in sys.argv[2:] if a.startswith("--")],
        ],
        cwd=ROOT,
        env=env,
        stdout=server_log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    procs.append(server)
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_for(
            lambda: call(url + "prime-agent/api/info", token), "server + extension answer", 120
        )
        print(f"server up in {time.monotonic() - t0:.1f}s")
        print("gateway kernels before attach:", call(f"{gw_url}/api/kernels", gw_token))

        t0 = time.monotonic()
        attached = call(
            url + "prime-agent/api/sessions",
            token,
            "POST",
            {"notebook_path": "analysis.ipynb"},
            180,
        )
        print(f"attach took {time.monotonic() - t0:.1f}s ->", json.dumps(attached)[:600])
        session_id = attached.get("session_id") if isinstance(attached, dict) else None
        gw_kernels = call(f"{gw_url}/api/kernels", gw_token)
        print("gateway /api/kernels after attach:", json.dumps(gw_kernels)[:600])
        print("server /api/kernels:", json.dumps(call(url + "api/kernels", token))[:600])
        if not session_id:
            return
        seen = 0
        for n, text in enumerate(["start", "bridge"], 1):
            t0 = time.monotonic()
            call(
                url + f"prime-agent/api/sessions/{session_id}/messages",
                token,
                "POST",
                {"text": text},
            )
            wait_for(lambda n=n: turn_count(session_id) >= n, f"turn {n} ({text}) ended", 180)
            print(f" turn {n} took {time.monotonic() - t0:.1f}s")
            seen = show_turn(session_id, seen)
        kernel_id = attached.get("kernel_id")
        t0 = time.monotonic()
        if "server-restart" in sys.argv:  # as JupyterLab's Kernel menu does: through the server
            restarted = call(url + f"api/kernels/{kernel_id}/restart", token, "POST", {})
        else:  # on the gateway itself (its auto-restart after a death looks the same from here)
            restarted = call(f"{gw_url}/api/kernels/{kernel_id}/restart", gw_token, "POST", {})
        print(
            f"restart on the gateway ({time.monotonic() - t0:.1f}s):", json.dumps(restarted)[:300]
        )
        time.sleep(8)
        call(
            url + f"prime-agent/api/sessions/{session_id}/messages",
            token,
            "POST",
            {"text": "after restart"},
        )
        wait_for(lambda: turn_count(session_id) >= 3, "turn 3 (after restart) ended", 180)
        seen = show_turn(session_id, seen)
        t0 = time.monotonic()
        call(
            url + f"prime-agent/api/sessions/{session_id}/messages",
            token,
            "POST",
            {"text": "spawn"},
        )
        wait_for(lambda: turn_count(session_id) >= 4, "turn 4 (spawn) ended", 180)
        print(f" turn 4 took {time.monotonic() - t0:.1f}s")
        seen = show_turn(session_id, seen)
        time.sleep(5)
        if "spawn" in sys.argv:
            for i in range(2):
                t0 = time.monotonic()
                n = turn_count(session_id) + 1
                call(
                    url + f"prime-agent/api/sessions/{session_id}/messages",
                    token,
                    "POST",
                    {"text": f"spawn {i}"},
                )
                wait_for(lambda n=n: turn_count(session_id) >= n, f"spawn turn {i} ended", 180)
                print(f" spawn turn {i} took {time.monotonic() - t0:.1f}s")
                seen = show_turn(session_id, seen)
        print(
            "gateway /api/kernels after spawn:",
            json.dumps(call(f"{gw_url}/api/kernels", gw_token))[:900],
        )
        state = SESSIONS / session_id / "kernel-state"
        print("snapshot dir:", state, state.exists() and sorted(p.name for p in state.iterdir()))
        for child in SESSIONS.iterdir():
            if child.name != session_id:
                print(" child session", child.name)
                show_turn(child.name, 0)
        notebooks = sorted(str(p.relative_to(ROOT)) for p in ROOT.rglob("*.ipynb"))
        print("notebooks:", notebooks)
        user_files = subprocess.run(
            ["su", USER, "-c", f"find {USER_WORK} -maxdepth 3"], capture_output=True, text=True
        ).stdout
        print("gateway user's working folder:\n", user_files[:1500])

    finally:
        for proc in reversed(procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        # kernels the gateway started run as the gateway user, in its process group
        left = subprocess.run(["pgrep", "-u", USER], capture_output=True, text=True).stdout.split()
        print("gateway user's processes left:", left)
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        print("--- server log (errors/warnings) ---")
        for line in server_log_path.read_text(errors="replace").splitlines():
            if any(
                w in line
                for w in ("ERROR", "WARNING", "Traceback", "Error", "failed", "[W ", "[E ")
            ):
                print("  ", line[:400])


if __name__ == "__main__":
    main()
