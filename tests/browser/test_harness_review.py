"""Cold review of the Harness view and /refine in a real JupyterLab (issue 9): hostile and
bulky content renders as text, bad /refine forms get a clear answer, and the view and the
chat's refinement lines survive a page reload and a kernel restart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .conftest import LabServer, save_screenshot, send_to_chat
from .test_chat_panel import TURN_TIMEOUT_MS, UI_TIMEOUT_MS
from .test_harness_panel import FLAKY_TEST, PROPOSAL, _attach, _open_harness, _stores, _tab

pytestmark = pytest.mark.browser

XSS = "<img src=x onerror=window.__palXss=1>"
UNICODE = "naïve café — 日本語 ✓ 🚀"


@pytest.fixture(scope="module")
def release_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The agent's long cell runs until this file exists."""
    return tmp_path_factory.mktemp("review-release") / "release"


@pytest.fixture(scope="module")
def lab_script(release_file: Path) -> dict[str, Any]:
    long_cell = (
        f"import os, time\nwhile not os.path.exists({str(release_file)!r}):\n    time.sleep(0.1)\n"
    )
    return {
        "turns": [{"text": "Waiting.", "code": long_cell}, {"text": "Released."}],
        "side": {"refine": [{"text": json.dumps(PROPOSAL)}] * 3},
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
    local.create("memory", FLAKY_TEST, "user")

    # The server parses commands (core/commands.py): the bad form's 400 and the unknown id's
    # 404 are the answers under test; Chromium logs every failed fetch.
    page.expected_errors.append(("400 (Bad Request)", "/commands/refine"))
    page.expected_errors.append(("404 (Not Found)", "/commands/refine"))
    send_to_chat(chat, "/refine rollback")
    errors = chat.get_by_test_id("pal-error")
    expect(errors.last).to_contain_text("Which refinement?", timeout=UI_TIMEOUT_MS)

    send_to_chat(chat, "/refine rollback ref_nope")
    expect(errors.last).to_contain_text("ref_nope", timeout=UI_TIMEOUT_MS)

    send_to_chat(chat, "/refine promote the retry pattern")
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


def _run_cell(page: Any, code: str) -> None:
    """Type `code` into the notebook's last cell and run it (Shift+Enter), as a user would."""
    cell = page.locator(".jp-NotebookPanel:visible .jp-Cell").last
    cell.click()
    page.keyboard.press("Escape")
    page.keyboard.press("b")  # a new code cell below
    editor = page.locator(".jp-NotebookPanel:visible .jp-Cell").last.locator(".cm-content")
    editor.click()
    editor.fill(code)
    page.keyboard.press("Shift+Enter")


def _restart_from_the_kernel_menu(page: Any) -> None:
    """Kernel > Restart Kernel… > Restart, as a user does (JupyterLab then reconnects its own
    kernel connection; a restart by another client can lose the first outputs after it, a
    Jupyter limit: the old connection's IOPub socket rejoins the new kernel late)."""
    page.locator(".lm-MenuBar-itemLabel", has_text="Kernel").click()
    page.locator(".lm-Menu-itemLabel", has_text="Restart Kernel…").first.click()
    page.locator(".jp-Dialog-button.jp-mod-accept").click()


def test_entries_from_cells_a_second_notebook_and_a_cells_panel_reach_the_view(
    lab_server: LabServer, page: Any
) -> None:
    from playwright.sync_api import expect

    chat, _ = _attach(page, lab_server, "harness-cells.ipynb")
    # The view waits for the server to set the kernel up (`rlm` is bound in the background).
    panel = _open_harness(page, chat)
    _run_cell(page, 'rlm.harness.create_memory("cell note", "from a cell")')
    _tab(panel, "Memories")
    note = panel.locator('[data-testid="pal-harness-entry"][data-id="cell_note"]')
    expect(note).to_be_visible(timeout=UI_TIMEOUT_MS)

    # A change from another cell while the view is open.
    _run_cell(page, 'rlm.harness.create_memory("second note", "later", global_=True)')
    expect(panel.locator('[data-id="second_note"]')).to_have_count(1, timeout=UI_TIMEOUT_MS)

    # A second notebook (another session) writes a global entry: the first view follows.
    other = page.context.new_page()
    chat2, _ = _attach(other, lab_server, "harness-cells-2.ipynb")
    panel2 = _open_harness(other, chat2)
    _run_cell(other, 'rlm.harness.create_memory("from nb2", "global", global_=True)')
    expect(panel.locator('[data-id="from_nb2"]')).to_have_count(1, timeout=UI_TIMEOUT_MS)
    _tab(panel2, "Memories")
    expect(panel2.locator('[data-id="from_nb2"]')).to_have_count(1, timeout=UI_TIMEOUT_MS)
    expect(panel2.locator('[data-id="cell_note"]')).to_have_count(0)  # local to session 1
    other.close()

    # An ordinary cell's panel.
    _run_cell(page, "rlm.harness.panel()")
    cell_panel = page.locator(".jp-NotebookPanel:visible .jp-OutputArea .pal-harness-panel")
    expect(cell_panel).to_be_visible(timeout=UI_TIMEOUT_MS)


def test_the_harness_button_gives_a_live_view_after_a_kernel_restart(
    lab_server: LabServer, page: Any
) -> None:
    from playwright.sync_api import expect

    from .test_chat_panel import KERNEL_IDLE_TIMEOUT, _wait_for_idle_kernel

    chat, session_id = _attach(page, lab_server, "harness-view-restart.ipynb")
    _open_harness(page, chat)
    _wait_for_idle_kernel(lab_server, "harness-view-restart.ipynb", KERNEL_IDLE_TIMEOUT)
    _restart_from_the_kernel_menu(page)
    _wait_for_idle_kernel(lab_server, "harness-view-restart.ipynb", KERNEL_IDLE_TIMEOUT)
    chat.get_by_test_id("pal-harness").click()
    views = page.locator(".pal-HarnessView")
    expect(views).to_have_count(2, timeout=UI_TIMEOUT_MS)
    panel = views.last.locator(".pal-harness-panel")
    local, _ = _stores(lab_server, session_id)
    local.create("memory", {"title": "store after restart", "content": "x"}, "user")
    _tab(panel, "Memories")
    expect(panel.locator('[data-id="store_after_restart"]')).to_have_count(1, timeout=UI_TIMEOUT_MS)


def test_rlm_is_bound_in_a_users_cell_after_a_kernel_restart(
    lab_server: LabServer, page: Any
) -> None:
    """README: "you in a cell of your own" write entries with `rlm.harness`; after Kernel >
    Restart the user's next cell must still find `rlm` (not only after the agent's next cell)."""
    from playwright.sync_api import expect

    from .test_chat_panel import KERNEL_IDLE_TIMEOUT, _wait_for_idle_kernel

    chat, session_id = _attach(page, lab_server, "harness-restart.ipynb")
    _open_harness(page, chat)  # the server has set the kernel up
    _wait_for_idle_kernel(lab_server, "harness-restart.ipynb", KERNEL_IDLE_TIMEOUT)
    _restart_from_the_kernel_menu(page)
    _wait_for_idle_kernel(lab_server, "harness-restart.ipynb", KERNEL_IDLE_TIMEOUT)
    _run_cell(page, 'rlm.harness.create_memory("after restart", "yes")')
    outputs = page.locator(".jp-NotebookPanel:visible .jp-OutputArea-output")
    expect(outputs.last).to_contain_text("after_restart", timeout=UI_TIMEOUT_MS)
    local, _ = _stores(lab_server, session_id)
    assert local.get("memory", "after_restart") is not None


def test_a_rollback_from_the_panel_while_the_agents_cell_runs_waits_for_the_boundary(
    lab_server: LabServer, page: Any, release_file: Path
) -> None:
    from playwright.sync_api import expect

    chat, session_id = _attach(page, lab_server, "harness-rollback-busy.ipynb")
    local, _ = _stores(lab_server, session_id)
    local.create("memory", FLAKY_TEST, "user")
    send_to_chat(chat, "/refine promote the retry pattern")
    lines = chat.get_by_test_id("pal-refinement")
    expect(lines).to_have_count(1, timeout=TURN_TIMEOUT_MS)
    refined = lines.first.get_attribute("data-refinement-id")

    send_to_chat(chat, "Wait for the release file.")
    cell_line = chat.get_by_test_id("pal-cell-line")
    expect(cell_line).to_have_attribute("data-status", "running", timeout=TURN_TIMEOUT_MS)
    panel = _open_harness(page, chat)
    _tab(panel, "History")
    row = panel.locator(
        ".pal-harness-refinement",
        has=page.locator(f'[data-testid="pal-harness-refinement"][data-id="{refined}"]'),
    )
    row.locator("button", has_text="Rollback").click()
    answer = panel.get_by_test_id("pal-harness-answer")
    expect(answer).to_contain_text(f"Rollback of {refined}: queued", timeout=UI_TIMEOUT_MS)
    assert local.get("memory", "flaky_test").content == "retry five times"  # type: ignore[union-attr]
    release_file.touch()
    expect(cell_line).to_have_attribute("data-status", "ok", timeout=TURN_TIMEOUT_MS)
    expect(lines).to_have_count(2, timeout=TURN_TIMEOUT_MS)
    assert local.get("memory", "flaky_test").content == "retry three times"  # type: ignore[union-attr]
    save_screenshot(page, "review_rollback_busy.png")
