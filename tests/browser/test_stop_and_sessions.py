"""Stop, reload, and a second browser: the panel keeps showing what happened, without errors.

Every test here fails on any uncaught page error or console error (see `new_page`).
"""

from __future__ import annotations

import re
from typing import Any

import nbformat
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

pytestmark = pytest.mark.browser

SLOW_CELL = "import time\nprint('started', flush=True)\ntime.sleep(5)\nprint('finished')"
SCRIPT = {"turns": [{"text": "Sleeping a while.", "code": SLOW_CELL}, {"text": "All done."}]}
# Enough of the user's own cells that the agent's cell, appended at the end, starts out of view.
FILLER_CELLS = 40


@pytest.fixture(scope="module")
def lab_script() -> dict[str, Any]:
    return SCRIPT


def _create_long_notebook(server: LabServer, name: str) -> None:
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    }
    notebook.cells = [
        nbformat.v4.new_markdown_cell(f"## Note {n}\n\nSome text the user wrote.")
        for n in range(FILLER_CELLS)
    ]
    nbformat.write(notebook, server.root_dir / name)


def _connected_panel(page: Any, server: LabServer, name: str) -> Any:
    from playwright.sync_api import expect

    _open_notebook(page, server, name)
    expect(page.locator(".jp-NotebookPanel")).to_be_visible(timeout=UI_TIMEOUT_MS)
    panel = _open_panel(page)
    expect(panel.get_by_test_id("pal-status")).to_have_attribute(
        "data-connection", "connected", timeout=UI_TIMEOUT_MS
    )
    return panel


def _in_viewport(page: Any, cell: Any) -> bool:
    """Whether `cell` overlaps the notebook's scrolled viewport."""
    scroller = page.locator(".jp-NotebookPanel .jp-WindowedPanel-outer").first.bounding_box()
    box = cell.bounding_box()
    return bool(
        scroller
        and box
        and box["y"] < scroller["y"] + scroller["height"]
        and box["y"] + box["height"] > scroller["y"]
    )


def session_of(server: LabServer, notebook: str) -> dict[str, Any]:
    sessions = server.api("GET", "prime-agent/api/sessions")["sessions"]
    attached = [s for s in sessions if s["notebook_path"] == notebook and s["status"] != "inactive"]
    assert len(attached) == 1, sessions
    return server.api("GET", f"prime-agent/api/sessions/{attached[0]['session_id']}")


def test_stopped_turn_survives_a_reload(lab_server: LabServer, page: Any) -> None:
    """Stop mid-cell, reload: the user's message, the cell line and "Stopped." are still there,
    the empty-state text is not, and the page raised no error (the fixture checks)."""
    from playwright.sync_api import expect

    name = "stop-reload.ipynb"
    _create_long_notebook(lab_server, name)
    _open_notebook(page, lab_server, name)
    _wait_for_idle_kernel(lab_server, name, KERNEL_IDLE_TIMEOUT)
    panel = _connected_panel(page, lab_server, name)
    prompt = "Sleep for a while, please."
    send_to_chat(panel, prompt)

    # The agent's cell runs; the notebook followed it to the end of the long notebook.
    agent_cell = page.locator(".jp-NotebookPanel .jp-Cell.pal-agent-cell")
    expect(agent_cell.locator(".jp-OutputArea-output")).to_contain_text(
        "started", timeout=TURN_TIMEOUT_MS
    )
    assert _in_viewport(page, agent_cell), "the notebook did not follow the agent's cell"
    cell_line = panel.get_by_test_id("pal-cell-line")
    expect(cell_line).to_have_attribute("data-status", "running")

    panel.get_by_test_id("pal-stop").click()
    expect(panel.get_by_test_id("pal-notice")).to_have_text("Stopped.", timeout=TURN_TIMEOUT_MS)
    expect(cell_line).to_have_attribute("data-status", "interrupted")
    expect(panel.get_by_test_id("pal-status")).to_have_attribute("data-status", "idle")

    page.reload()
    panel = _connected_panel(page, lab_server, name)
    session = session_of(lab_server, name)
    expect(panel.get_by_test_id("pal-transcript")).to_have_attribute(
        "data-seq", str(session["seq"]), timeout=UI_TIMEOUT_MS
    )
    expect(panel.get_by_test_id("pal-user")).to_have_text([prompt])
    expect(panel.get_by_test_id("pal-assistant")).to_have_text(["Sleeping a while."])
    cell_line = panel.get_by_test_id("pal-cell-line")
    expect(cell_line).to_have_count(1)
    expect(cell_line).to_have_attribute("data-status", "interrupted")
    expect(cell_line).to_contain_text("import time")
    expect(panel.get_by_test_id("pal-notice")).to_have_text(["Stopped."])
    expect(panel.get_by_test_id("pal-empty")).to_have_count(0)

    # The panel's count is the notebook's `[n]` (the cell is brought into view first: a windowed
    # notebook does not render cells far below the viewport after a reload).
    agent_cell.scroll_into_view_if_needed()
    panel_count = re.sub(r"[^\d]", "", cell_line.locator(".pal-cell-count").inner_text())
    assert panel_count, "the interrupted cell lost its execution count in the panel"
    expect(agent_cell.locator(".jp-InputPrompt")).to_contain_text(f"[{panel_count}]")


