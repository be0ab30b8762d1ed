"""The headless CLI with its kernels on a Jupyter Kernel Gateway run as another Unix user (issue 20,
docs/gateway.md part 3 step 5): `JUPYTER_GATEWAY_URL` and `JUPYTER_GATEWAY_AUTH_TOKEN` set, the
fan-out scenario (a root spawning two sub-agents that reply) runs with every kernel, pooled ones
included, on the gateway and none started by the CLI."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest

from .gateway_fixtures import KernelGateway, user_cannot_read
from .lab_process import REPO, free_port

pytestmark = [pytest.mark.gateway, pytest.mark.timeout(420)]

WHO = (
    "import os, pwd, prime_agent_kernel as _pak\n"
    "print('KID', _pak._client.kernel_id, 'USER', pwd.getpwuid(os.getuid()).pw_name)\n"
)
SPAWN = 'a = await rlm("alpha words", name="part-a")\nb = await rlm("beta words", name="part-b")'
SCRIPT: dict[str, Any] = {
    "turns": [
        {"text": "Fan out.", "code": WHO + SPAWN},
        {"text": "Waiting for replies."},
        {"text": "Got one."},
        {"text": "Got both."},
    ],
    "child": {
        "turns": [
            {"code": WHO + "found = '{task}'.upper()"},
            {"code": "await agent_message.send(f'summary {found}', receiver_role='parent')"},
            {"text": "replied"},
        ]
    },
}
KID = re.compile(r"KID (\S+) USER (\S+)")
POOL_REFILLS = 2  # the pool (2 kernels by default) refills once after each of the two spawns


class Watch:
    """What happens while the CLI runs: the kernel ids the gateway lists, and every process
    below the CLI's (a local kernel would be one)."""

    def __init__(self, gateway: KernelGateway, pid: int) -> None:
        self.gateway, self.pid = gateway, pid
        self.listed: set[str] = set()
        self.descendants: dict[int, str] = {}  # pid -> command line
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.is_set():
            with contextlib.suppress(OSError):
                self.listed |= self.gateway.kernel_ids()
            self.descendants.update(descendants(self.pid))
            time.sleep(0.1)

    def stop(self) -> None:
        self._done.set()
        self._thread.join(timeout=10)


