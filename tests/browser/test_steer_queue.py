"""Steer and queue in a real JupyterLab (docs/pairing.md, "Steer and queue"), two users on one
notebook: while the agent's cell runs, user A queues a follow-up (Enter) and steers (Shift+Alt+
Enter); user B sees both queued items, removes one A queued; once the cell ends the steer shows
as A's message in the running turn, the follow-up starts the next turn, and a reload shows the
same chat in the same order.

The agent's cell waits for a file the test writes (`_release`), so the test decides when the
turn can go on. Every page error or console error fails the test (`new_page`).
"""

from __future__ import annotations

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

NOTEBOOK = "pairing.ipynb"
WAIT_CELL = (
    "import asyncio, os\n"
    "while not os.path.exists('steer.go'):\n"
    "    await asyncio.sleep(0.05)\n"
    "print('data loaded')"
)
SCRIPT = {
    "turns": [
        {"text": "Loading the data.", "code": WAIT_CELL},
        {"text": "Loaded; I will use the median."},
        {"text": "Plotted."},
    ]
}
FIRST, STEER, FOLLOW_UP, DROPPED = (
    "Load the data.",
    "Use the median.",
    "Then plot it.",
    "Never mind this one.",
)


@pytest.fixture(scope="module")
def lab_script() -> dict[str, Any]:
    return SCRIPT


def _release(server: LabServer) -> None:
    (server.root_dir / "steer.go").write_text("go")


def _connected_panel(page: Any, server: LabServer, name: str = NOTEBOOK) -> Any:
    from playwright.sync_api import expect

    _open_notebook(page, server, name)
    panel = _open_panel(page)
    expect(panel.get_by_test_id("pal-status")).to_have_attribute(
        "data-connection", "connected", timeout=UI_TIMEOUT_MS
    )
    return panel


def _queued(panel: Any) -> Any:
    return panel.get_by_test_id("pal-queued-text")


def test_queue_and_steer_while_a_cell_runs_seen_by_a_second_user_and_after_a_reload(
    lab_server: LabServer, new_page: Any
) -> None:
    from playwright.sync_api import expect

    _create_notebook(lab_server, NOTEBOOK)
    page_a, page_b = new_page(), new_page()
    _open_notebook(page_a, lab_server, NOTEBOOK)
    _wait_for_idle_kernel(lab_server, NOTEBOOK, KERNEL_IDLE_TIMEOUT)
    panel_a = _connected_panel(page_a, lab_server)
    panel_b = _connected_panel(page_b, lab_server)

    send_to_chat(panel_a, FIRST)
    expect(panel_a.get_by_test_id("pal-cell-line")).to_have_attribute(
        "data-status", "running", timeout=TURN_TIMEOUT_MS
    )
    chat_input = panel_a.get_by_test_id("pal-chat-input")
    assert "Enter queues a follow-up" in (chat_input.get_attribute("placeholder") or "")
    expect(panel_a.get_by_test_id("pal-steer")).to_be_disabled()  # nothing typed yet
    expect(panel_a.get_by_test_id("pal-send")).to_have_text("Queue")

    send_to_chat(panel_a, FOLLOW_UP)  # Enter while the turn runs: a follow-up
    expect(_queued(panel_a)).to_have_text([FOLLOW_UP], timeout=UI_TIMEOUT_MS)
    chat_input.fill(STEER)
    expect(panel_a.get_by_test_id("pal-steer")).to_be_enabled()
    chat_input.press("Shift+Alt+Enter")  # steers the running turn
    expect(_queued(panel_a)).to_have_text([FOLLOW_UP, STEER], timeout=UI_TIMEOUT_MS)
    send_to_chat(panel_a, DROPPED)
    for panel in (panel_a, panel_b):
        expect(_queued(panel)).to_have_text([FOLLOW_UP, STEER, DROPPED], timeout=UI_TIMEOUT_MS)
    modes = panel_b.get_by_test_id("pal-queued")
    expect(modes.nth(0)).to_have_attribute("data-mode", "follow_up")
    expect(modes.nth(1)).to_have_attribute("data-mode", "steer")
    save_screenshot(page_b, "steer-queue-second-user.png")

    # User B removes what user A queued last; both views drop it.
    modes.nth(2).get_by_test_id("pal-queued-remove").click()
    for panel in (panel_a, panel_b):
        expect(_queued(panel)).to_have_text([FOLLOW_UP, STEER], timeout=UI_TIMEOUT_MS)
    expect(panel_a.get_by_test_id("pal-user")).to_have_text([FIRST])

    _release(lab_server)
    # The steer entered the running turn after its cell; the follow-up started the next turn.
    for panel in (panel_a, panel_b):
        expect(panel.get_by_test_id("pal-user")).to_have_text(
            [FIRST, STEER, FOLLOW_UP], timeout=TURN_TIMEOUT_MS
        )
        expect(panel.get_by_test_id("pal-assistant").last).to_have_text(
            "Plotted.", timeout=TURN_TIMEOUT_MS
        )
        expect(panel.get_by_test_id("pal-queue")).to_be_hidden()
    expect(panel_b.get_by_test_id("pal-user").nth(1)).to_have_attribute("data-mode", "steer")
    expect(panel_b.get_by_test_id("pal-error")).to_have_count(0)
    save_screenshot(page_a, "steer-queue-done.png")

    page_b.reload()
    panel_b = _connected_panel(page_b, lab_server)
    expect(panel_b.get_by_test_id("pal-user")).to_have_text(
        [FIRST, STEER, FOLLOW_UP], timeout=UI_TIMEOUT_MS
    )
    expect(panel_b.get_by_test_id("pal-queue")).to_be_hidden()


