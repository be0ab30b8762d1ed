"""The Prime Agent panel drives the scripted agent end to end in a real JupyterLab.

A prompt typed into the panel starts a turn; the agent's cells appear live in the open notebook
(badged, with their outputs), the panel lists them and shows the final answer.
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

import nbformat
import pytest

from .conftest import LabServer, save_screenshot

pytestmark = pytest.mark.browser

NOTEBOOK = "demo.ipynb"
PROMPT = "How many of the first 100 squares are even?"
FINAL_TEXT = "Done: hello from the agent: 50 even squares."

SCRIPT = {
    "turns": [
        {
            "text": "I'll keep the numbers in a variable and look at their size first.",
            "code": "squares = [n * n for n in range(1, 101)]\n"
            "print(f'{len(squares)} squares, sum = {sum(squares):,}')",
        },
        {
            "text": "Now I filter the even ones in code instead of reading them.",
            "code": "evens = [n for n in squares if n % 2 == 0]\n"
            "print(f'hello from the agent: {len(evens)} even squares')",
        },
        {"text": "Done: {last_output_line}."},
    ]
}

# Generous bounds for a 2-core machine; each wait returns as soon as its condition holds.
KERNEL_IDLE_TIMEOUT = 60.0
UI_TIMEOUT_MS = 30_000
TURN_TIMEOUT_MS = 60_000


@pytest.fixture(scope="module")
def lab_script() -> dict[str, Any]:
    return SCRIPT


def _open_panel(page: Any) -> Any:
    """Open the sidebar from its tab, as a user would, once JupyterLab has opened the page's file.

    The tab toggles, and JupyterLab may still be restoring its layout, so click only while
    the tab is not current and check again until the panel shows (bounded).
    """
    from playwright.sync_api import expect

    _wait_for_the_urls_file(page)
    tab = page.locator('.jp-SideBar.jp-mod-right .lm-TabBar-tab[data-id="prime-agent-lab-chat"]')
    panel = page.get_by_test_id("pal-chat-panel")
    deadline = time.monotonic() + UI_TIMEOUT_MS / 1000
    while True:
        if "lm-mod-current" not in (tab.get_attribute("class", timeout=UI_TIMEOUT_MS) or ""):
            tab.click()
        try:
            expect(panel).to_be_visible(timeout=2_000)
            return panel
        except AssertionError:
            if time.monotonic() > deadline:
                raise


def _wait_for_the_urls_file(page: Any) -> None:
    """Wait until JupyterLab has opened the file in the page's URL (`.../tree/<path>`).

    It does that after restoring the layout, and brings the file's tab to the front: a tab the
    test opened meanwhile goes to the back (a child opened right after a reload lost its tab to
    the parent 1.5 s later, tests/browser/test_tree_notices.py). The default file browser holds
    `jp-mod-restoring` until that open has finished, also when the URL names no file.
    """
    page.locator("#filebrowser:not(.jp-mod-restoring)").wait_for(
        state="attached", timeout=UI_TIMEOUT_MS
    )


def _open_notebook(page: Any, server: LabServer, name: str) -> None:
    """Open `name` in a fresh workspace, so no layout saved by an earlier page is restored."""
    workspace = f"test-{uuid.uuid4().hex[:8]}"
    page.goto(server.lab_url(f"lab/workspaces/{workspace}/tree/{name}"), timeout=UI_TIMEOUT_MS)


def _create_notebook(server: LabServer, name: str, heading: str = "# Prime Agent demo") -> None:
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    }
    notebook.cells.append(nbformat.v4.new_markdown_cell(heading))
    nbformat.write(notebook, server.root_dir / name)


def _wait_for_idle_kernel(server: LabServer, path: str, timeout: float) -> str:
    """Poll the sessions API until the notebook's kernel is idle; returns the kernel id."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = server.api("GET", "api/sessions")
        for session in last:
            kernel = session.get("kernel") or {}
            if session.get("path") == path and kernel.get("execution_state") == "idle":
                return str(kernel["id"])
        time.sleep(0.25)
    pytest.fail(f"no idle kernel for {path} within {timeout:.0f}s; sessions: {last}")


