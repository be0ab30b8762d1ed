"""The agent tree in a real JupyterLab: a root spawns two sub-agents from one cell, the user
follows them from the parent's chat into the child notebooks, the children reply, and a page
reload shows both chats exactly as they were.

Each child's first cell waits for a file the test writes, so the test decides when a child
finishes (no timing assumptions). Every page error or console error fails the test (`new_page`).
"""

from __future__ import annotations

import json
import re
import time
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

PARENT = "analysis.ipynb"
CHILDREN = {"part-a": "alpha", "part-b": "beta"}  # name -> task
SPAWN = (
    'a = await rlm("alpha", name="part-a")\n'
    'b = await rlm("beta", name="part-b")\n'
    "print(a.name, b.name)"
)
# The child waits for `<task>.go` in the shared working folder (the parent notebook's), then
# replies to its parent.
CHILD_WAIT = (
    "import asyncio, os\n"
    "while not os.path.exists('{task}.go'):\n"
    "    await asyncio.sleep(0.05)\n"
    "found = '{task}'.upper()\n"
    "print(found)"
)
CHILD_REPLY = 'receipt = await agent_message.send(f"summary of {found}", receiver_role="parent")'
SCRIPT = {
    "turns": [
        {"text": "Two sub-agents take a part each.", "code": SPAWN},
        {"text": "Both are working."},
        {"text": "Thanks: {messages}"},
        {"text": "Thanks again: {messages}"},
    ],
    "child": {
        "turns": [
            {"text": "Waiting for the data.", "code": CHILD_WAIT},
            {"text": "Replying.", "code": CHILD_REPLY},
            {"text": "Sent {task} to my parent."},
        ]
    },
}
ISO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}")
# What one entry of the chat shows: its test id, its state attributes and its text.
SNAPSHOT_JS = """
panel => [...panel.querySelectorAll('[data-testid="pal-transcript"] [data-testid]')]
  .filter(node => ['pal-user', 'pal-assistant', 'pal-cell-line', 'pal-child', 'pal-child-status',
    'pal-agent-message', 'pal-notice', 'pal-message-time'].includes(node.dataset.testid))
  .map(node => [node.dataset.testid, node.dataset.status ?? '', node.dataset.relationship ?? '',
    node.getAttribute('datetime') ?? '', node.innerText.trim()])
"""


@pytest.fixture(scope="module")
def lab_script() -> dict[str, Any]:
    return SCRIPT


def _session(server: LabServer, notebook: str) -> dict[str, Any]:
    sessions = server.api("GET", "prime-agent/api/sessions")["sessions"]
    (found,) = [s for s in sessions if s["notebook_path"] == notebook and s["status"] != "inactive"]
    return server.api("GET", f"prime-agent/api/sessions/{found['session_id']}")


TABS_JS = """() => [...document.querySelectorAll('.jp-NotebookPanel')].map(node => {
    const tab = document.querySelector(`.lm-TabBar-tab[data-id="${node.id}"]`);
    return {
        session: node.dataset.palSession ?? null,
        tab: tab ? tab.getAttribute('title') : null,
        current: tab ? tab.classList.contains('lm-mod-current') : null
    };
})"""
"""Each notebook tab: the agent session its panel holds, its path (the tab's tooltip), shown or
not."""


def _settled(panel: Any, server: LabServer, notebook: str) -> list[list[str]]:
    """The chat's entries once the panel shows `notebook` with every event the server has."""
    from playwright.sync_api import expect

    expect(panel.get_by_test_id("pal-notebook-path")).to_have_text(notebook, timeout=UI_TIMEOUT_MS)
    status = panel.get_by_test_id("pal-status")
    expect(status).to_have_attribute("data-connection", "connected", timeout=UI_TIMEOUT_MS)
    expect(status).to_have_attribute("data-status", "idle", timeout=TURN_TIMEOUT_MS)
    session = _session(server, notebook)
    try:
        expect(status).to_have_attribute("data-session", session["session_id"])
    except AssertionError as exc:  # rare under load: say everything the server knows
        sessions = server.api("GET", "prime-agent/api/sessions")["sessions"]
        known = [{k: s.get(k) for k in ("session_id", "notebook_path", "status")} for s in sessions]
        tabs = panel.page.evaluate(TABS_JS)
        raise AssertionError(
            f"{exc}\nserver sessions: {known}\nnotebook tabs: {tabs}\n{server.log_tail()}"
        ) from None
    expect(panel.get_by_test_id("pal-transcript")).to_have_attribute(
        "data-seq", str(session["seq"]), timeout=UI_TIMEOUT_MS
    )
    snapshot: list[list[str]] = panel.evaluate(SNAPSHOT_JS)
    return snapshot


