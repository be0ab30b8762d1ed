"""Review D2 on a real gateway: after a restart made on the gateway's API (which the agent never
restores over), the notice names a call without a path, and typed in the gateway kernel it
brings the variables back: the host offers the session's signed snapshot over the bridge
(`snapshot.offer`, `snapshot.get`), since the kernel cannot read the server's folder."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from .gateway_fixtures import (
    KernelGateway,
    attach_agent,
    notebook_kernel,
    server_on_a_notebook,
    user_cannot_read,
)
from .lab_process import shutdown
from .test_gateway import kernel_probe, wait_until
from .test_gateway_restarts import entries_of, post_to_gateway, send_and_wait

pytestmark = [pytest.mark.gateway, pytest.mark.timeout(360)]

SET = "n = 41\nd = {'k': [1, 2]}\ndef twice(v):\n    return 2 * v\n"
USE = "print('BACK', n + 1, d['k'], twice(21))"
SCRIPT: dict[str, Any] = {
    "turns": [
        {"code": SET},
        {"text": "DONE1"},
        {"code": "print('two')"},
        {"text": "DONE2"},
    ]
}
CALL = re.compile(r"`(import prime_agent_kernel; prime_agent_kernel\.restore_snapshot\([^`]*\))`")


def saved_names(state: Path) -> set[str] | None:
    try:
        manifest = json.loads((state / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    return {e["name"] for e in manifest["saved"]}


def test_the_call_the_notice_names_restores_the_variables_on_the_gateway_kernel(
    tmp_path: Path,
    kernel_gateway: KernelGateway,
) -> None:
    base, server = server_on_a_notebook(tmp_path, kernel_gateway, SCRIPT)
    try:
        session_id, log_path = attach_agent(server, base)
        state = log_path.parent / "kernel-state"
        assert send_and_wait(server, session_id, log_path, "DONE1") == "DONE1"
        wait_until(lambda: saved_names(state) == {"n", "d", "twice"}, "the snapshot", server)
        assert user_cannot_read(state, kernel_gateway.user)
        kernel_id = notebook_kernel(server)
        assert post_to_gateway(kernel_gateway, f"api/kernels/{kernel_id}/restart") == 200
        assert send_and_wait(server, session_id, log_path, "DONE2") == "DONE2"
        notices = [e for e in entries_of(log_path) if e.get("type") == "notice"]
        assert [n["kind"] for n in notices] == [
            "kernel_restarted_externally",
            "kernel_state_not_restored",
        ], notices
        hint = notices[-1]["text"]
        assert str(base) not in hint, hint  # no server path a gateway kernel cannot read
        (call,) = CALL.findall(hint)
        assert "NameError" in kernel_probe(kernel_gateway, kernel_id, USE)

        started = time.monotonic()
        typed = kernel_probe(kernel_gateway, kernel_id, call)  # as the user types it
        seconds = time.monotonic() - started

        assert "Error" not in typed, typed
        assert kernel_probe(kernel_gateway, kernel_id, USE).strip() == "BACK 42 [1, 2] 42"
        assert kernel_id in kernel_gateway.kernel_ids()
        print(f"hand restore on the gateway kernel: {seconds:.2f} s ({call})")
    finally:
        shutdown(server)
