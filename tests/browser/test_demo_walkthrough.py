"""The README's first run: the bundled demo notebook and demo model, driven from the panel."""

from __future__ import annotations

import json
import shutil
from typing import Any

import pytest

from prime_agent_lab.cli import DEMO_NOTEBOOK
from prime_agent_lab.providers.scripted import DEFAULT_SCRIPT

from .conftest import LabServer, copy_to_docs, save_screenshot
from .test_chat_panel import (
    KERNEL_IDLE_TIMEOUT,
    TURN_TIMEOUT_MS,
    UI_TIMEOUT_MS,
    _open_notebook,
    _open_panel,
    _wait_for_idle_kernel,
)

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def lab_script() -> dict[str, Any]:
    return json.loads(DEFAULT_SCRIPT.read_text())


def test_demo_notebook_walkthrough_finds_the_incident(lab_server: LabServer, page: Any) -> None:
    from playwright.sync_api import expect

    shutil.copyfile(DEMO_NOTEBOOK, lab_server.root_dir / DEMO_NOTEBOOK.name)
    _open_notebook(page, lab_server, DEMO_NOTEBOOK.name)
    notebook = page.locator(".jp-NotebookPanel")
    expect(notebook).to_be_visible(timeout=UI_TIMEOUT_MS)
    _wait_for_idle_kernel(lab_server, DEMO_NOTEBOOK.name, KERNEL_IDLE_TIMEOUT)

    panel = _open_panel(page)
    expect(panel.get_by_test_id("pal-status")).to_have_attribute(
        "data-connection", "connected", timeout=UI_TIMEOUT_MS
    )
    chat_input = panel.get_by_test_id("pal-chat-input")
    chat_input.fill("Find the incident in the server log.")
    chat_input.press("Enter")

    agent_cells = notebook.locator(".jp-Cell.pal-agent-cell")
    expect(agent_cells.nth(2).locator(".jp-OutputArea-output")).to_contain_text(
        "FOUND: INC-4471", timeout=TURN_TIMEOUT_MS
    )
    expect(agent_cells).to_have_count(3)
    # The agent's cells go above the demo's empty scratch cell, which stays last for the user.
    cells = notebook.locator(".jp-Notebook .jp-Cell")
    expect(cells.last).not_to_have_class("pal-agent-cell")
    expect(panel.get_by_test_id("pal-assistant").last).to_contain_text(
        "FOUND: INC-4471 at line", timeout=TURN_TIMEOUT_MS
    )
    expect(panel.get_by_test_id("pal-cell-line")).to_have_count(3)

    page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current").click()
    expect(page.locator("#filebrowser")).to_be_hidden(timeout=UI_TIMEOUT_MS)
    agent_cells.nth(1).scroll_into_view_if_needed()
    path = save_screenshot(page, "demo_walkthrough.png")
    copy_to_docs(path, "screenshot.png")