def _show_tab(page: Any, notebook: str) -> None:
    label = notebook.rsplit("/", 1)[-1]
    page.locator(".jp-MainAreaWidget-ContainerTab, .lm-DockPanel-tabBar .lm-TabBar-tab").filter(
        has_text=label
    ).first.click()


def _release(server: LabServer, task: str) -> None:
    (server.root_dir / f"{task}.go").write_text("go")


def _ask_in_a_new_notebook(page: Any, server: LabServer, notebook: str, message: str) -> Any:
    """A new notebook open in JupyterLab with its kernel idle, the chat panel connected, and
    `message` sent; returns the panel."""
    from playwright.sync_api import expect

    _create_notebook(server, notebook)
    _open_notebook(page, server, notebook)
    _wait_for_idle_kernel(server, notebook, KERNEL_IDLE_TIMEOUT)
    panel = _open_panel(page)
    expect(panel.get_by_test_id("pal-status")).to_have_attribute(
        "data-connection", "connected", timeout=UI_TIMEOUT_MS
    )
    send_to_chat(panel, message)
    return panel


def _wait_for_saved_tab(page: Any, server: LabServer, path: str, timeout: float = 30) -> None:
    """Until the page's saved JupyterLab workspace has a tab of `path` open."""
    workspace = page.url.split("/lab/workspaces/", 1)[1].split("/", 1)[0]
    deadline = time.monotonic() + timeout
    while True:
        saved = server.api("GET", f"lab/api/workspaces/{workspace}")
        if f"notebook:{path}" in json.dumps(saved.get("data", {})):
            return
        assert time.monotonic() < deadline, f"the workspace never saved the tab of {path}"
        time.sleep(0.2)


