"""The panel's session list (docs/pairing.md, section 1; docs/ui.md "Session list"): the
sessions of one notebook newest first, Open switches this tab, another user's New session
does not empty it, Delete removes a detached session and shows the server's refusal for the
attached one.

Every test here fails on any uncaught page error or console error (see `new_page`).
"""

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
    _wait_for_idle_kernel,
)
from .test_stop_and_sessions import _connected_panel

pytestmark = pytest.mark.browser

ANSWER = "Answered."
OLDER, NEWER = "Older question about the survey.", "Newer question about the plot."


@pytest.fixture(scope="module")
def lab_script() -> dict[str, Any]:
    return {"turns": [{"text": ANSWER}]}


def _ask(panel: Any, text: str) -> str:
    """Send `text`, wait for the answer; the id of the session it went to."""
    from playwright.sync_api import expect

    send_to_chat(panel, text)
    expect(panel.get_by_test_id("pal-assistant")).to_have_text([ANSWER], timeout=TURN_TIMEOUT_MS)
    expect(panel.get_by_test_id("pal-status")).to_have_attribute(
        "data-status", "idle", timeout=TURN_TIMEOUT_MS
    )
    return str(panel.get_by_test_id("pal-status").get_attribute("data-session"))


def _new_session(panel: Any, leaving: str) -> None:
    from playwright.sync_api import expect

    panel.get_by_test_id("pal-new-session").click()
    status = panel.get_by_test_id("pal-status")
    expect(status).not_to_have_attribute("data-session", leaving, timeout=UI_TIMEOUT_MS)
    expect(status).to_have_attribute("data-connection", "connected", timeout=UI_TIMEOUT_MS)


def _row(panel: Any, session_id: str) -> Any:
    return panel.locator(f'[data-testid="pal-session-row"][data-session-id="{session_id}"]')


def test_session_list_opens_an_older_session_and_keeps_it_when_another_user_starts_one(
    lab_server: LabServer, new_page: Any
) -> None:
    """A asks twice, each in its own session (New session between): the list shows both,
    newest first, titled by their first message; Open on the older one shows its chat in
    this tab. B's New session then leaves A on that chat with the takeover line. Delete
    removes a detached session's row; the session B has attached is refused with the
    server's reason on its row."""
    from playwright.sync_api import expect

    name = "session-list.ipynb"
    _create_notebook(lab_server, name)
    page_a, page_b = new_page(), new_page()
    _open_notebook(page_a, lab_server, name)
    _wait_for_idle_kernel(lab_server, name, KERNEL_IDLE_TIMEOUT)
    panel_a = _connected_panel(page_a, lab_server, name)
    older = _ask(panel_a, OLDER)
    _new_session(panel_a, older)
    newer = _ask(panel_a, NEWER)
    assert older != newer

    sessions = panel_a.get_by_role("button", name="Sessions", exact=True)
    expect(sessions).to_have_attribute("aria-expanded", "false")
    sessions.click()
    listing = panel_a.get_by_test_id("pal-session-list")
    expect(listing).to_be_visible()
    expect(sessions).to_have_attribute("aria-expanded", "true")
    rows = panel_a.get_by_test_id("pal-session-row")
    expect(rows.locator(".pal-session-title")).to_have_text([NEWER, OLDER], timeout=UI_TIMEOUT_MS)
    expect(_row(panel_a, newer)).to_have_attribute("data-current", "true")
    expect(_row(panel_a, newer).get_by_test_id("pal-session-current")).to_have_text("current")
    expect(_row(panel_a, older)).to_have_attribute("data-current", "false")
    expect(_row(panel_a, older).get_by_test_id("pal-session-status")).to_have_text("inactive")
    iso = _row(panel_a, older).locator("time").get_attribute("title") or ""
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d", iso), iso
    expect(_row(panel_a, older).get_by_test_id("pal-session-model")).not_to_be_empty()
    expect(_row(panel_a, older).get_by_test_id("pal-session-row-cost")).not_to_be_empty()
    save_screenshot(page_a, "session-list.png")

    # Escape closes the list and gives the focus back to the Sessions button.
    _row(panel_a, older).focus()
    page_a.keyboard.press("Escape")
    expect(listing).to_be_hidden()
    expect(sessions).to_be_focused()

    # Open the older session: this tab shows its chat, the cursor in the input.
    sessions.click()
    _row(panel_a, older).get_by_role("button", name=f"Open session {OLDER}", exact=True).click()
    expect(listing).to_be_hidden(timeout=UI_TIMEOUT_MS)
    status_a = panel_a.get_by_test_id("pal-status")
    expect(status_a).to_have_attribute("data-session", older, timeout=UI_TIMEOUT_MS)
    expect(status_a).to_have_attribute("data-connection", "connected", timeout=UI_TIMEOUT_MS)
    expect(panel_a.get_by_test_id("pal-user")).to_have_text([OLDER])
    expect(panel_a.get_by_test_id("pal-assistant")).to_have_text([ANSWER])
    expect(panel_a.get_by_test_id("pal-chat-input")).to_be_focused()
    expect(panel_a.locator('[data-testid="pal-notice"][data-kind="taken_over"]')).to_have_count(0)

    # Another user's New session: A keeps its chat, with the takeover line.
    panel_b = _connected_panel(page_b, lab_server, name)
    expect(panel_b.get_by_test_id("pal-status")).to_have_attribute("data-session", older)
    _new_session(panel_b, older)
    theirs = str(panel_b.get_by_test_id("pal-status").get_attribute("data-session"))
    takeover = panel_a.locator('[data-testid="pal-notice"][data-kind="taken_over"]')
    expect(takeover).to_have_count(1, timeout=UI_TIMEOUT_MS)
    expect(status_a).to_have_attribute("data-session", older)
    expect(panel_a.get_by_test_id("pal-user")).to_have_text([OLDER])

    # Delete: a detached session goes; the attached one (B's) is refused with the reason.
    page_a.expected_errors.append(("status of 409", "/prime-agent/api/sessions/"))
    sessions.click()
    expect(rows).to_have_count(3, timeout=UI_TIMEOUT_MS)
    expect(rows.first).to_have_attribute("data-session-id", theirs)
    _row(panel_a, newer).get_by_role("button", name=f"Delete session {NEWER}", exact=True).click()
    _row(panel_a, newer).get_by_role(
        "button", name=f"Confirm: delete session {NEWER}", exact=True
    ).click()
    expect(_row(panel_a, newer)).to_have_count(0, timeout=UI_TIMEOUT_MS)
    expect(rows).to_have_count(2)

    attached = _row(panel_a, theirs)
    attached.get_by_test_id("pal-session-delete").click()
    attached.get_by_test_id("pal-session-confirm-delete").click()
    expect(attached.get_by_role("alert")).to_contain_text(
        "open in a notebook", timeout=UI_TIMEOUT_MS
    )
    expect(rows).to_have_count(2)
    sessions_on_disk = lab_server.api("GET", f"prime-agent/api/sessions?notebook={name}")
    assert {s["session_id"] for s in sessions_on_disk["sessions"]} == {older, theirs}
    save_screenshot(page_a, "session-list-refused-delete.png")
