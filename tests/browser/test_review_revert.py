"""Review and revert a turn in the browser (docs/pairing.md, section 5; docs/ui.md "Review and
revert"): the user sets `x = 1`, a turn sets `x = 2` and `y = 3` in two cells; "Review cells (2)"
under the turn lists them, "Revert turn" asks first, then the cells leave the notebook and the
kernel is back to before the turn (`x == 1`, no `y`); JupyterLab's undo brings the cells back, and
a reload shows the revert line and the turn as reverted. Light and dark screenshots are kept."""

from __future__ import annotations

import re
from typing import Any

import nbformat
import pytest

from .conftest import LabServer, save_screenshot, send_to_chat
from .test_branch_badge import _switch_theme
from .test_chat_panel import (
    KERNEL_IDLE_TIMEOUT,
    TURN_TIMEOUT_MS,
    UI_TIMEOUT_MS,
    _open_notebook,
    _open_panel,
    _wait_for_idle_kernel,
)
from .test_pairing_keyboard import FOCUS_IN_NOTEBOOK_JS, _unreadable

pytestmark = pytest.mark.browser

NOTEBOOK = "review.ipynb"
CHECK = "print(f'x={x} y_defined={\"y\" in globals()}')"
FINAL_TEXT = "x is 2 and y is 3 now."


@pytest.fixture(scope="module")
def lab_script() -> dict[str, Any]:
    return {"turns": [{"code": "x = 2"}, {"code": "y = 3"}, {"text": FINAL_TEXT}]}


def _notebook_with_x_and_a_check(server: LabServer, name: str) -> None:
    """A user's cell `x = 1` and a cell that prints what the kernel holds (run later)."""
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    }
    notebook.cells.append(nbformat.v4.new_code_cell("x = 1"))
    notebook.cells.append(nbformat.v4.new_code_cell(CHECK))
    nbformat.write(notebook, server.root_dir / name)


def _cells(page: Any) -> Any:
    return page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell")


def _run_in_place(page: Any, cell: Any) -> None:
    """Run a cell with Ctrl+Enter (no new cell, nothing on the undo stack: outputs are not)."""
    cell.locator(".cm-content").click()
    page.keyboard.press("Control+Enter")