def test_second_browser_new_session_is_offered_not_followed(
    lab_server: LabServer, new_page: Any
) -> None:
    """Browser B starts a New session on the notebook browser A has open: A stays on its
    session with a "taken over" line (the `inactive` event) whose Switch to it follows the new
    session, and A's next message runs in the new session, seen by both."""
    from playwright.sync_api import expect

    name = "two-browsers.ipynb"
    _create_long_notebook(lab_server, name)
    page_a, page_b = new_page(), new_page()
    _open_notebook(page_a, lab_server, name)
    _wait_for_idle_kernel(lab_server, name, KERNEL_IDLE_TIMEOUT)
    panel_a = _connected_panel(page_a, lab_server, name)
    panel_b = _connected_panel(page_b, lab_server, name)
    first = session_of(lab_server, name)["session_id"]

    panel_b.get_by_test_id("pal-new-session").click()
    expect(panel_b.get_by_test_id("pal-status")).to_have_attribute(
        "data-connection", "connected", timeout=UI_TIMEOUT_MS
    )
    second = session_of(lab_server, name)
    assert second["session_id"] != first
    status_a = panel_a.get_by_test_id("pal-status")
    takeover = panel_a.locator('[data-testid="pal-notice"][data-kind="taken_over"]')
    expect(takeover).to_have_count(1, timeout=UI_TIMEOUT_MS)
    expect(takeover).to_contain_text("Another session took over this notebook")
    expect(status_a).to_have_attribute("data-session", first)
    # Nothing switches until A asks: the status says A's tab shows an older session.
    expect(status_a).to_contain_text("This tab shows an older session", timeout=UI_TIMEOUT_MS)
    expect(status_a).not_to_contain_text("Switching")
    status_item_a = page_a.get_by_test_id("pal-status-item")
    expect(status_item_a).to_have_attribute("data-status", "taken_over", timeout=UI_TIMEOUT_MS)
    expect(status_item_a).to_contain_text("this tab shows an older session")
    takeover.get_by_test_id("pal-takeover-switch").click()
    expect(status_a).to_have_attribute("data-session", second["session_id"], timeout=UI_TIMEOUT_MS)
    expect(status_a).to_have_attribute("data-connection", "connected", timeout=UI_TIMEOUT_MS)
    expect(status_a).not_to_contain_text("older session")
    expect(status_item_a).to_have_text(re.compile(r"^Prime Agent: idle"), timeout=UI_TIMEOUT_MS)

    send_to_chat(panel_a, "Hello from browser A.")
    expect(panel_a.get_by_test_id("pal-error")).to_have_count(0)
    for panel in (panel_a, panel_b):
        expect(panel.get_by_test_id("pal-user")).to_have_text(
            ["Hello from browser A."], timeout=TURN_TIMEOUT_MS
        )
    # Stop the slow cell rather than wait for it: only the routing is under test here.
    expect(panel_a.get_by_test_id("pal-cell-line")).to_have_count(1, timeout=TURN_TIMEOUT_MS)
    panel_a.get_by_test_id("pal-stop").click()
    for panel in (panel_a, panel_b):
        expect(panel.get_by_test_id("pal-notice")).to_have_text(
            ["Stopped."], timeout=TURN_TIMEOUT_MS
        )
    assert session_of(lab_server, name)["session_id"] == second["session_id"]


def test_follow_switch_leaves_the_notebook_where_it_is(lab_server: LabServer, page: Any) -> None:
    from playwright.sync_api import expect

    name = "no-follow.ipynb"
    _create_long_notebook(lab_server, name)
    _open_notebook(page, lab_server, name)
    _wait_for_idle_kernel(lab_server, name, KERNEL_IDLE_TIMEOUT)
    panel = _connected_panel(page, lab_server, name)
    switch = panel.get_by_test_id("pal-follow-cells")
    expect(switch).to_be_checked()
    switch.uncheck()
    send_to_chat(panel, "Sleep, but leave my notebook alone.")
    agent_cell = page.locator(".jp-NotebookPanel .jp-Cell.pal-agent-cell")
    expect(panel.get_by_test_id("pal-cell-line")).to_have_attribute(
        "data-status", "running", timeout=TURN_TIMEOUT_MS
    )
    first_cell = page.locator(".jp-NotebookPanel .jp-Cell").first
    assert _in_viewport(page, first_cell), "the notebook scrolled although following was off"
    assert agent_cell.count() == 0 or not _in_viewport(page, agent_cell)
    panel.get_by_test_id("pal-stop").click()
    expect(panel.get_by_test_id("pal-notice")).to_have_text(["Stopped."], timeout=TURN_TIMEOUT_MS)
    # The switch is remembered for the next page load.
    page.reload()
    expect(
        _connected_panel(page, lab_server, name).get_by_test_id("pal-follow-cells")
    ).not_to_be_checked()


