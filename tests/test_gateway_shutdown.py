"""SIGTERM of a server whose kernels are on a real gateway, Kernel Gateway and Enterprise Gateway
(review 2, F2): the shutdown snapshot of a gateway kernel goes to the server over the bridge, so
it must be taken while the server still listens. The agent sets `x`, the user sets `y` in a cell
of their own over the kernel's websocket (as a notebook tab does, after the agent's last
snapshot), the server gets SIGTERM, a new server on the same folder and gateway reopens the
notebook: both are back."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from .gateway_fixtures import (
    KernelGateway,
    attach_agent,
    notebook_kernel,
    server_on_a_notebook,
    start_gateway_server,
)
from .lab_fixtures import NO_KERNEL_POOL
from .lab_process import LabServer, shutdown
from .test_gateway import run_over_channels, wait_until
from .test_gateway_restarts import send_and_wait

pytestmark = [pytest.mark.gateway, pytest.mark.timeout(420)]

SCRIPT: dict[str, Any] = {
    "turns": [
        {"code": "x = 42\nprint('x set')"},
        {"text": "DONE1"},
        {"code": "print('x', globals().get('x'), 'y', globals().get('y'))"},
        {"text": "DONE2 {last_output_line}"},
    ]
}
SUMMARY = re.compile(r"Prime Agent Lab shutdown: (.*) in ([0-9.]+) s")


def saved_names(session_log: Path) -> set[str]:
    try:
        manifest = json.loads((session_log.parent / "kernel-state" / "manifest.json").read_text())
    except (OSError, ValueError):
        return set()
    return {entry["name"] for entry in manifest["saved"]}


def users_cell(server: LabServer, kernel_id: str, code: str) -> str:
    """`code` run as a notebook tab runs it: over the server's websocket of the kernel, in the
    kernel's history (a cell outside it leaves the execution count, which tells the kernel's
    snapshot whether anything ran since the last one, as it was)."""
    url = f"ws://{server.url.removeprefix('http://')}api/kernels/{kernel_id}/channels"
    return run_over_channels(url, server.token, code, store_history=True)


def test_sigterm_saves_the_variables_of_a_gateway_kernel_set_since_the_last_turn(
    tmp_path: Path,
    any_gateway: KernelGateway,
) -> None:
    gateway = any_gateway
    base, server = server_on_a_notebook(tmp_path, gateway, SCRIPT, *NO_KERNEL_POOL)
    again: LabServer | None = None
    try:
        session_id, session_log = attach_agent(server, base)
        assert send_and_wait(server, session_id, session_log, "DONE1") == "DONE1"
        wait_until(lambda: saved_names(session_log) == {"x"}, "the after-turn snapshot", server)
        kernel_id = notebook_kernel(server)
        assert users_cell(server, kernel_id, "y = 7\nprint('y set')") == "y set\n"

        sent = time.monotonic()
        os.kill(server.process.pid, signal.SIGTERM)
        server.process.wait(timeout=60)
        exited_after = time.monotonic() - sent

        log = server.log_path.read_text(errors="replace")
        summary = SUMMARY.search(log)
        assert summary, server.log_tail()
        assert summary.group(1) == "0 running turn(s) stopped; 1 kernel snapshot(s) taken", (
            server.log_tail()
        )
        assert saved_names(session_log) == {"x", "y"}
        assert kernel_id not in gateway.kernel_ids()  # the server shut it down

        again = start_gateway_server(base, gateway, SCRIPT, *NO_KERNEL_POOL)
        assert attach_agent(again, base)[0] == session_id
        assert send_and_wait(again, session_id, session_log, "DONE2") == "DONE2 x 42 y 7"
        print(
            f"shutdown snapshot of the gateway kernel: {summary.group(2)} s; "
            f"SIGTERM to exit {exited_after:.2f} s ({gateway.kind.name})"
        )
    finally:
        shutdown(server)
        if again is not None:
            shutdown(again)