def test_revert_a_turn_removes_its_cells_restores_the_kernel_and_undo_brings_the_cells_back(
    lab_server: LabServer, page: Any
) -> None:
    from playwright.sync_api import expect

    _notebook_with_x_and_a_check(lab_server, NOTEBOOK)
    _open_notebook(page, lab_server, NOTEBOOK)
    expect(_cells(page)).to_have_count(2, timeout=UI_TIMEOUT_MS)
    _wait_for_idle_kernel(lab_server, NOTEBOOK, KERNEL_IDLE_TIMEOUT)
    user_cell, check_cell = _cells(page).nth(0), _cells(page).nth(1)
    _run_in_place(page, user_cell)
    expect(user_cell.locator(".jp-InputPrompt")).to_have_text(
        re.compile(r"\[\d+\]:"), timeout=UI_TIMEOUT_MS
    )

    panel = _open_panel(page)
    expect(panel.get_by_test_id("pal-status")).to_have_attribute(
        "data-connection", "connected", timeout=UI_TIMEOUT_MS
    )
    send_to_chat(panel, "Set x to 2 and y to 3.")
    expect(panel.get_by_test_id("pal-assistant").last).to_have_text(
        FINAL_TEXT, timeout=TURN_TIMEOUT_MS
    )
    expect(panel.get_by_test_id("pal-status")).to_have_attribute(
        "data-status", "idle", timeout=TURN_TIMEOUT_MS
    )
    agent_cells = page.locator(".jp-NotebookPanel .jp-Cell.pal-agent-cell")
    expect(agent_cells).to_have_count(2)

    # Under the finished turn: "Review cells (2)", opened with the keyboard.
    toggle = panel.get_by_role("button", name="Review the 2 cells of turn 1")
    expect(toggle).to_have_text("Review cells (2)", timeout=UI_TIMEOUT_MS)
    toggle.press("Enter")
    review = panel.get_by_test_id("pal-review")
    rows = review.get_by_test_id("pal-review-cell")
    expect(rows).to_have_count(2, timeout=UI_TIMEOUT_MS)
    expect(rows.nth(0).get_by_test_id("pal-review-code")).to_have_text("x = 2")
    expect(rows.nth(1).get_by_test_id("pal-review-code")).to_have_text("y = 3")
    expect(rows.nth(0).get_by_test_id("pal-review-count")).to_have_text(re.compile(r"In \[\d+\]"))
    expect(rows.nth(0).get_by_test_id("pal-review-cell-status")).to_have_text("ok")
    expect(review.get_by_test_id("pal-review-kernel")).to_have_attribute("data-restorable", "true")

    # Jump selects the cell in the notebook.
    rows.nth(1).get_by_role("button", name=re.compile(r"^Jump to In \[\d+\] y = 3$")).click()
    expect(agent_cells.nth(1)).to_have_class(
        re.compile(r"\bjp-mod-active\b"), timeout=UI_TIMEOUT_MS
    )

    # Revert turn asks first, saying what will happen; screenshots of the question.
    review.get_by_role("button", name="Revert turn 1").click()
    question = review.get_by_test_id("pal-review-confirm-text")
    expect(question).to_contain_text("2 cells will be removed from the notebook")
    expect(question).to_contain_text("variables will be restored to the snapshot of")
    expect(review.get_by_role("button", name="Keep turn 1 (Escape)")).to_be_focused()
    try:
        for theme, light, shot in (
            ("JupyterLab Light", "true", "review_revert_light.png"),
            ("JupyterLab Dark", "false", "review_revert_dark.png"),
        ):
            _switch_theme(page, theme)
            expect(page.locator("body")).to_have_attribute(
                "data-jp-theme-light", light, timeout=UI_TIMEOUT_MS
            )
            question.scroll_into_view_if_needed()
            save_screenshot(page, shot)
            assert _unreadable(panel) == [], theme
    finally:
        _switch_theme(page, "JupyterLab Light")

    review.get_by_role("button", name="Confirm: revert turn 1").click()
    # Both agent cells are gone from the notebook; the user's cells stay.
    expect(agent_cells).to_have_count(0, timeout=UI_TIMEOUT_MS)
    expect(_cells(page)).to_have_count(2)
    expect(review).to_have_attribute("data-reverted", "true", timeout=UI_TIMEOUT_MS)
    expect(review.get_by_test_id("pal-review-state")).to_have_text("reverted")
    expect(review.get_by_test_id("pal-review-error")).to_have_count(0)
    notice = panel.locator('[data-testid="pal-notice"][data-kind="turn_reverted"]')
    expect(notice).to_have_count(1, timeout=UI_TIMEOUT_MS)
    expect(notice).to_contain_text("turn 1")

    # The kernel is back to before the turn: x is 1, y is not defined.
    _run_in_place(page, check_cell)
    expect(check_cell.locator(".jp-OutputArea-output")).to_have_text(
        "x=1 y_defined=False", timeout=UI_TIMEOUT_MS
    )

    # JupyterLab's undo (Escape, then Z in command mode) brings both cells back at once.
    page.keyboard.press("Escape")
    page.wait_for_function(FOCUS_IN_NOTEBOOK_JS, timeout=UI_TIMEOUT_MS)
    expect(page.locator(".jp-Notebook.jp-mod-commandMode")).to_have_count(1)
    page.keyboard.press("z")
    expect(agent_cells).to_have_count(2, timeout=UI_TIMEOUT_MS)
    expect(agent_cells.nth(0).locator(".cm-content")).to_have_text("x = 2")
    expect(agent_cells.nth(1).locator(".cm-content")).to_have_text("y = 3")
    save_screenshot(page, "review_revert_undone.png")

    # A reload shows the revert line at its place and the turn as reverted.
    page.reload()
    panel = _open_panel(page)
    notice = panel.locator('[data-testid="pal-notice"][data-kind="turn_reverted"]')
    expect(notice).to_have_count(1, timeout=UI_TIMEOUT_MS)
    review = panel.get_by_test_id("pal-review")
    expect(review).to_have_attribute("data-reverted", "true", timeout=UI_TIMEOUT_MS)
    review.get_by_test_id("pal-review-toggle").click()
    expect(review.get_by_role("button", name="Revert turn 1")).to_be_disabled(timeout=UI_TIMEOUT_MS)
    # The rows Undo brought back: Remove is disabled, and its tooltip says why.
    remove = review.get_by_test_id("pal-review-remove").first
    expect(remove).to_be_disabled(timeout=UI_TIMEOUT_MS)
    expect(remove).to_have_attribute("title", re.compile(r"^This turn was reverted"))
