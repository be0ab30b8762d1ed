"""Revert turn keeps an agent cell the user changed (docs/pairing.md, section 5; docs/ui.md "Review
and revert"): a turn writes `x = 2` and `y = 3`; the user types into the first cell; its review row
says "changed by you", the question says it is kept, and after the revert it is still in the
notebook with the user's text while the other cell is gone."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import LabServer, send_to_chat
from .test_chat_panel import (
    KERNEL_IDLE_TIMEOUT,
    TURN_TIMEOUT_MS,
    UI_TIMEOUT_MS,
    _open_notebook,
    _open_panel,
    _wait_for_idle_kernel,
)
from .test_review_revert import _cells, _notebook_with_x_and_a_check

pytestmark = pytest.mark.browser

NOTEBOOK = "review-changed.ipynb"
FINAL_TEXT = "x is 2 and y is 3 now."
TYPED = "  # mine"


@pytest.fixture(scope="module")
def lab_script() -> dict[str, Any]:
    return {"turns": [{"code": "x = 2"}, {"code": "y = 3"}, {"text": FINAL_TEXT}]}


def test_revert_turn_keeps_an_agent_cell_the_user_changed(lab_server: LabServer, page: Any) -> None:
    from playwright.sync_api import expect

    _notebook_with_x_and_a_check(lab_server, NOTEBOOK)
    _open_notebook(page, lab_server, NOTEBOOK)
    expect(_cells(page)).to_have_count(2, timeout=UI_TIMEOUT_MS)
    _wait_for_idle_kernel(lab_server, NOTEBOOK, KERNEL_IDLE_TIMEOUT)
    panel = _open_panel(page)
    expect(panel.get_by_test_id("pal-status")).to_have_attribute(
        "data-connection", "connected", timeout=UI_TIMEOUT_MS
    )
    send_to_chat(panel, "Set x to 2 and y to 3.")
    expect(panel.get_by_test_id("pal-status")).to_have_attribute(
        "data-status", "idle", timeout=TURN_TIMEOUT_MS
    )
    agent_cells = page.locator(".jp-NotebookPanel .jp-Cell.pal-agent-cell")
    expect(agent_cells).to_have_count(2, timeout=UI_TIMEOUT_MS)

    # The user types at the end of the agent's first cell.
    agent_cells.nth(0).locator(".cm-content").click()
    page.keyboard.press("End")
    page.keyboard.type(TYPED)
    expect(agent_cells.nth(0).locator(".cm-content")).to_have_text(f"x = 2{TYPED}")

    panel.get_by_role("button", name="Review the 2 cells of turn 1").click()
    review = panel.get_by_test_id("pal-review")
    rows = review.get_by_test_id("pal-review-cell")
    expect(rows).to_have_count(2, timeout=UI_TIMEOUT_MS)
    expect(rows.nth(0)).to_have_attribute("data-kept-reason", "changed by you")
    expect(rows.nth(0).get_by_test_id("pal-review-cell-status")).to_contain_text("changed by you")

    review.get_by_role("button", name="Revert turn 1").click()
    question = review.get_by_test_id("pal-review-confirm-text")
    expect(question).to_contain_text("1 cell will be removed from the notebook")
    expect(question).to_contain_text("1 cell you changed is kept")
    review.get_by_role("button", name="Confirm: revert turn 1").click()

    expect(agent_cells).to_have_count(1, timeout=UI_TIMEOUT_MS)
    expect(agent_cells.nth(0).locator(".cm-content")).to_have_text(f"x = 2{TYPED}")
    notice = panel.locator('[data-testid="pal-notice"][data-kind="turn_reverted"]')
    expect(notice).to_contain_text("(the user changed it)", timeout=UI_TIMEOUT_MS)
