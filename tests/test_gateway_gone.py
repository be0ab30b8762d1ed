"""A gateway killed while the CLI's cell runs on it (review 2, F5): one line naming the gateway
and what failed, the turn ends there (no cell is sent to the dead gateway), `run_end` carries
the error in JSON mode, the exit status is not 0, and no traceback reaches stderr."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest

from .gateway_fixtures import GATEWAY_USER, KernelGateway, started_kernel_gateway
from .lab_process import REPO

pytestmark = [pytest.mark.gateway, pytest.mark.timeout(420)]

LONG_CELL = "import time\nfor i in range(60):\n    print('tick', i, flush=True)\n    time.sleep(1)"
SCRIPT: dict[str, Any] = {
    "turns": [
        {"text": "first", "code": "a = 1\nprint('A', a)"},
        {"text": "long", "code": LONG_CELL},
        {"text": "after", "code": "print('AFTER', a)"},
        {"text": "end"},
    ]
}


def user_processes(user: str, holding: str) -> list[int]:
    """The pids of `user`'s processes whose command line holds `holding`."""
    found = subprocess.run(
        ["pgrep", "-u", user, "-f", holding], capture_output=True, text=True, check=False
    )
    return [int(pid) for pid in found.stdout.split()]


def kill_gateway_and_its_kernels(gateway: KernelGateway) -> None:
    """SIGKILL the gateway (`su -c` ran it in a session of its own) and the kernels it started
    (they outlive it), leaving the session's other gateways alone."""
    kernels = gateway.kernel_ids()
    port = gateway.url.rsplit(":", 1)[1]
    for pid in user_processes(GATEWAY_USER, f"kernelgateway .*--KernelGatewayApp.port={port} "):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for kernel_id in kernels:
        for pid in user_processes(GATEWAY_USER, f"kernel-{kernel_id}.json"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("mode", ["text", "json"])
def test_a_gateway_killed_mid_cell_ends_the_run_with_one_line_and_a_failure(
    tmp_path: Path, kernel_gateway: KernelGateway, mode: str
) -> None:
    (tmp_path / "script.json").write_text(json.dumps(SCRIPT))
    with started_kernel_gateway(tmp_path) as gateway:
        env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER_GATEWAY_")}
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "kernel_ext")])
        env.update(JUPYTER_GATEWAY_URL=gateway.url, JUPYTER_GATEWAY_AUTH_TOKEN=gateway.token)
        command = [sys.executable, "-m", "prime_agent_lab.cli", "run", "--mode", mode]
        process = subprocess.Popen(
            [*command, "--provider", "scripted", "--script", "script.json", "go"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        stderr: list[str] = []
        reader = threading.Thread(target=lambda: stderr.extend(process.stderr or ()))
        reader.start()
        lines: list[str] = []
        killed_at = None
        try:
            for line in process.stdout or ():
                lines.append(line)
                if killed_at is None and "for i in range" in line:  # the long cell's code
                    time.sleep(4)  # it runs and prints its ticks
                    kill_gateway_and_its_kernels(gateway)
                    killed_at = time.monotonic()
            process.wait(timeout=120)
        finally:
            process.kill()
            reader.join(timeout=10)
        ended_after = time.monotonic() - (killed_at or 0)
    out, err = "".join(lines), "".join(stderr)
    assert killed_at is not None, (out + err)[-4000:]
    assert process.returncode == 1, (out + err)[-4000:]
    assert "Traceback" not in err, err
    # Killed while the cell ran (its websocket closes) or just before it was sent (refused).
    gone = [
        f"the gateway {gateway.url} went away: the websocket to its kernel closed",
        f"the gateway {gateway.url} cannot be reached: its connection was refused",
    ]
    if mode == "json":
        end = json.loads(lines[-1])
        assert end["type"] == "run_end" and end["ok"] is False, end
        assert any(end["error"].startswith(g) for g in gone), end
        assert gateway.url not in err, err  # JSON mode: said once, in `run_end`
    else:
        told = [line for line in stderr if gateway.url in line and "kernels on" not in line]
        assert len(told) == 1, err
        assert any(told[0].startswith(f"prime-agent-lab: {g}") for g in gone), err
    sources = [c.source for c in nbformat.read(tmp_path / "agent.ipynb", as_version=4).cells]
    assert not any("AFTER" in source for source in sources), sources  # never sent
    assert ended_after < 60, ended_after
    print(f"gateway killed mid-cell ({mode}): the run ended {ended_after:.1f} s later")
