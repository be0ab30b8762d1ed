"""Permission modes in the browser (docs/pairing.md, section 4): the mode selector beside the
input puts the session in ask mode; the agent's cell then waits in the notebook with the Run /
Edit / Skip bar in the panel; Edit runs the edited code and the answer reads its output; the
mode is still shown after a reload."""

from __future__ import annotations

import re
from typing import Any

import pytest

from .conftest import LabServer, save_screenshot, send_to_chat
from .test_chat_panel import (
    KERNEL_IDLE_TIMEOUT,
    TURN_TIMEOUT_MS,
    UI_TIMEOUT_MS,
    _create_notebook,
    _open_notebook,
    _open_panel,
    _wait_for_idle_kernel,
)

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def lab_script() -> dict[str, Any]:
    return {"turns": [{"code": "print(6 * 7)"}, {"text": "It printed {last_output_line}."}]}


def test_ask_mode_waits_for_the_user_and_edit_runs_the_edited_code(
    lab_server: LabServer, page: Any
) -> None:
    from playwright.sync_api import expect

    name = "permission.ipynb"
    _create_notebook(lab_server, name)
    _open_notebook(page, lab_server, name)
    _wait_for_idle_kernel(lab_server, name, KERNEL_IDLE_TIMEOUT)
    panel = _open_panel(page)
    expect(panel.get_by_test_id("pal-status")).to_have_attribute(
        "data-connection", "connected", timeout=UI_TIMEOUT_MS
    )
    mode = panel.get_by_role("combobox", name="Permission mode")
    expect(mode).to_have_value("auto", timeout=UI_TIMEOUT_MS)
    mode.select_option("ask")
    expect(mode).to_have_value("ask", timeout=UI_TIMEOUT_MS)

    send_to_chat(panel, "Compute it.")
    bar = panel.get_by_test_id("pal-approval")
    expect(bar).to_be_visible(timeout=TURN_TIMEOUT_MS)
    expect(bar).to_contain_text("print(6 * 7)")
    waiting_cell = page.locator(".jp-Cell").filter(has_text="waiting for your approval")
    expect(waiting_cell).to_have_count(1, timeout=UI_TIMEOUT_MS)
    # Not JupyterLab's running [*]: the prompt says the cell waits (the kernel is idle).
    expect(waiting_cell).to_have_class(re.compile(r"\bpal-awaiting-approval\b"))
    expect(waiting_cell.locator(".jp-InputPrompt")).to_have_attribute(
        "title", re.compile("^Waiting for approval")
    )
    save_screenshot(page, "permission-ask-waiting.png")

    bar.get_by_test_id("pal-approval-edit").click()
    bar.get_by_test_id("pal-approval-editor").fill("print(6 * 9)")
    bar.get_by_test_id("pal-approval-run-edited").click()
    expect(bar).to_be_hidden(timeout=UI_TIMEOUT_MS)
    expect(page.locator(".jp-Cell.pal-awaiting-approval")).to_have_count(0, timeout=UI_TIMEOUT_MS)
    expect(panel.get_by_test_id("pal-assistant").last).to_have_text(
        "It printed 54.", timeout=TURN_TIMEOUT_MS
    )
    _expect_edited_then_ran(panel)

    page.reload()
    panel = _open_panel(page)
    expect(panel.get_by_role("combobox", name="Permission mode")).to_have_value(
        "ask", timeout=UI_TIMEOUT_MS
    )
    _expect_edited_then_ran(panel)  # the same words from the transcript


def _expect_edited_then_ran(panel: Any) -> None:
    """The waiting cell's line says Edit replaced it (not Stop); the edited code's line ran."""
    from playwright.sync_api import expect

    lines = panel.get_by_test_id("pal-cell-line")
    expect(lines).to_have_count(2, timeout=UI_TIMEOUT_MS)
    expect(lines.first).to_have_attribute("data-status", "skipped")
    expect(lines.first).to_have_attribute("data-decision", "edit")
    expect(lines.first).to_have_attribute("title", re.compile(r"^Cell not run \(edited: "))
    expect(lines.first).not_to_have_attribute("title", re.compile("withdrawn by Stop"))
    expect(lines.last).to_have_attribute("data-status", "ok")
    expect(lines.last).to_contain_text("print(6 * 9)")


def test_skip_says_skipped_not_withdrawn_by_stop_live_and_after_a_reload(
    lab_server: LabServer, page: Any
) -> None:
    from playwright.sync_api import expect

    name = "permission-skip.ipynb"
    _create_notebook(lab_server, name)
    _open_notebook(page, lab_server, name)
    _wait_for_idle_kernel(lab_server, name, KERNEL_IDLE_TIMEOUT)
    panel = _open_panel(page)
    expect(panel.get_by_test_id("pal-status")).to_have_attribute(
        "data-connection", "connected", timeout=UI_TIMEOUT_MS
    )
    panel.get_by_role("combobox", name="Permission mode").select_option("ask")
    send_to_chat(panel, "Compute it.")
    bar = panel.get_by_test_id("pal-approval")
    expect(bar).to_be_visible(timeout=TURN_TIMEOUT_MS)
    bar.get_by_test_id("pal-approval-skip").click()
    expect(bar).to_be_hidden(timeout=UI_TIMEOUT_MS)
    expect(panel.get_by_test_id("pal-status")).to_have_attribute(
        "data-status", "idle", timeout=TURN_TIMEOUT_MS
    )
    for reloaded in (False, True):
        if reloaded:
            page.reload()
            panel = _open_panel(page)
        line = panel.get_by_test_id("pal-cell-line")
        expect(line).to_have_count(1, timeout=UI_TIMEOUT_MS)
        expect(line).to_have_attribute("data-status", "skipped")
        expect(line).to_have_attribute("data-decision", "skip")
        expect(line).to_have_attribute("title", re.compile(r"^Cell not run \(skipped with Skip\)"))
        expect(line).not_to_have_attribute("title", re.compile("withdrawn by Stop"))


def test_plan_mode_shows_the_code_it_did_not_run_live_and_after_a_reload(
    lab_server: LabServer, page: Any
) -> None:
    from playwright.sync_api import expect

    name = "permission-plan.ipynb"
    _create_notebook(lab_server, name)
    _open_notebook(page, lab_server, name)
    _wait_for_idle_kernel(lab_server, name, KERNEL_IDLE_TIMEOUT)
    panel = _open_panel(page)
    expect(panel.get_by_test_id("pal-status")).to_have_attribute(
        "data-connection", "connected", timeout=UI_TIMEOUT_MS
    )
    panel.get_by_role("combobox", name="Permission mode").select_option("plan")
    send_to_chat(panel, "Compute it.")
    expect(panel.get_by_test_id("pal-status")).to_have_attribute(
        "data-status", "idle", timeout=TURN_TIMEOUT_MS
    )
    for reloaded in (False, True):
        if reloaded:
            page.reload()
            panel = _open_panel(page)
        line = panel.locator('[data-testid="pal-notice"][data-kind="plan_not_run"]')
        expect(line).to_have_count(1, timeout=UI_TIMEOUT_MS)
        expect(line).to_contain_text("Not run: this session is in plan mode")
        code = line.get_by_test_id("pal-plan-code")
        expect(code.locator("pre")).to_be_hidden()
        code.locator("summary").click()
        expect(code.locator("pre")).to_have_text("print(6 * 7)")
        expect(panel.get_by_test_id("pal-cell-line")).to_have_count(0)