def test_a_queued_follow_up_survives_a_reload_and_stop_holds_it(
    lab_server: LabServer, page: Any
) -> None:
    """Queued while a cell runs; after a reload it is still listed; Stop holds it (nothing
    starts by itself) and Send now starts it."""
    from playwright.sync_api import expect

    name = "held.ipynb"
    _create_notebook(lab_server, name)
    (lab_server.root_dir / "steer.go").unlink(missing_ok=True)
    _open_notebook(page, lab_server, name)
    _wait_for_idle_kernel(lab_server, name, KERNEL_IDLE_TIMEOUT)
    panel = _connected_panel(page, lab_server, name)
    send_to_chat(panel, FIRST)
    expect(panel.get_by_test_id("pal-cell-line")).to_have_attribute(
        "data-status", "running", timeout=TURN_TIMEOUT_MS
    )
    send_to_chat(panel, FOLLOW_UP)
    expect(_queued(panel)).to_have_text([FOLLOW_UP], timeout=UI_TIMEOUT_MS)

    page.reload()
    panel = _connected_panel(page, lab_server, name)
    expect(_queued(panel)).to_have_text([FOLLOW_UP], timeout=UI_TIMEOUT_MS)

    panel.get_by_test_id("pal-stop").click()
    expect(panel.get_by_test_id("pal-queue-held")).to_be_visible(timeout=TURN_TIMEOUT_MS)
    expect(panel.get_by_test_id("pal-status")).to_have_attribute(
        "data-status", "idle", timeout=TURN_TIMEOUT_MS
    )
    expect(panel.get_by_test_id("pal-user")).to_have_text([FIRST])
    save_screenshot(page, "steer-queue-held.png")

    _release(lab_server)
    panel.get_by_test_id("pal-queued-send-now").click()
    expect(panel.get_by_test_id("pal-user")).to_have_text(
        [FIRST, FOLLOW_UP], timeout=TURN_TIMEOUT_MS
    )
    expect(panel.get_by_test_id("pal-queue")).to_be_hidden(timeout=UI_TIMEOUT_MS)
