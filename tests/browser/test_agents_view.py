"""The Agents View in a real JupyterLab (docs/agents-view.md "The tab"): a root spawns two
sub-agents with the scripted provider; the view, opened from the palette, lists the root and
both children and follows their states live (a draft message keeps its focus and text through
the update); the user opens a child's notebook and its chat, messages a child, stops a subtree;
the stopped child is evicted and keeps its outcome; a delete asks first; every text is readable in
the light and dark themes, the view fits a narrow main area, and a reload restores the tab.

Each child's first cell waits for a file the test writes, so the test decides when a child
finishes (no timing assumptions). Children are evicted after 0.6 s idle (`evict_after_minutes`),
and only an idle child with no notebook tab or chat open is evicted (docs/lifecycle.md), so only
the child the test never opens (part-b) is. Every page error or console error fails the test.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from ..lab_process import ServerDidNotStart, shutdown, start_lab
from .conftest import LabServer, save_screenshot
from .test_agent_tree import CHILD_REPLY, CHILD_WAIT, _ask_in_a_new_notebook, _release
from .test_branch_badge import _switch_theme
from .test_chat_panel import (
    TURN_TIMEOUT_MS,
    UI_TIMEOUT_MS,
    _open_panel,
    _wait_for_the_urls_file,
)
from .test_pairing_keyboard import _palette, _unreadable

pytestmark = pytest.mark.browser

PARENT = "fleet.ipynb"
ROOT_NAME = "fleet"  # a root's name is its notebook's stem
SPAWN = (
    'a = await rlm("alpha", name="part-a")\n'
    'b = await rlm("beta", name="part-b")\n'
    "print(a.name, b.name)"
)
MESSAGE = "Check column x once more."
SCRIPT = {
    "turns": [
        {"text": "Two sub-agents take a part each.", "code": SPAWN},
        {"text": "Both are working."},
        {"text": "Thanks: {messages}"},
        {"text": "Noted: {messages}"},
        {"text": "Noted again: {messages}"},
    ],
    "child": {
        "turns": [
            {"text": "Waiting for the data.", "code": CHILD_WAIT},
            {"text": "Replying.", "code": CHILD_REPLY},
            {"text": "Sent {task} to my parent."},
            {"text": "Got it: {messages}"},
            {"text": "Got that too: {messages}"},
        ]
    },
}
EVICT_AFTER_MINUTES = 0.01
# JupyterLab's workspace key of the restored tab: the tracker's namespace and the name it gives.
RESTORED_KEY = "prime-agent-lab-agents:agents-view"
NARROW_VIEWPORT = {"width": 700, "height": 900}


@pytest.fixture(scope="module")
def lab_server(
    tmp_path_factory: pytest.TempPathFactory,
    lab_user_settings: dict[str, dict[str, Any]],
) -> Iterator[LabServer]:
    """A scripted lab whose idle sub-agents are evicted within a second."""
    try:
        server = start_lab(
            tmp_path_factory.mktemp("lab"),
            SCRIPT,
            lab_user_settings,
            extra_args=(f"--PrimeAgentLab.evict_after_minutes={EVICT_AFTER_MINUTES}",),
        )
    except ServerDidNotStart as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server
    finally:
        shutdown(server)


def _row(view: Any, name: str) -> Any:
    return view.locator(f'[data-testid="pal-agent-row"][data-name="{name}"]')


def _shown(view: Any) -> list[list[str]]:
    """Each row's name and depth, top to bottom."""
    rows: list[list[str]] = view.evaluate(
        """view => [...view.querySelectorAll('[data-testid="pal-agent-row"]')]
             .map(row => [row.dataset.name, row.dataset.depth])"""
    )
    return rows


def _agent_id(server: LabServer, name: str) -> str:
    (found,) = [
        a for a in server.api("GET", "prime-agent/api/agents")["agents"] if a["name"] == name
    ]
    return str(found["session_id"])


def _wait_for_text_in_session(
    server: LabServer, session_id: str, text: str, timeout: float
) -> None:
    """Read from its log on disk: the agent may be evicted (unloaded) at any moment here."""
    log = server.base / "sessions" / session_id / "session.jsonl"
    needle = json.dumps(text)[1:-1]
    deadline = time.monotonic() + timeout
    while needle not in (log.read_text(encoding="utf-8") if log.exists() else ""):
        assert time.monotonic() < deadline, f"{text!r} never reached session {session_id}"
        time.sleep(0.2)