def test_send_to_a_session_no_longer_attached_says_so_and_keeps_the_message(
    lab_server: LabServer, new_page: Any
) -> None:
    """Page A misses the `inactive` event (its event socket drops it): its next message is
    answered 404, and the panel says it was not sent, keeps it in the input and offers the
    switch; after Switch to it, sending it again runs it in the notebook's current session."""
    from playwright.sync_api import expect

    name = "missed-inactive.ipynb"
    _create_long_notebook(lab_server, name)
    page_a, page_b = new_page(), new_page()

    def drop_inactive(socket: Any) -> None:
        server = socket.connect_to_server()
        server.on_message(
            lambda message: None if '"inactive"' in str(message) else socket.send(message)
        )

    page_a.route_web_socket(re.compile(r"/prime-agent/api/sessions/.*/events"), drop_inactive)
    # The browser logs the 404 of the first send; the panel handles it.
    page_a.expected_errors.append(("status of 404", "/messages"))
    _open_notebook(page_a, lab_server, name)
    _wait_for_idle_kernel(lab_server, name, KERNEL_IDLE_TIMEOUT)
    panel_a = _connected_panel(page_a, lab_server, name)
    panel_b = _connected_panel(page_b, lab_server, name)
    first = session_of(lab_server, name)["session_id"]
    expect(panel_a.get_by_test_id("pal-status")).to_have_attribute("data-session", first)

    panel_b.get_by_test_id("pal-new-session").click()
    expect(panel_b.get_by_test_id("pal-status")).not_to_have_attribute(
        "data-session", first, timeout=UI_TIMEOUT_MS
    )
    second = session_of(lab_server, name)["session_id"]
    expect(panel_a.get_by_test_id("pal-status")).to_have_attribute("data-session", first)

    send_to_chat(panel_a, "Sent after the switch.")
    expect(panel_a.get_by_test_id("pal-error")).to_contain_text("Not sent", timeout=UI_TIMEOUT_MS)
    expect(panel_a.get_by_test_id("pal-chat-input")).to_have_value("Sent after the switch.")
    expect(panel_a.get_by_test_id("pal-status")).to_have_attribute("data-session", first)
    panel_a.get_by_test_id("pal-takeover-switch").click()
    expect(panel_a.get_by_test_id("pal-status")).to_have_attribute(
        "data-session", second, timeout=UI_TIMEOUT_MS
    )
    expect(panel_a.get_by_test_id("pal-status")).to_have_attribute(
        "data-connection", "connected", timeout=UI_TIMEOUT_MS
    )
    panel_a.get_by_test_id("pal-chat-input").press("Enter")
    for panel in (panel_a, panel_b):
        expect(panel.get_by_test_id("pal-user")).to_have_text(
            ["Sent after the switch."], timeout=TURN_TIMEOUT_MS
        )
    expect(panel_a.get_by_test_id("pal-error")).to_have_count(0)
    expect(panel_a.get_by_test_id("pal-cell-line")).to_have_count(1, timeout=TURN_TIMEOUT_MS)
    panel_a.get_by_test_id("pal-stop").click()
    expect(panel_b.get_by_test_id("pal-notice")).to_have_text(["Stopped."], timeout=TURN_TIMEOUT_MS)


def test_the_chat_input_keeps_a_draft_per_notebook(lab_server: LabServer, page: Any) -> None:
    """Text typed while notebook X is shown stays with X: notebook Y's tab shows Y's own (empty)
    input, so Enter cannot send X's text to Y's agent; back on X the text is there."""
    from playwright.sync_api import expect

    first, second = "draft-x.ipynb", "draft-y.ipynb"
    for name in (first, second):
        _create_long_notebook(lab_server, name)
    _open_notebook(page, lab_server, first)
    _wait_for_idle_kernel(lab_server, first, KERNEL_IDLE_TIMEOUT)
    # The second from the file browser, as a user does: both tabs in one page.
    page.locator(".jp-DirListing-item").filter(has_text=second).first.dblclick(
        timeout=UI_TIMEOUT_MS
    )
    expect(page.locator(".jp-NotebookPanel")).to_have_count(2, timeout=UI_TIMEOUT_MS)
    _wait_for_idle_kernel(lab_server, second, KERNEL_IDLE_TIMEOUT)
    panel = _open_panel(page)
    chat_input = panel.get_by_test_id("pal-chat-input")
    path = panel.get_by_test_id("pal-notebook-path")

    _show_notebook_tab(page, first)
    expect(path).to_contain_text(first, timeout=UI_TIMEOUT_MS)
    chat_input.fill("Only for X.")
    _show_notebook_tab(page, second)
    expect(path).to_contain_text(second, timeout=UI_TIMEOUT_MS)
    expect(chat_input).to_have_value("")
    chat_input.fill("For Y.")
    _show_notebook_tab(page, first)
    expect(path).to_contain_text(first, timeout=UI_TIMEOUT_MS)
    expect(chat_input).to_have_value("Only for X.")
    _show_notebook_tab(page, second)
    expect(chat_input).to_have_value("For Y.", timeout=UI_TIMEOUT_MS)
    assert not panel.get_by_test_id("pal-user").count()  # nothing was sent anywhere


def _show_notebook_tab(page: Any, name: str) -> None:
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab").filter(has_text=name).first.click()