def _wait_for_files(server: LabServer, paths: list[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not all((server.root_dir / p).exists() for p in paths):
        assert time.monotonic() < deadline, f"child notebooks {paths} never appeared"
        time.sleep(0.1)


def test_parent_chat_follows_two_sub_agents_into_their_notebooks_and_survives_a_reload(
    lab_server: LabServer, page: Any
) -> None:
    from playwright.sync_api import expect

    panel = _ask_in_a_new_notebook(
        page, lab_server, PARENT, "Summarise both parts with a sub-agent each."
    )

    # Two child lines, right after the line of the cell that spawned them, both running.
    children = panel.get_by_test_id("pal-child")
    expect(children).to_have_count(2, timeout=TURN_TIMEOUT_MS)
    expect(panel.get_by_test_id("pal-assistant").last).to_have_text(
        "Both are working.", timeout=TURN_TIMEOUT_MS
    )
    spawn_line = panel.get_by_test_id("pal-cell-line")
    expect(spawn_line).to_have_count(1)
    expect(spawn_line).to_have_attribute("data-status", "ok")
    order = panel.evaluate(
        """panel => [...panel.querySelectorAll(
             '[data-testid="pal-cell-line"], [data-testid="pal-child"]')]
           .map(node => node.dataset.testid)"""
    )
    assert order == ["pal-cell-line", "pal-child", "pal-child"], order
    for index, (name, task) in enumerate(CHILDREN.items()):
        line = children.nth(index)
        expect(line).to_have_attribute("data-path", f"analysis.agents/{name}.ipynb")
        expect(line).to_contain_text(f"spawned sub-agent {name}: {task}")
        expect(line.get_by_test_id("pal-child-status")).to_have_text("running")
        expect(line).to_have_attribute("data-status", "running")

    # The spawning cell's output links to each child notebook (JupyterLab turns a relative
    # link into the file's URL and opens it in a tab when clicked).
    notebook = page.locator(".jp-NotebookPanel:visible")
    spawn_cell = notebook.locator(".jp-Cell.pal-agent-cell").first
    for name in CHILDREN:
        expect(spawn_cell.locator(f'a[href*="/files/analysis.agents/{name}.ipynb?"]')).to_have_text(
            name, timeout=UI_TIMEOUT_MS
        )
    _wait_for_files(lab_server, [f"analysis.agents/{n}.ipynb" for n in CHILDREN], 30)

    # Open part-a from the chat: its notebook links back, and the chat follows to its session.
    children.nth(0).get_by_test_id("pal-child-link").click()
    child_path = "analysis.agents/part-a.ipynb"
    expect(panel.get_by_test_id("pal-notebook-path")).to_have_text(
        child_path, timeout=UI_TIMEOUT_MS
    )
    child_notebook = page.locator(".jp-NotebookPanel:visible")
    backlink = child_notebook.locator(".jp-Cell").first.locator('a[href*="/files/analysis.ipynb?"]')
    expect(backlink).to_have_text(PARENT, timeout=UI_TIMEOUT_MS)
    expect(panel.get_by_test_id("pal-family")).to_have_text(
        f"sub-agent part-a of {PARENT}", timeout=UI_TIMEOUT_MS
    )
    task = panel.get_by_test_id("pal-agent-message").first
    expect(task.get_by_test_id("pal-message-sender")).to_contain_text("task from parent")
    expect(task).to_contain_text("alpha")
    expect(task).to_have_attribute("data-relationship", "parent")
    expect(panel.get_by_test_id("pal-cell-line")).to_have_attribute("data-status", "running")

    # The child's cells arrive live in its tab as it finishes and replies.
    _release(lab_server, "alpha")
    child_cells = child_notebook.locator(".jp-CodeCell.pal-agent-cell")
    expect(child_cells.nth(0).locator(".jp-OutputArea-output")).to_have_text(
        "ALPHA", timeout=TURN_TIMEOUT_MS
    )
    expect(child_cells).to_have_count(2, timeout=TURN_TIMEOUT_MS)
    expect(child_cells.nth(1)).to_contain_text("agent_message.send")
    expect(panel.get_by_test_id("pal-assistant").last).to_have_text(
        "Sent alpha to my parent.", timeout=TURN_TIMEOUT_MS
    )
    child_before = _settled(panel, lab_server, child_path)

    # Back in the parent: part-a replied (badge and message); part-b moves live when released.
    _show_tab(page, PARENT)
    expect(panel.get_by_test_id("pal-notebook-path")).to_have_text(PARENT, timeout=UI_TIMEOUT_MS)
    expect(children.nth(0)).to_have_attribute("data-status", "replied", timeout=TURN_TIMEOUT_MS)
    expect(children.nth(0).get_by_test_id("pal-child-status")).to_have_text("replied")
    expect(children.nth(1)).to_have_attribute("data-status", "running")
    reply = panel.get_by_test_id("pal-agent-message").first
    expect(reply).to_have_attribute("data-relationship", "child")
    expect(reply.get_by_test_id("pal-message-sender")).to_contain_text("from child part-a")
    expect(reply).to_contain_text("summary of ALPHA")
    expect(reply.get_by_test_id("pal-message-time")).to_have_attribute("datetime", ISO_TIME)
    _release(lab_server, "beta")
    expect(children.nth(1)).to_have_attribute("data-status", "replied", timeout=TURN_TIMEOUT_MS)
    expect(panel.get_by_test_id("pal-agent-message")).to_have_count(2, timeout=TURN_TIMEOUT_MS)
    expect(panel.get_by_test_id("pal-agent-message").nth(1)).to_contain_text("from child part-b")
    parent_before = _settled(panel, lab_server, PARENT)
    save_screenshot(page, "agent_tree.png")

    # A reload shows both chats as they were, badges included. JupyterLab restores the tabs its
    # workspace saved, and it saves the layout a moment after it changes (later under load):
    # reload once the saved workspace holds the child's tab, as a user's reload would find it.
    _wait_for_saved_tab(page, lab_server, child_path)
    page.reload()
    panel = _open_panel(page)
    _show_tab(page, PARENT)
    assert _settled(panel, lab_server, PARENT) == parent_before
    _show_tab(page, child_path)
    assert _settled(panel, lab_server, child_path) == child_before
