"""A colleague's folder in a real browser: opening its notebook loads nothing of its snapshot;
the chat lists it with Trust and restore, and one click brings the variables back."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import LabServer
from .test_chat_panel import (
    KERNEL_IDLE_TIMEOUT,
    UI_TIMEOUT_MS,
    _open_notebook,
    _open_panel,
    _wait_for_idle_kernel,
)

pytestmark = pytest.mark.browser

COLLEAGUE_SCRIPT = {"turns": [{"code": "shared_result = 41 + 1"}, {"text": "Computed it."}]}


def colleagues_session(server: LabServer, tmp_path: Path, notebook: str) -> Path:
    """A headless run in the server's folder by someone with another secret: the session and
    its kernel snapshot (signed by them), as a copy of their project would bring it."""
    script = tmp_path / "colleague-script.json"
    script.write_text(json.dumps(COLLEAGUE_SCRIPT))
    env = {**os.environ, "PRIME_AGENT_LAB_SECRET_FILE": str(tmp_path / "colleague-secret")}
    done = subprocess.run(
        [
            *(sys.executable, "-m", "prime_agent_lab.cli", "run", "--script", str(script)),
            *("--notebook", notebook, "--mode", "json", "compute"),
        ],
        cwd=server.root_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    written = server.root_dir / json.loads(done.stdout.splitlines()[-1])["session_dir"]
    # where this server keeps its sessions (tests/lab_process.py)
    return Path(shutil.move(written, server.base / "sessions" / written.name))


def test_a_colleagues_snapshot_loads_only_after_trust_and_restore(
    lab_server: LabServer, page: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    name = "colleague.ipynb"
    session_dir = colleagues_session(lab_server, tmp_path, name)
    assert (session_dir / "kernel-state" / "manifest.json").exists()

    _open_notebook(page, lab_server, name)
    _wait_for_idle_kernel(lab_server, name, KERNEL_IDLE_TIMEOUT)
    panel = _open_panel(page)
    untrusted = panel.locator('[data-testid="pal-notice"][data-kind="session_untrusted"]')
    expect(untrusted).to_be_visible(timeout=UI_TIMEOUT_MS)
    expect(untrusted).to_contain_text("shared_result (int, pickle)")
    expect(panel.locator('[data-kind="kernel_state_restored"]')).to_have_count(0)

    trust = untrusted.get_by_test_id("pal-trust-button")
    expect(trust).to_have_text("Trust and restore")
    trust.click()

    expect(untrusted.get_by_test_id("pal-trust-result")).to_contain_text(
        "Trusted: snapshot", timeout=UI_TIMEOUT_MS
    )
    restored = panel.locator('[data-testid="pal-notice"][data-kind="kernel_state_restored"]')
    expect(restored).to_contain_text("shared_result", timeout=UI_TIMEOUT_MS)
    sessions = lab_server.api("GET", "prime-agent/api/sessions")["sessions"]
    session_id = next(s["session_id"] for s in sessions if s["notebook_path"] == name)
    state = lab_server.api("GET", f"prime-agent/api/sessions/{session_id}/trust")
    assert state == {"trusted": True, "untrusted": []}
