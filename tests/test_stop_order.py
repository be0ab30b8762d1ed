"""jupyter/stop_order.py on a real `jupyter lab` with a local kernel: after SIGTERM the server
still answers while the host's shutdown runs (a gateway kernel's snapshot comes to it over the
bridge: tests/test_gateway_shutdown.py), and a second SIGTERM meanwhile stops the server once,
within the shutdown bound."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import nbformat

from .lab_fixtures import (  # noqa: F401  (fixtures: a subprocess server, no in-process one)
    NO_KERNEL_POOL,
    jp_asyncio_loop,
    jp_server_cleanup,
    servers,
    start_server,
)
from .lab_process import LabServer
from .test_server_crash import wait_until
from .test_shutdown_bound import STUBBORN

BOUND = 6.0  # the stubborn cell holds the host's shutdown for 0.6 of it (core/shutdown.py)


def test_the_server_listens_during_the_hosts_shutdown_and_a_second_sigterm_stops_it_once(
    tmp_path: Path,
    servers: list[LabServer],  # noqa: F811  (the fixture imported above)
) -> None:
    server = start_server(
        tmp_path,
        servers,
        {"turns": [{"code": STUBBORN}, {"text": "never"}]},
        extra_args=(*NO_KERNEL_POOL, f"--PrimeAgentLab.shutdown_timeout={BOUND:g}"),
    )
    nbformat.write(nbformat.v4.new_notebook(), server.root_dir / "stubborn.ipynb")
    session = server.api("POST", "prime-agent/api/sessions", {"notebook_path": "stubborn.ipynb"})
    server.api("POST", f"prime-agent/api/sessions/{session['session_id']}/messages", {"text": "go"})
    wait_until(lambda: (server.root_dir / "stubborn.flag").exists(), "the stubborn cell", server)

    sent = time.monotonic()
    os.kill(server.process.pid, signal.SIGTERM)
    wait_until(
        lambda: "received signal 15" in server.log_path.read_text(), "the first SIGTERM", server
    )
    answered = server.api("GET", "api/status", timeout=BOUND)  # the host's shutdown is running
    answered_after = time.monotonic() - sent
    os.kill(server.process.pid, signal.SIGTERM)
    server.process.wait(timeout=60)
    exited_after = time.monotonic() - sent

    log = server.log_path.read_text()
    assert answered["started"], answered
    assert log.count("received signal 15") == 2, server.log_tail()
    assert len(re.findall(r"Shutting down \d+ extensions", log)) == 1, server.log_tail()
    summaries = re.findall(r"Prime Agent Lab shutdown: (.*) in [0-9.]+ s", log)
    # once, and the busy kernel gets no snapshot (cut, or not done within the bound on a slow
    # machine: core/shutdown.py)
    assert len(summaries) == 1, summaries
    assert summaries[0].startswith(
        "1 running turn(s) stopped; 0 kernel snapshot(s) taken; no snapshot of "
        f"{session['session_id']}: "
    ), summaries
    assert exited_after < BOUND + 10.0, f"SIGTERM to exit {exited_after:.2f} s"
    print(
        f"answered {answered_after:.2f} s after SIGTERM; SIGTERM to exit {exited_after:.2f} s "
        f"(bound {BOUND:g} s)"
    )
