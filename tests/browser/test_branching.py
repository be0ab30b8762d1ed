"""The `/tree` chat command: branch back two turns and the chat shows the branch; the notebook's
cells of the abandoned turns are dimmed with an "other branch" badge (docs/branching.md)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from .conftest import LabServer, send_to_chat
from .test_chat_panel import (
    KERNEL_IDLE_TIMEOUT,
    TURN_TIMEOUT_MS,
    UI_TIMEOUT_MS,
    _create_notebook,
    _open_notebook,
    _wait_for_idle_kernel,
)
from .test_stop_and_sessions import _connected_panel

pytestmark = pytest.mark.browser

SCRIPT = {
    "restart_each_message": True,
    "turns": [{"text": "Running it.", "code": "print('ran')"}, {"text": "Done."}],
}


@pytest.fixture(scope="module")
def lab_script() -> dict[str, Any]:
    return SCRIPT


def test_tree_branches_back_and_the_transcript_shows_the_branch(
    lab_server: LabServer, page: Any
) -> None:
    from playwright.sync_api import expect

    name = "branching.ipynb"
    _create_notebook(lab_server, name)
    _open_notebook(page, lab_server, name)
    _wait_for_idle_kernel(lab_server, name, KERNEL_IDLE_TIMEOUT)
    panel = _connected_panel(page, lab_server, name)
    status = panel.get_by_test_id("pal-status")
    for turn, text in enumerate(("first", "second", "third"), start=1):
        send_to_chat(panel, text)
        expect(panel.get_by_test_id("pal-user")).to_have_count(turn, timeout=UI_TIMEOUT_MS)
        expect(panel.get_by_test_id("pal-assistant").filter(has_text="Done.")).to_have_count(
            turn, timeout=TURN_TIMEOUT_MS
        )
        expect(status).to_have_attribute("data-status", "idle", timeout=TURN_TIMEOUT_MS)

    send_to_chat(panel, "/tree")
    rows = panel.get_by_test_id("pal-tree-row")
    expect(rows).to_have_count(6, timeout=UI_TIMEOUT_MS)
    expect(rows.last).to_contain_text("you are here")
    end_of_first = rows.and_(panel.locator('[data-type="turn_end"]')).first
    expect(end_of_first).to_contain_text("turn 1")
    end_of_first.get_by_test_id("pal-tree-branch").click()

    expect(panel.get_by_test_id("pal-tree")).to_have_count(0, timeout=UI_TIMEOUT_MS)
    expect(panel.get_by_test_id("pal-user")).to_have_text(["first"], timeout=UI_TIMEOUT_MS)
    cells = page.locator(".jp-NotebookPanel .jp-Cell.pal-agent-cell")
    other = page.locator(".jp-NotebookPanel .jp-Cell.pal-agent-cell.pal-other-branch")
    expect(cells).to_have_count(3)
    expect(other).to_have_count(2, timeout=UI_TIMEOUT_MS)
    expect(other.first).to_have_attribute("data-pal-badge", re.compile("other branch"))

    # The next message continues the branch: turn 2 again.
    send_to_chat(panel, "fourth")
    expect(panel.get_by_test_id("pal-user")).to_have_text(
        ["first", "fourth"], timeout=UI_TIMEOUT_MS
    )
    expect(cells).to_have_count(4, timeout=TURN_TIMEOUT_MS)
    expect(cells.last).to_have_attribute("data-pal-badge", "agent · turn 2")
