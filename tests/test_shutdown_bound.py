"""A server shutdown never hangs on an agent cell: one that ignores the interrupt is cut at the
`shutdown_timeout`, and its turn is still recorded as stopped by the shutdown."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

from prime_agent_lab.core.snapshots import read_manifest

from .conftest import use_script, wait_for

STUBBORN = (
    "import signal, time\n"
    "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    "open('stubborn.flag', 'w').close()\n"
    "while True:\n"
    "    time.sleep(0.1)\n"
)
BOUND = 2.0


async def test_a_cell_that_ignores_the_interrupt_cannot_hold_up_the_server_shutdown(
    host: Any, make_notebook: Any, agent_script: Any, jp_root_dir: Path
) -> None:
    use_script(host, agent_script([{"code": STUBBORN}, {"text": "never"}]))
    host.settings = dataclasses.replace(host.settings, shutdown_timeout=BOUND)
    agent = await host.attach(make_notebook("stubborn.ipynb"))
    await host.send(agent.session_id, "go")
    await wait_for(lambda: (jp_root_dir / "stubborn.flag").exists(), timeout=60)
    # Taken as the turn started: the kernel wrote it before the cell, and the host commits it
    # (checks, signs, renames) while the cell runs, so it may land a moment after the flag.
    await wait_for(lambda: read_manifest(agent.session.directory) is not None, timeout=30)
    at_turn_start = read_manifest(agent.session.directory)

    started = time.monotonic()
    await host.shutdown()
    took = time.monotonic() - started

    assert took < BOUND + 1.0, f"the shutdown took {took:.2f} s"
    ends = [e for e in agent.session.path() if e["type"] == "turn_end"]
    assert [e["stop_reason"] for e in ends] == ["shutdown"]
    [result] = [e for e in agent.session.path() if e["type"] == "tool_result"]
    assert result["status"] == "interrupted"
    assert result["observation"].startswith(
        "[stopped] The server shut down and stopped the turn; the cell is interrupted"
    )
    # its kernel stayed busy: no snapshot at shutdown, the turn-start one is what is there
    assert read_manifest(agent.session.directory) == at_turn_start
    print(f"shutdown with a stubborn cell: {took:.2f} s (bound {BOUND:g} s)")
