"""Sub-agents on a Jupyter gateway (issue 20, docs/gateway.md part 3 step 4): the root's cell
spawns two children, each child's kernel comes from the server's pool on the gateway and is
handed to its notebook without entering the server's folder (which the gateway's user cannot
read), the child notebooks fill, and the children's replies reach the parent."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest

from prime_agent_lab.core.sessions import SESSION_FILE

from .gateway_fixtures import KernelGateway, start_gateway_server, started_kernel_gateway
from .lab_process import LabServer, shutdown
from .test_gateway import wait_until
from .test_subagents import WAIT_FOR_CHILDREN

pytestmark = [pytest.mark.gateway, pytest.mark.timeout(360)]

SPAWN = (
    'a = await rlm("alpha words", name="alpha")\n'
    'b = await rlm("beta words", name="beta")\n'
    "print(a.notebook_path, b.notebook_path)"
)
CHILD_CELL = (
    "import os\n"
    "print('{task}'.upper(), os.environ.get('JPY_SESSION_NAME'))\n"
    'await agent_message.send("found {task}", receiver_role="parent")'
)
SCRIPT: dict[str, Any] = {
    "turns": [{"code": SPAWN}, {"code": WAIT_FOR_CHILDREN}, {"text": "{last_output_line}"}],
    "child": {"turns": [{"code": CHILD_CELL}, {"text": "did {task}"}]},
}
CHILDREN = {"alpha": "ALPHA WORDS", "beta": "BETA WORDS"}


def session_entries(base: Path) -> dict[str, list[dict[str, Any]]]:
    found = {}
    for path in (base / "sessions").glob(f"*/{SESSION_FILE}"):
        found[path.parent.name] = [json.loads(line) for line in path.read_text().splitlines()]
    return found


def child_notebook_output(path: Path) -> str:
    if not path.exists():
        return ""
    notebook = nbformat.read(path, as_version=4)
    return "".join(
        output.get("text", "") for cell in notebook.cells for output in cell.get("outputs", [])
    )


def run_fan_out(base: Path, server: LabServer) -> None:
    """A root agent on `analysis.ipynb` fans out to two children, until its turn ends."""
    started = time.monotonic()
    session = server.api("POST", "prime-agent/api/sessions", {"notebook_path": "analysis.ipynb"})
    root_id = session["session_id"]
    server.api("POST", f"prime-agent/api/sessions/{root_id}/messages", {"text": "fan out"})

    def root_said() -> str | None:
        entries = session_entries(base).get(root_id, [])
        said = [e["text"] for e in entries if e.get("type") == "assistant_message"]
        return said[-1] if said else None

    final = wait_until(root_said, "the root's turn ends", server, timeout=240)
    seconds = time.monotonic() - started
    print(f"fan-out on the gateway (attach, two spawns, replies): {seconds:.1f} s")
    assert final == "[('alpha', 'replied'), ('beta', 'replied')]", (final, server.log_tail())


def start_server(base: Path, gateway: KernelGateway) -> LabServer:
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    (base / "root").mkdir(parents=True)
    nbformat.write(notebook, base / "root" / "analysis.ipynb")
    return start_gateway_server(base, gateway, SCRIPT)


def check_fan_out(base: Path, gateway: KernelGateway, server: LabServer) -> None:
    sessions = {model["path"]: model["kernel"]["id"] for model in server.api("GET", "api/sessions")}
    children = {name: f"analysis.agents/{name}.ipynb" for name in CHILDREN}
    assert set(children.values()) | {"analysis.ipynb"} <= set(sessions), sessions
    used = set(sessions.values())
    assert len(used) == len(sessions)  # each notebook its own kernel
    assert used <= gateway.kernel_ids(), (used, gateway.kernel_ids())
    for name, words in CHILDREN.items():
        path = base / "root" / children[name]
        output = wait_until(
            lambda path=path: child_notebook_output(path),
            f"{children[name]} is saved with its cell",
            server,
        )
        printed, session_name = output.split("\n")[0].rsplit(" ", 1)
        assert printed == words, output
        assert session_name.endswith(children[name]), output  # the hand-out named the session
    root_entries = next(
        entries
        for entries in session_entries(base).values()
        if entries[0].get("notebook_path") == "analysis.ipynb"
    )
    replies = json.dumps([e for e in root_entries if e.get("type") != "assistant_message"])
    for name in CHILDREN:
        assert f"found {name} words" in replies, root_entries
    assert "HandOutFailed" not in server.log_tail(200_000)
    assert "cannot move the kernel" not in server.log_tail(200_000)


def test_the_fan_out_runs_every_kernel_on_the_gateway_and_the_replies_arrive(
    tmp_path: Path,
    any_gateway: KernelGateway,
) -> None:
    base = tmp_path / "server"
    base.mkdir(mode=0o700)
    server = start_server(base, any_gateway)
    try:
        run_fan_out(base, server)
        check_fan_out(base, any_gateway, server)
    finally:
        shutdown(server)


def test_a_gateway_that_refuses_another_kernel_disables_the_pool_in_one_line(
    tmp_path: Path,
    kernel_gateway: KernelGateway,
) -> None:
    """Kernel Gateway's `max_kernels` (3: the root, and two the pool starts): the pool's next
    start is refused, the pool says so once and starts nothing more, and both children still
    get a kernel.

    Kernel Gateway 3.0.1 refuses with 403 "Resource Limit", or with 500 when the start arrives
    while another is in flight: its `max_kernels` check lists the kernels, and a kernel still
    starting has no `last_activity` yet (AttributeError in jupyter_server's `kernel_model`; seen
    under load, the gateway's log in docs/gateway.md 4)."""
    base = tmp_path / "server"
    base.mkdir(mode=0o700)
    with started_kernel_gateway(tmp_path, "--KernelGatewayApp.max_kernels=3") as limited:
        server = start_server(base, limited)
        try:
            run_fan_out(base, server)
            check_fan_out(base, limited, server)
            log = server.log_tail(200_000)
            disabled = [line for line in log.splitlines() if "kernel pool disabled:" in line]
            assert len(disabled) == 1, log
            assert "refused another kernel" in disabled[0], disabled
            assert re.search(r"HTTP (403|500): ", disabled[0]), (disabled, limited.log()[-5_000:])
            assert "failed start(s) in a row" not in log  # no backoff loop
        finally:
            shutdown(server)