def test_prompt_runs_agent_cells_in_the_open_notebook(lab_server: LabServer, page: Any) -> None:
    from playwright.sync_api import expect

    started = time.monotonic()
    _create_notebook(lab_server, NOTEBOOK)
    _open_notebook(page, lab_server, NOTEBOOK)

    notebook = page.locator(".jp-NotebookPanel")
    expect(notebook).to_be_visible(timeout=UI_TIMEOUT_MS)
    kernel_id = _wait_for_idle_kernel(lab_server, NOTEBOOK, KERNEL_IDLE_TIMEOUT)

    panel = _open_panel(page)
    expect(panel.get_by_test_id("pal-notebook-path")).to_have_text(NOTEBOOK)
    status = panel.get_by_test_id("pal-status")
    expect(status).to_have_attribute("data-connection", "connected", timeout=UI_TIMEOUT_MS)
    expect(status).to_have_attribute("data-status", "idle")
    expect(status).to_contain_text("scripted")

    # The panel told the server which kernel this tab uses, and attached to it.
    sessions = lab_server.api("GET", "prime-agent/api/sessions")["sessions"]
    assert [s["kernel_id"] for s in sessions if s["notebook_path"] == NOTEBOOK] == [kernel_id]

    # Enter sends.
    chat_input = panel.get_by_test_id("pal-chat-input")
    chat_input.fill(PROMPT)
    chat_input.press("Enter")
    expect(panel.get_by_test_id("pal-user")).to_have_text(PROMPT, timeout=UI_TIMEOUT_MS)

    # The agent's cells arrive live in the open notebook, badged, with their outputs.
    agent_cells = notebook.locator(".jp-Cell.pal-agent-cell")
    agent_output = agent_cells.locator(".jp-OutputArea-output").filter(
        has_text="hello from the agent: 50 even squares"
    )
    expect(agent_output).to_be_visible(timeout=TURN_TIMEOUT_MS)
    expect(agent_cells).to_have_count(2)
    expect(agent_cells.first).to_have_attribute("data-pal-badge", "agent · turn 1")
    expect(agent_cells.first.locator(".jp-OutputArea-output")).to_contain_text(
        "100 squares, sum = 338,350"
    )

    # The panel lists one line per cell and shows the final answer; the turn is over.
    cell_lines = panel.get_by_test_id("pal-cell-line")
    expect(cell_lines).to_have_count(2, timeout=TURN_TIMEOUT_MS)
    expect(cell_lines.nth(0)).to_have_attribute("data-status", "ok")
    expect(cell_lines.nth(1)).to_have_attribute("data-status", "ok")
    expect(cell_lines.nth(1)).to_contain_text("evens = [n for n in squares")
    expect(cell_lines.nth(1).locator(".pal-cell-count")).to_have_text(re.compile(r"\[\d+\]"))
    expect(panel.get_by_test_id("pal-assistant").last).to_have_text(
        FINAL_TEXT, timeout=TURN_TIMEOUT_MS
    )
    expect(status).to_have_attribute("data-status", "idle", timeout=TURN_TIMEOUT_MS)
    expect(panel.get_by_test_id("pal-stop")).to_be_disabled()

    # A cell line jumps to its cell.
    cell_lines.nth(0).click()
    expect(agent_cells.first).to_have_class(re.compile(r"\bjp-mod-active\b"), timeout=UI_TIMEOUT_MS)

    # Settle the view for the screenshot: file browser folded, the last output in sight.
    page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current").click()
    expect(page.locator("#filebrowser")).to_be_hidden(timeout=UI_TIMEOUT_MS)
    chat_input.click()
    agent_output.scroll_into_view_if_needed()
    save_screenshot(page, "chat_panel.png")

    errors = [e for e in page.console_errors if "prime-agent" in e.lower()]
    assert not errors, f"console errors from the extension: {errors}"
    print(f"browser test body took {time.monotonic() - started:.1f}s")


def test_reopened_notebook_resumes_the_transcript(lab_server: LabServer, page: Any) -> None:
    """A fresh page (reload, second tab) shows the finished turn once: the transcript from
    GET session plus the replayed events must not duplicate anything."""
    from playwright.sync_api import expect

    if not (lab_server.root_dir / NOTEBOOK).exists():
        pytest.skip("needs the notebook of the previous test")
    _open_notebook(page, lab_server, NOTEBOOK)
    notebook = page.locator(".jp-NotebookPanel")
    expect(notebook.locator(".jp-Cell.pal-agent-cell")).to_have_count(2, timeout=UI_TIMEOUT_MS)

    panel = _open_panel(page)
    status = panel.get_by_test_id("pal-status")
    expect(status).to_have_attribute("data-connection", "connected", timeout=UI_TIMEOUT_MS)
    # Wait until the panel has folded in every event the server has for this session.
    sessions = lab_server.api("GET", "prime-agent/api/sessions")["sessions"]
    session_id = next(s["session_id"] for s in sessions if s["notebook_path"] == NOTEBOOK)
    session = lab_server.api("GET", f"prime-agent/api/sessions/{session_id}")
    expect(panel.get_by_test_id("pal-transcript")).to_have_attribute(
        "data-seq", str(session["seq"]), timeout=UI_TIMEOUT_MS
    )
    expect(panel.get_by_test_id("pal-assistant").last).to_have_text(FINAL_TEXT)
    expect(panel.get_by_test_id("pal-user")).to_have_count(1)
    expect(panel.get_by_test_id("pal-assistant")).to_have_count(3)
    cell_lines = panel.get_by_test_id("pal-cell-line")
    expect(cell_lines).to_have_count(2)
    expect(cell_lines.nth(1)).to_have_attribute("data-status", "ok")
    expect(cell_lines.nth(1)).to_contain_text("evens = [n for n in squares")