def descendants(root: int) -> dict[int, str]:
    """The processes below `root` now, from /proc: pid -> command line."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        match = re.search(r"^PPid:\s+(\d+)", status, re.M)
        if match:
            parents[int(entry)] = int(match.group(1))
    found: dict[int, str] = {}
    frontier = {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found.keys()
        for pid in frontier:
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                command = b"?"
            found[pid] = command.decode(errors="replace")
    return found


def started_on_gateway(gateway: KernelGateway) -> list[str]:
    return re.findall(r"Kernel started: (\S+)", gateway.log())


def run_cli(
    cwd: Path, gateway: KernelGateway, *args: str, gateway_env: bool = True
) -> tuple[subprocess.CompletedProcess[str], Watch]:
    """The CLI's `run` in `cwd`, with the gateway's URL and token in the environment
    (`gateway_env`), else only what `args` say."""
    env = {
        key: value for key, value in os.environ.items() if not key.startswith("JUPYTER_GATEWAY_")
    }
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO), str(REPO / "kernel_ext"), os.environ.get("PYTHONPATH", "")) if p
    )
    if gateway_env:
        env.update(JUPYTER_GATEWAY_URL=gateway.url, JUPYTER_GATEWAY_AUTH_TOKEN=gateway.token)
    command = [sys.executable, "-m", "prime_agent_lab.cli", "run", *args]
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    watch = Watch(gateway, process.pid)
    try:
        stdout, stderr = process.communicate(timeout=300)
    finally:
        process.kill()
        watch.stop()
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr), watch


def cell_identities(notebook: Path) -> list[tuple[str, str]]:
    found = []
    for cell in nbformat.read(notebook, as_version=4).cells:
        for output in cell.get("outputs", []):
            found += KID.findall(str(output.get("text", "")))
    return found


def test_the_fan_out_runs_every_kernel_on_the_gateway_and_none_locally(
    any_gateway: KernelGateway,
    tmp_path: Path,
) -> None:
    gateway = any_gateway
    assert user_cannot_read(tmp_path, gateway.user), f"{gateway.user} can read {tmp_path}"
    (tmp_path / "tree.json").write_text(json.dumps(SCRIPT))
    before = len(started_on_gateway(gateway))
    began = time.monotonic()

    done, watch = run_cli(
        tmp_path, gateway, "--mode", "json", "--script", "tree.json",
        "--notebook", "analysis.ipynb", "go",
    )  # fmt: skip

    seconds = time.monotonic() - began
    assert done.returncode == 0, f"{done.stderr}\n--- gateway log ---\n{gateway.log()[-4000:]}"
    records = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    assert records[0]["type"] == "run_start"
    assert records[0]["kernels"] == {
        "source": "gateway",
        "url": gateway.url,
        "kernel_name": "python3",
    }
    assert records[-1]["ok"] is True, records[-1]
    assert "summary ALPHA WORDS" in done.stdout and "summary BETA WORDS" in done.stdout  # replies

    # Each agent's cells ran on its own gateway kernel, as the gateway's user.
    used = {
        "root": cell_identities(tmp_path / "analysis.ipynb"),
        "part-a": cell_identities(tmp_path / "analysis.agents" / "part-a.ipynb"),
        "part-b": cell_identities(tmp_path / "analysis.agents" / "part-b.ipynb"),
    }
    assert all(len(ids) == 1 for ids in used.values()), used
    kernels = {ids[0][0] for ids in used.values()}
    assert len(kernels) == 3, used
    assert {ids[0][1] for ids in used.values()} == {gateway.user}
    assert kernels <= watch.listed, (kernels, watch.listed)

    # Every kernel the CLI asked for was started by the gateway (the pool's too), none by the
    # CLI itself, and the CLI shut them all down as it ended.
    started = started_on_gateway(gateway)[before:]
    assert kernels <= set(started), (kernels, started)
    assert watch.listed <= set(started)
    assert len(set(started)) <= len(kernels) + POOL_REFILLS, started
    local = {pid: cmd for pid, cmd in watch.descendants.items() if "kernel" in cmd}
    assert not local, f"the CLI started processes of its own: {local}"
    assert not (gateway.kernel_ids() & set(started))

    # The gateway's token is in nothing the run wrote or printed.
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    for path in written:
        assert gateway.token not in path.read_text(errors="replace"), path
    assert gateway.token not in done.stdout + done.stderr
    print(
        f"gateway fan-out: {seconds:.1f} s, {len(started)} kernels started on the gateway "
        f"({len(kernels)} used), {len(watch.descendants)} processes below the CLI"
    )


def test_the_flags_name_the_gateway_and_where_its_kernels_call_the_bridge(
    kernel_gateway: KernelGateway,
    tmp_path: Path,
) -> None:
    gateway = kernel_gateway
    port = free_port()
    bridge = f"http://localhost:{port}/prime-agent/bridge"  # not the address it listens on
    cell = WHO + "u = await rlm.usage()\nprint('BRIDGE', _pak._client.url, type(u).__name__)"
    (tmp_path / "one.json").write_text(json.dumps({"turns": [{"code": cell}, {"text": "done"}]}))

    done, watch = run_cli(
        tmp_path, gateway, "--script", "one.json", "--kernel-pool-size", "0",
        "--gateway-url", gateway.url, "--gateway-auth-token", gateway.token,
        "--bridge-listen", f"127.0.0.1:{port}", "--bridge-url", bridge, "go",
        gateway_env=False,
    )  # fmt: skip

    assert done.returncode == 0, f"{done.stderr}\n--- gateway log ---\n{gateway.log()[-4000:]}"
    assert f"prime-agent-lab: kernels on the gateway {gateway.url} (python3)" in (
        done.stderr.splitlines()
    )
    [(kernel_id, user)] = cell_identities(tmp_path / "agent.ipynb")
    assert user == gateway.user and kernel_id in watch.listed
    assert f"BRIDGE {bridge} AgentUsage" in (tmp_path / "agent.ipynb").read_text()
    assert not [cmd for cmd in watch.descendants.values() if "kernel" in cmd]
    assert gateway.token not in done.stdout + done.stderr
