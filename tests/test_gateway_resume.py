"""`prime-agent-lab run --resume` with its kernels on a Jupyter Kernel Gateway run as another Unix
user (issue 20's acceptance, docs/gateway.md part 4): run 1 sets variables and ends, its snapshot
sent to the CLI through the bridge (the CLI's folder is unreadable to the gateway's user); run 2
resumes the session on a fresh gateway kernel, which gets them back through the bridge."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .gateway_fixtures import KernelGateway, user_cannot_read
from .test_gateway_cli import WHO, cell_identities, run_cli, started_on_gateway

pytestmark = [pytest.mark.gateway, pytest.mark.timeout(420)]

SET = "n = 41\nd = {'k': [1, 2]}\ndef twice(v):\n    return 2 * v\n"
USE = "print('BACK', n + 1, d['k'], twice(21))"
SCRIPT = {
    "turns": [
        {"code": WHO + SET},
        {"text": "set"},
        {"code": WHO + USE},
        {"text": "{last_output_line}"},
    ]
}


def records_of(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_resume_on_a_gateway_restores_the_variables_into_a_fresh_gateway_kernel(
    kernel_gateway: KernelGateway,
    tmp_path: Path,
) -> None:
    gateway = kernel_gateway
    assert user_cannot_read(tmp_path, gateway.user), f"{gateway.user} can read {tmp_path}"
    (tmp_path / "s.json").write_text(json.dumps(SCRIPT))
    before = len(started_on_gateway(gateway))
    common = ("--mode", "json", "--script", "s.json", "--kernel-pool-size", "0")

    first, first_watch = run_cli(tmp_path, gateway, *common, "--notebook", "work.ipynb", "set")

    assert first.returncode == 0, f"{first.stderr}\n--- gateway log ---\n{gateway.log()[-4000:]}"
    session_dir = records_of(first.stdout)[-1]["session_dir"]
    state = tmp_path / session_dir / "kernel-state"
    manifest = json.loads((state / "manifest.json").read_text())
    assert sorted(e["name"] for e in manifest["saved"]) == ["d", "n", "twice"], manifest
    assert manifest.get("signature"), manifest  # signed by the CLI, not by the kernel
    [(first_kernel, user)] = cell_identities(tmp_path / "work.ipynb")
    assert user == gateway.user and first_kernel in first_watch.listed

    second, second_watch = run_cli(tmp_path, gateway, *common, "--resume", session_dir, "use")

    assert second.returncode == 0, f"{second.stderr}\n--- gateway log ---\n{gateway.log()[-4000:]}"
    records = records_of(second.stdout)
    assert records[-1]["final_text"] == "BACK 42 [1, 2] 42", records[-1]
    notices = [r for r in records if r["type"] == "notice"]
    assert notices and notices[0]["kind"] == "kernel_state_restored", notices
    assert all(name in notices[0]["text"] for name in ("n", "d", "twice")), notices[0]
    identities = cell_identities(tmp_path / "work.ipynb")
    assert identities[0][0] == first_kernel, identities
    second_kernel, second_user = identities[-1]
    assert second_user == gateway.user and second_kernel != first_kernel
    assert second_kernel in second_watch.listed

    # Every kernel of both runs was the gateway's, and none is left running.
    started = set(started_on_gateway(gateway)[before:])
    assert {first_kernel, second_kernel} <= started, started
    assert first_watch.listed | second_watch.listed <= started
    below = [*first_watch.descendants.values(), *second_watch.descendants.values()]
    assert not [command for command in below if "kernel" in command], below
    assert not (gateway.kernel_ids() & started)
