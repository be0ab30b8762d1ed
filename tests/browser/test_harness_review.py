"""Cold review of the Harness view and /refine in a real JupyterLab (issue 9): hostile and
bulky content renders as text, bad /refine forms get a clear answer, and the view and the
chat's refinement lines survive a page reload and a kernel restart."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .conftest import LabServer, save_screenshot
from .test_chat_panel import TURN_TIMEOUT_MS, UI_TIMEOUT_MS
from .test_harness_panel import PROPOSAL, _attach, _open_harness, _stores, _tab

pytestmark = pytest.mark.browser

XSS = "<img src=x onerror=window.__palXss=1>"
UNICODE = "naïve café — 日本語 ✓ 🚀"


@pytest.fixture(scope="module")
def lab_script() -> dict[str, Any]:
    return {
        "turns": [{"text": "Nothing to do."}],
        "side": {"refine": [{"text": json.dumps(PROPOSAL)}]},
    }


def test_hostile_unicode_long_and_many_entries_render_as_text(
    lab_server: LabServer, page: Any
) -> None:
    from playwright.sync_api import expect

    chat, session_id = _attach(page, lab_server, "harness-hostile.ipynb")
    local, _ = _stores(lab_server, session_id)
    local.create("memory", {"title": XSS, "content": XSS + "\n" + UNICODE}, "user")
    local.create("memory", {"title": "long", "content": "x" * 20000}, "user")
    for number in range(50):
        local.create("memory", {"title": f"bulk {number:02d}", "content": f"n{number}"}, "user")
    panel = _open_harness(page, chat)
    _tab(panel, "Memories")
    entries = panel.locator('[data-testid="pal-harness-entry"][data-kind="memory"]')
    expect(entries).to_have_count(52, timeout=UI_TIMEOUT_MS)
    expect(panel.get_by_text(UNICODE)).to_have_count(1)
    expect(panel.locator("img")).to_have_count(0)
    assert page.evaluate("() => window.__palXss") is None
    expect(panel.get_by_text(XSS).first).to_be_visible()
    # The long entry does not widen the view past the window.
    width = panel.evaluate("(el) => el.scrollWidth")
    assert width <= page.viewport_size["width"], width
    save_screenshot(page, "review_harness_hostile.png")


def test_bad_refine_forms_answer_clearly_and_lines_survive_a_reload(
    lab_server: LabServer, page: Any
) -> None:
    from playwright.sync_api import expect

    chat, session_id = _attach(page, lab_server, "harness-refine-forms.ipynb")
    local, _ = _stores(lab_server, session_id)
    local.create("memory", {"title": "flaky test", "content": "retry three times"}, "user")
    chat_input = chat.get_by_test_id("pal-chat-input")

    chat_input.fill("/refine rollback")
    chat_input.press("Enter")
    errors = chat.get_by_test_id("pal-error")
    expect(errors.last).to_contain_text("Which refinement?", timeout=UI_TIMEOUT_MS)

    # The unknown id's 404 is the answer under test; Chromium logs every failed fetch.
    page.expected_errors.append(("404 (Not Found)", "/refinements/ref_nope/rollback"))
    chat_input.fill("/refine rollback ref_nope")
    chat_input.press("Enter")
    expect(errors.last).to_contain_text("ref_nope", timeout=UI_TIMEOUT_MS)

    chat_input.fill("/refine promote the retry pattern")
    chat_input.press("Enter")
    lines = chat.get_by_test_id("pal-refinement")
    expect(lines).to_have_count(1, timeout=TURN_TIMEOUT_MS)

    page.reload()
    from .test_chat_panel import _open_panel

    chat = _open_panel(page)
    lines = chat.get_by_test_id("pal-refinement")
    expect(lines).to_have_count(1, timeout=TURN_TIMEOUT_MS)
    panel = _open_harness(page, chat)
    _tab(panel, "History")
    expect(panel.locator('[data-testid="pal-harness-refinement"]')).to_have_count(
        1, timeout=UI_TIMEOUT_MS
    )
    save_screenshot(page, "review_refine_after_reload.png")