def _wait_for_saved_view(page: Any, server: LabServer, timeout: float = 30) -> None:
    """Until the page's saved JupyterLab workspace holds the Agents View's tab."""
    workspace = page.url.split("/lab/workspaces/", 1)[1].split("/", 1)[0]
    deadline = time.monotonic() + timeout
    while RESTORED_KEY not in json.dumps(server.api("GET", f"lab/api/workspaces/{workspace}")):
        assert time.monotonic() < deadline, "the workspace never saved the Agents View tab"
        time.sleep(0.2)


def _agents_tab(page: Any) -> Any:
    label = page.locator(".lm-TabBar-tabLabel", has_text=re.compile(r"^Agents$"))
    return page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab").filter(has=label)


def _current_main_tab(page: Any) -> Any:
    return page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current")


def test_the_agents_view_follows_a_tree_live_and_acts_on_its_agents(
    lab_server: LabServer, page: Any
) -> None:
    from playwright.sync_api import expect

    panel = _ask_in_a_new_notebook(page, lab_server, PARENT, "Split the work in two.")
    expect(panel.get_by_test_id("pal-child")).to_have_count(2, timeout=TURN_TIMEOUT_MS)
    expect(panel.get_by_test_id("pal-assistant").last).to_have_text(
        "Both are working.", timeout=TURN_TIMEOUT_MS
    )

    # The palette opens the tab: the root and its two children, indented by depth, both running.
    _palette(page, "Open Agents View")
    view = page.get_by_test_id("pal-agents-view")
    expect(view).to_be_visible(timeout=UI_TIMEOUT_MS)
    expect(view.get_by_test_id("pal-agents-connection")).to_have_attribute(
        "data-state", "open", timeout=UI_TIMEOUT_MS
    )
    rows = view.get_by_test_id("pal-agent-row")
    expect(rows).to_have_count(3, timeout=UI_TIMEOUT_MS)
    assert _shown(view) == [[ROOT_NAME, "0"], ["part-a", "1"], ["part-b", "1"]]
    part_a, part_b, root = _row(view, "part-a"), _row(view, "part-b"), _row(view, ROOT_NAME)
    for child in (part_a, part_b):
        expect(child).to_have_attribute("data-state", "running", timeout=UI_TIMEOUT_MS)
        expect(child.get_by_test_id("pal-agent-outcome")).to_have_text("no outcome yet")
        expect(child.get_by_test_id("pal-agent-model")).to_contain_text("scripted")
        expect(child.get_by_test_id("pal-agent-notebook")).to_contain_text(".agents/")
    # The root's turn ended, its sub-agents run: it waits for them (docs/agents-view.md).
    expect(root).to_have_attribute("data-state", "waiting", timeout=TURN_TIMEOUT_MS)
    expect(root.get_by_test_id("pal-agent-notebook")).to_have_text(PARENT)
    expect(root).to_have_attribute(
        "aria-label", re.compile(rf"^agent {ROOT_NAME}, waiting for a sub-agent")
    )
    expect(part_a).to_have_attribute("aria-label", re.compile(r"^sub-agent part-a, running"))
    expect(root.get_by_test_id("pal-agent-activity")).to_have_attribute(
        "title", re.compile(r"^Last activity: .+")
    )

    # Filter by state: waiting shows the root alone; all shows the three again.
    view.locator('[data-filter="waiting"]').click()
    expect(rows).to_have_count(1)
    expect(view.locator('[data-filter="waiting"]')).to_have_attribute("aria-pressed", "true")
    view.locator('[data-filter="running"]').click()
    expect(rows).to_have_count(3)  # both children, under their root shown as context
    expect(root).to_have_class(re.compile(r"\bpal-mod-context\b"))
    view.locator('[data-filter="all"]').click()
    expect(rows).to_have_count(3)

    # One tab: the palette again and the panel's Agents button bring the same one to the front.
    _palette(page, "Open Agents View")
    panel.get_by_test_id("pal-open-agents-view").click()
    expect(view).to_be_visible(timeout=UI_TIMEOUT_MS)
    expect(page.locator(".pal-AgentsView")).to_have_count(1)

    # Open part-a's notebook, then its chat, while it runs: an idle child with neither open
    # is evicted after 0.6 s here, so a click after its reply could come just too late.
    child_path = "fleet.agents/part-a.ipynb"
    part_a.get_by_test_id("pal-agent-open-notebook").click()
    expect(_current_main_tab(page)).to_contain_text("part-a.ipynb", timeout=UI_TIMEOUT_MS)
    _agents_tab(page).click()  # back to the tab (the palette is tested above)
    expect(view).to_be_visible(timeout=UI_TIMEOUT_MS)
    part_a.get_by_test_id("pal-agent-open-chat").click()
    # Chat opens the notebook too (docmanager:open, after a contents request) and brings it to
    # the front: until then a click on another tab is undone when that request comes back.
    expect(_current_main_tab(page)).to_contain_text("part-a.ipynb", timeout=UI_TIMEOUT_MS)
    panel = _open_panel(page)
    expect(panel.get_by_test_id("pal-notebook-path")).to_have_text(
        child_path, timeout=UI_TIMEOUT_MS
    )

    _agents_tab(page).click()
    expect(view).to_be_visible(timeout=UI_TIMEOUT_MS)

    # A draft to part-b keeps its focus and text while part-a's row changes live.
    part_b.get_by_test_id("pal-agent-message").click()
    draft = part_b.get_by_test_id("pal-agent-input")
    expect(draft).to_be_focused(timeout=UI_TIMEOUT_MS)
    page.keyboard.type("half a thought")
    _release(lab_server, "alpha")
    expect(part_a).to_have_attribute("data-outcome", "replied", timeout=TURN_TIMEOUT_MS)
    expect(part_a).to_have_attribute("data-state", "idle", timeout=TURN_TIMEOUT_MS)
    expect(part_a.get_by_test_id("pal-agent-state")).to_have_text("idle")
    expect(part_a.get_by_test_id("pal-agent-outcome")).to_have_text("replied")
    expect(draft).to_be_focused()
    expect(draft).to_have_value("half a thought")
    page.keyboard.press("Escape")
    expect(draft).to_be_hidden()
    expect(part_b.get_by_test_id("pal-agent-message")).to_be_focused()

    # Message part-a from the view: mail from the root, which the child reads in a turn.
    _agents_tab(page).click()  # back to the tab (the palette is tested above)
    expect(view).to_be_visible(timeout=UI_TIMEOUT_MS)
    part_a.get_by_test_id("pal-agent-message").click()
    message_input = part_a.get_by_test_id("pal-agent-input")
    expect(message_input).to_be_focused(timeout=UI_TIMEOUT_MS)
    page.keyboard.type(MESSAGE)
    page.keyboard.press("Enter")
    expect(part_a.get_by_test_id("pal-agent-notice")).to_have_text(
        "Sent as mail from the root agent.", timeout=UI_TIMEOUT_MS
    )
    expect(part_a.get_by_test_id("pal-agent-error")).to_be_hidden()
    expect(message_input).to_be_hidden()
    expect(part_a.get_by_test_id("pal-agent-message")).to_be_focused()
    _wait_for_text_in_session(lab_server, _agent_id(lab_server, "part-a"), MESSAGE, 60)
    # The chat shows part-a reading it; the subtree Stop below waits until that turn ended.
    expect(panel.get_by_test_id("pal-assistant").last).to_contain_text(
        MESSAGE, timeout=TURN_TIMEOUT_MS
    )
    # The root's mail was a task (from its parent) that ended without a reply: `completed`, live.
    # (The row may still show `idle` from before that turn, so idle alone says nothing yet.)
    expect(part_a).to_have_attribute("data-outcome", "completed", timeout=TURN_TIMEOUT_MS)
    expect(part_a).to_have_attribute("data-state", "idle", timeout=TURN_TIMEOUT_MS)
    part_a_outcome = part_a.get_attribute("data-outcome")
    # The tab opened while part-a's kernel may still have been on its way from the pool: the
    # notebook and the agent run on one kernel all the same (jupyter/notebook_sessions.py).
    sessions = lab_server.api("GET", "api/sessions")
    assert len({s["kernel"]["id"] for s in sessions if s["path"] == child_path}) == 1, sessions

    # Stop the root's subtree: part-b (still waiting for its file) ends `stopped`.
    stop_subtree = root.get_by_test_id("pal-agent-stop-subtree")
    expect(stop_subtree).to_be_enabled(timeout=UI_TIMEOUT_MS)
    stop_subtree.click()
    expect(root.get_by_test_id("pal-agent-notice")).to_have_text(
        re.compile(r"^Stopped \d+ agents?\.$"), timeout=UI_TIMEOUT_MS
    )
    expect(root.get_by_test_id("pal-agent-error")).to_be_hidden()
    expect(part_b).to_have_attribute("data-outcome", "stopped", timeout=TURN_TIMEOUT_MS)
    expect(part_b).to_have_attribute("data-state", "idle", timeout=TURN_TIMEOUT_MS)
    expect(root).to_have_attribute("data-state", "idle", timeout=TURN_TIMEOUT_MS)
    # The row shows what the stop did now: its notice goes (at most NOTICE_MS, 8 s, later).
    expect(root.get_by_test_id("pal-agent-notice")).to_be_hidden(timeout=UI_TIMEOUT_MS)

    # Idle, with no tab or chat open, part-b is evicted and keeps its outcome.
    expect(part_b).to_have_attribute("data-residency", "evicted", timeout=TURN_TIMEOUT_MS)
    expect(part_b.get_by_test_id("pal-agent-residency")).to_have_text("evicted")
    expect(part_b.get_by_test_id("pal-agent-outcome")).to_have_text("stopped")
    expect(part_a).to_have_attribute("data-residency", "resident")  # its tab and chat are open
    save_screenshot(page, "agents_view.png")

    # Readable: every text at least 4.5:1 in light and dark.
    try:
        for theme, light in (("JupyterLab Light", "true"), ("JupyterLab Dark", "false")):
            _switch_theme(page, theme)
            expect(page.locator("body")).to_have_attribute(
                "data-jp-theme-light", light, timeout=UI_TIMEOUT_MS
            )
            expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=UI_TIMEOUT_MS)
            assert _unreadable(view) == [], theme
    finally:
        _switch_theme(page, "JupyterLab Light")

    # A narrow main area: the rows wrap, nothing runs off to the side.
    page.set_viewport_size(NARROW_VIEWPORT)
    sidebar_tab = page.locator(
        '.jp-SideBar.jp-mod-right .lm-TabBar-tab[data-id="prime-agent-lab-chat"]'
    )
    if "lm-mod-current" in (sidebar_tab.get_attribute("class") or ""):
        sidebar_tab.click()  # the current tab: closes the sidebar
    expect(view).to_be_visible()
    width = view.evaluate("view => view.clientWidth")
    assert width <= NARROW_VIEWPORT["width"], width
    assert view.evaluate("view => view.scrollWidth <= view.clientWidth + 1")
    view_box = view.bounding_box()
    for button in part_a.locator("button:visible").all():
        box = button.bounding_box()
        assert box["x"] + box["width"] <= view_box["x"] + view_box["width"] + 1, box

    # Delete part-b: it asks first; Delete takes it out of the tree.
    part_b.get_by_test_id("pal-agent-delete").click()
    dialog = page.locator(".jp-Dialog")
    expect(dialog).to_contain_text("Delete part-b?", timeout=UI_TIMEOUT_MS)
    dialog.locator(".jp-Dialog-button.jp-mod-warn").click()
    expect(rows).to_have_count(2, timeout=UI_TIMEOUT_MS)
    assert [name for name, _ in _shown(view)] == [ROOT_NAME, "part-a"]

    # A reload brings the tab back with the tree.
    _wait_for_saved_view(page, lab_server)
    page.reload()
    view = page.get_by_test_id("pal-agents-view")
    expect(view).to_be_attached(timeout=UI_TIMEOUT_MS)
    # The page's URL opens the root's notebook too, and brings it to the front when done.
    _wait_for_the_urls_file(page)
    page.locator('.lm-TabBar-tab[data-id="prime-agent-lab-agents-view"]').click()
    expect(view).to_be_visible(timeout=UI_TIMEOUT_MS)
    expect(view.get_by_test_id("pal-agent-row")).to_have_count(2, timeout=UI_TIMEOUT_MS)
    expect(_row(view, "part-a")).to_have_attribute("data-outcome", part_a_outcome or "none")
