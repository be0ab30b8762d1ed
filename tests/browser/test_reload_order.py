"""A reload shows the same chat in the same order (issue 18, "Reload"; docs/ui.md
"Reloading"): a turn whose cell spawns a sub-agent (its line, and the notice that it finished),
a `/refine` applied while the agent is idle, then a second turn. Before the fix the refinement
line jumped to the top of the chat after a reload, and the sub-agent's notice moved above the
line of the cell that was running when it came.

Every page error or console error fails the test (`new_page`).
"""

from __future__ import annotations

import json
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

NOTEBOOK = "reload-order.ipynb"
SPAWN = 'a = await rlm("alpha words", name="alpha")\nprint(a.notebook_path)'
WAIT_FOR_CHILD = (
    "import asyncio, time\n"
    "deadline = time.time() + 60\n"
    "while time.time() < deadline:\n"
    "    subs = await rlm.list_subagents()\n"
    "    if subs and all(s.status in ('completed', 'replied', 'error') for s in subs):\n"
    "        break\n"
    "    await asyncio.sleep(0.05)\n"
    "print(sorted((s.name, s.status) for s in subs))"
)
PROPOSAL = {
    "summary": "Remember the house style",
    "edits": [{"action": "create", "kind": "memory", "title": "house style", "content": "short"}],
}
SCRIPT = {
    "turns": [
        {"text": "Spawning a sub-agent.", "code": SPAWN},
        {"text": "Waiting for it.", "code": WAIT_FOR_CHILD},
        {"text": "Turn one done."},
        {"text": "Turn two done."},
    ],
    "child": {"turns": [{"code": 'print("{task}".upper())'}, {"text": "did {task}"}]},
    "side": {"refine": [{"text": json.dumps(PROPOSAL)}]},
}
# Each entry of the chat, top to bottom: its test id, its kind or state, and its text.
ENTRIES_JS = """
panel => [...panel.querySelectorAll('[data-testid="pal-transcript"] > .pal-entry')]
  .map(node => [node.dataset.testid ?? '', node.dataset.kind ?? node.dataset.status ?? '',
    node.innerText.trim().split('\\n')[0]])
"""


@pytest.fixture(scope="module")
def lab_script() -> dict[str, Any]:
    return SCRIPT


def _session(server: LabServer) -> dict[str, Any]:
    sessions = server.api("GET", "prime-agent/api/sessions")["sessions"]
    (found,) = [s for s in sessions if s["notebook_path"] == NOTEBOOK and s["status"] != "inactive"]
    return server.api("GET", f"prime-agent/api/sessions/{found['session_id']}")


def _entries(panel: Any, server: LabServer) -> list[list[str]]:
    """The chat's entries once the panel is idle and has every event the server has."""
    from playwright.sync_api import expect

    status = panel.get_by_test_id("pal-status")
    expect(status).to_have_attribute("data-connection", "connected", timeout=UI_TIMEOUT_MS)
    expect(status).to_have_attribute("data-status", "idle", timeout=TURN_TIMEOUT_MS)
    expect(panel.get_by_test_id("pal-transcript")).to_have_attribute(
        "data-seq", str(_session(server)["seq"]), timeout=UI_TIMEOUT_MS
    )
    entries: list[list[str]] = panel.evaluate(ENTRIES_JS)
    return entries


def _index(entries: list[list[str]], testid: str, text: str = "") -> int:
    for index, (found, _, shown) in enumerate(entries):
        if found == testid and text in shown:
            return index
    raise AssertionError(f"no {testid} {text!r} in {entries}")


def test_a_reload_shows_refinements_notices_and_children_where_they_were(
    lab_server: LabServer, page: Any
) -> None:
    from playwright.sync_api import expect

    _create_notebook(lab_server, NOTEBOOK)
    _open_notebook(page, lab_server, NOTEBOOK)
    _wait_for_idle_kernel(lab_server, NOTEBOOK, KERNEL_IDLE_TIMEOUT)
    panel = _open_panel(page)
    status = panel.get_by_test_id("pal-status")
    expect(status).to_have_attribute("data-connection", "connected", timeout=UI_TIMEOUT_MS)

    send_to_chat(panel, "Fan out, please.")
    expect(panel.get_by_test_id("pal-assistant").last).to_have_text(
        "Turn one done.", timeout=TURN_TIMEOUT_MS
    )
    expect(status).to_have_attribute("data-status", "idle", timeout=TURN_TIMEOUT_MS)
    send_to_chat(panel, "/refine remember the house style")
    expect(panel.get_by_test_id("pal-refinement")).to_have_count(1, timeout=TURN_TIMEOUT_MS)
    send_to_chat(panel, "And now?")
    expect(panel.get_by_test_id("pal-assistant").last).to_have_text(
        "Turn two done.", timeout=TURN_TIMEOUT_MS
    )

    live = _entries(panel, lab_server)
    first_cell = _index(live, "pal-cell-line")
    child = _index(live, "pal-child", "alpha")
    notice = _index(live, "pal-notice", "alpha")  # the sub-agent finished without replying
    turn_one = _index(live, "pal-answer", "Turn one done.")
    refinement = _index(live, "pal-refinement")
    turn_two = _index(live, "pal-user", "And now?")
    assert first_cell < child < notice < turn_one < refinement < turn_two, live
    save_screenshot(page, "reload_order_live.png")

    page.reload()
    _open_notebook(page, lab_server, NOTEBOOK)
    panel = _open_panel(page)
    reloaded = _entries(panel, lab_server)
    save_screenshot(page, "reload_order_reloaded.png")
    # `/refine`'s own answer ("planning in the background") is the asking panel's line, not the
    # session's (docs/ui.md): everything else comes back, in the same order.
    assert reloaded == [entry for entry in live if entry[1] != "command_reply"]
