"""Spike for issue 20 (may be deleted): does the headless CLI honour JUPYTER_GATEWAY_URL?
Starts a Kernel Gateway as gwkernel, runs `prime-agent-lab run` with the gateway variables set,
and prints which user ran the agent's cell and how many kernels the gateway started.
    nice -n 19 python spike/cli_gateway.py
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> None:
    token, port = secrets.token_hex(16), free_port()
    log = Path("/opt/gwspike/logs/gateway-cli.log")
    cmd = (
        f"cd /home/gwkernel/work && exec /opt/gwspike/kg/bin/jupyter kernelgateway "
        f"--KernelGatewayApp.ip=127.0.0.1 --KernelGatewayApp.port={port} "
        f"--KernelGatewayApp.auth_token={token} --JupyterWebsocketPersonality.list_kernels=True"
    )
    with log.open("wb") as out:
        gw = subprocess.Popen(
            ["su", "-", "gwkernel", "-c", cmd],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                req = urllib.request.Request(
                    url + "/api/kernelspecs", headers={"Authorization": f"token {token}"}
                )
                urllib.request.urlopen(req, timeout=5).read()
                break
            except OSError:
                time.sleep(0.2)
        with tempfile.TemporaryDirectory() as work:
            script = Path(work) / "script.json"
            code = "import getpass, os\nprint('cell ran as', getpass.getuser(), 'in', os.getcwd())"
            script.write_text(
                json.dumps({"turns": [{"code": code}, {"text": "{last_output_line}"}]})
            )
            env = {
                **os.environ,
                "PYTHONPATH": f"{REPO}:{REPO / 'kernel_ext'}",
                "JUPYTER_GATEWAY_URL": url,
                "JUPYTER_GATEWAY_AUTH_TOKEN": token,
            }
            t0 = time.monotonic()
            run = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "prime_agent_lab.cli",
                    "run",
                    "--provider",
                    "scripted",
                    "--script",
                    str(script),
                    "--notebook",
                    "cli.ipynb",
                    "go",
                ],
                cwd=work,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            print(f"CLI exit {run.returncode} in {time.monotonic() - t0:.1f}s")
            print("stdout:", run.stdout.strip()[-400:])
            print("stderr tail:", run.stderr.strip()[-400:])
        starts = sum("POST /api/kernels" in line for line in log.read_text().splitlines())
        print("kernel start requests the gateway received:", starts)
    finally:
        os.killpg(gw.pid, signal.SIGTERM)
        gw.wait(20)
        left = subprocess.run(["pgrep", "-u", "gwkernel"], capture_output=True, text=True).stdout
        for pid in left.split():
            os.kill(int(pid), signal.SIGKILL)


if __name__ == "__main__":
    main()
