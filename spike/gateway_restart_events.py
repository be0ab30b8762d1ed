"""Spike for issue 20 (may be deleted): what a websocket client of a Kernel Gateway kernel sees
when the kernel is restarted through the gateway's API, and when its process is killed (the
gateway's own auto-restart). Run as root: nice -n 19 python spike/gateway_restart_events.py
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import threading
import time
import urllib.request
import uuid

import websocket

USER = "gwkernel"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> None:
    token, port = secrets.token_hex(16), free_port()
    cmd = (
        f"cd /home/gwkernel/work && exec /opt/gwspike/kg/bin/jupyter kernelgateway "
        f"--KernelGatewayApp.ip=127.0.0.1 --KernelGatewayApp.port={port} "
        f"--KernelGatewayApp.auth_token={token} --JupyterWebsocketPersonality.list_kernels=True"
    )
    gw = subprocess.Popen(
        ["su", "-", USER, "-c", cmd],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"token {token}", "Content-Type": "application/json"}

    def call(path: str, method: str = "GET", body: object = None) -> object:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(base + path, data=data, method=method, headers=headers)
        with urllib.request.urlopen(req, timeout=60) as r:
            raw = r.read()
        return json.loads(raw) if raw else None

    try:
        for _ in range(200):
            try:
                call("/api/kernelspecs")
                break
            except OSError:
                time.sleep(0.2)
        kernel = call("/api/kernels", "POST", {"name": "python3"})
        kid = kernel["id"]
        ws = websocket.create_connection(
            f"ws://127.0.0.1:{port}/api/kernels/{kid}/channels",
            header=[f"Authorization: token {token}"],
        )
        t0 = time.monotonic()
        seen: list[str] = []

        def read() -> None:
            while True:
                try:
                    msg = json.loads(ws.recv())
                except Exception as exc:  # closed
                    seen.append(f"{time.monotonic() - t0:6.2f}s websocket ended: {exc!r}")
                    return
                kind = msg.get("msg_type") or msg.get("header", {}).get("msg_type")
                if kind == "status":
                    state = msg["content"]["execution_state"]
                    seen.append(
                        f"{time.monotonic() - t0:6.2f}s {msg.get('channel')} status {state}"
                    )
                elif kind in ("execute_reply", "stream"):
                    content = msg["content"]
                    shown = content.get("text", content.get("status"))
                    seen.append(f"{time.monotonic() - t0:6.2f}s {kind} {shown!r}")

        threading.Thread(target=read, daemon=True).start()

        def execute(code: str) -> None:
            ws.send(
                json.dumps(
                    {
                        "channel": "shell",
                        "header": {
                            "msg_id": uuid.uuid4().hex,
                            "msg_type": "execute_request",
                            "username": "",
                            "session": "spike",
                            "version": "5.3",
                        },
                        "parent_header": {},
                        "metadata": {},
                        "content": {"code": code, "silent": False},
                    }
                )
            )

        execute("import os; print(os.getpid())")
        time.sleep(3)
        seen.append(f"{time.monotonic() - t0:6.2f}s --- POST /api/kernels/{kid}/restart")
        call(f"/api/kernels/{kid}/restart", "POST", {})
        time.sleep(3)
        execute("import os; print(os.getpid())")
        time.sleep(3)
        pid = subprocess.run(
            ["pgrep", "-u", USER, "-f", "ipykernel_launcher"], capture_output=True, text=True
        ).stdout.split()
        seen.append(f"{time.monotonic() - t0:6.2f}s --- SIGKILL kernel process {pid}")
        for p in pid:
            os.kill(int(p), signal.SIGKILL)
        time.sleep(8)
        execute("import os; print(os.getpid())")
        time.sleep(3)
        seen.append(f"gateway model after: {call(f'/api/kernels/{kid}')}")
        print("\n".join(seen))
        ws.close()
    finally:
        os.killpg(gw.pid, signal.SIGTERM)
        gw.wait(20)
        left = subprocess.run(["pgrep", "-u", USER], capture_output=True, text=True).stdout.split()
        for p in left:
            os.kill(int(p), signal.SIGKILL)
        print("gateway user's processes left:", left)


if __name__ == "__main__":
    main()
