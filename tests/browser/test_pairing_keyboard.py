"""Keyboard, contrast and answers in the Prime Agent panel (docs/pairing.md sections 6 and 7).

With the keyboard only: the palette opens the panel with the cursor in its input, typed text goes
there (not to the notebook as shortcuts), Escape gives the keyboard back to the notebook, and
Accel+Shift+A comes back. While a cell runs, Alt+Enter queues a follow-up, Alt+Shift+Enter steers
and the palette's queue command queues (JupyterLab's keymap runs the panel's commands), and
Ctrl+Shift+O opens the session list. Every visible text in the panel is at least 4.5:1 against
what is behind it, in the light and in the dark theme. An answer's code block copies to the
clipboard and inserts below the active cell (not run; JupyterLab's undo takes it back).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from .conftest import LabServer, save_screenshot, send_to_chat
from .test_branch_badge import BADGE_CONTRAST_JS, MIN_CONTRAST, _switch_theme
from .test_chat_panel import (
    KERNEL_IDLE_TIMEOUT,
    TURN_TIMEOUT_MS,
    UI_TIMEOUT_MS,
    _create_notebook,
    _open_notebook,
    _wait_for_idle_kernel,
)
from .test_harness_review import _run_cell

pytestmark = pytest.mark.browser

ANSWER_CODE = "import math\nroots = [math.sqrt(s) for s in squares]\nprint(roots[:3])"
SCRIPT = {
    "turns": [
        {
            "text": "I'll keep the squares in a variable.",
            "code": "squares = [n * n for n in range(1, 11)]\nprint(sum(squares))",
        },
        {
            "text": "The sum is {last_output_line}. Their square roots:\n\n"
            f"```python\n{ANSWER_CODE}\n```\n\nInsert it below to run it yourself."
        },
    ]
}


@pytest.fixture(scope="module")
def lab_script() -> dict[str, Any]:
    return SCRIPT


# Every element of `root` with its own visible text: its colour (with every opacity up to the
# page) composited over the backgrounds behind it, down to the first opaque one, and the WCAG
# contrast of the two. Disabled controls are left out (WCAG 1.4.3 exempts inactive controls).
PANEL_CONTRAST_JS = """
(root) => {
  const parse = (text) => {
    const m = text.match(/rgba?\\(([^)]+)\\)/);
    if (!m) return null;
    const p = m[1].split(/[\\s,/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  };
  const over = (top, base) => [0, 1, 2].map((i) => top[i] * top[3] + base[i] * (1 - top[3]));
  const lum = (c) => {
    const [r, g, b] = c.map((v) => {
      const s = v / 255;
      return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const ratio = (a, b) => {
    const [hi, lo] = [lum(a), lum(b)].sort((x, y) => y - x);
    return (hi + 0.05) / (lo + 0.05);
  };
  const behind = (el) => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const bg = parse(getComputedStyle(e).backgroundColor);
      if (bg && bg[3] > 0) {
        layers.push(bg);
        if (bg[3] === 1) break;
      }
    }
    let base = [255, 255, 255];
    for (const layer of layers.reverse()) base = over(layer, base);
    return base;
  };
  const measure = (el, color, text) => {
    let alpha = 1;
    for (let e = el; e; e = e.parentElement) alpha *= Number(getComputedStyle(e).opacity);
    const fg = parse(color);
    fg[3] *= alpha;
    const bg = behind(el);
    return {
      text: text.slice(0, 60),
      element: `${el.tagName.toLowerCase()}.${String(el.className).trim().split(/\\s+/).join('.')}`,
      color,
      contrast: Math.round(ratio(over(fg, bg), bg) * 100) / 100
    };
  };
  const results = [];
  const seen = new Set();
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const text = node.textContent.trim();
    const el = node.parentElement;
    if (!text || !el || seen.has(el)) continue;
    seen.add(el);
    const rect = el.getBoundingClientRect();
    if (rect.width <= 1 || rect.height <= 1) continue;
    if (!el.checkVisibility({ checkOpacity: true, checkVisibilityCSS: true })) continue;
    if (el.closest(':disabled, [aria-disabled="true"]')) continue;
    results.push(measure(el, getComputedStyle(el).color, text));
  }
  for (const input of root.querySelectorAll('textarea, input[type="text"]')) {
    if (input.placeholder && !input.value && !input.disabled) {
      results.push(measure(input, getComputedStyle(input, '::placeholder').color,
                           `placeholder: ${input.placeholder}`));
    }
  }
  return results;
}
"""


def re_word(word: str) -> re.Pattern[str]:
    return re.compile(rf"\b{re.escape(word)}\b")


FOCUS_IN_NOTEBOOK_JS = "() => Boolean(document.activeElement?.closest('.jp-Notebook'))"


def _palette(page: Any, label: str) -> None:
    """Run a command from the command palette with the keyboard only."""
    from playwright.sync_api import expect

    page.keyboard.press("Control+Shift+C")
    search = page.locator("#modal-command-palette .lm-CommandPalette-input")
    expect(search).to_be_focused(timeout=UI_TIMEOUT_MS)
    page.keyboard.type(label)
    item = page.locator(
        "#modal-command-palette .lm-CommandPalette-item.lm-mod-active .lm-CommandPalette-itemLabel"
    )
    expect(item).to_have_text(label, timeout=UI_TIMEOUT_MS)
    page.keyboard.press("Enter")


def _cells(page: Any) -> Any:
    return page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell")


def _focus_notebook_in_command_mode(page: Any) -> None:
    from playwright.sync_api import expect

    _cells(page).first.locator(".jp-InputPrompt").click()
    page.keyboard.press("Escape")
    page.wait_for_function(FOCUS_IN_NOTEBOOK_JS, timeout=UI_TIMEOUT_MS)
    expect(page.locator(".jp-Notebook.jp-mod-commandMode")).to_have_count(1)


def _unreadable(panel: Any) -> list[dict[str, Any]]:
    measured = panel.evaluate(PANEL_CONTRAST_JS)
    assert len(measured) > 10, measured  # the walk found the panel's texts
    return [m for m in measured if m["contrast"] < MIN_CONTRAST]


def test_the_palette_opens_the_chat_with_the_cursor_in_it_and_escape_gives_it_back(
    lab_server: LabServer, page: Any
) -> None:
    from playwright.sync_api import expect

    name = "keyboard.ipynb"
    _create_notebook(lab_server, name)
    _open_notebook(page, lab_server, name)
    expect(_cells(page)).to_have_count(1, timeout=UI_TIMEOUT_MS)
    _wait_for_idle_kernel(lab_server, name, KERNEL_IDLE_TIMEOUT)
    _focus_notebook_in_command_mode(page)

    panel = page.get_by_test_id("pal-chat-panel")
    chat_input = panel.get_by_test_id("pal-chat-input")
    _palette(page, "Open Prime Agent")
    expect(chat_input).to_be_focused(timeout=UI_TIMEOUT_MS)

    # Letters that are notebook shortcuts in command mode (a, b: insert a cell; m: Markdown).
    typed = "a bam mbb"
    page.keyboard.type(typed)
    expect(chat_input).to_have_value(typed)
    expect(_cells(page)).to_have_count(1)

    # The input is labelled, not only by its placeholder.
    assert chat_input.evaluate("(el) => el.labels.length") == 1
    assert "Message" in chat_input.evaluate("(el) => el.labels[0].textContent")

    page.keyboard.press("Escape")
    page.wait_for_function(FOCUS_IN_NOTEBOOK_JS, timeout=UI_TIMEOUT_MS)
    page.keyboard.press("Control+Shift+A")
    expect(chat_input).to_be_focused(timeout=UI_TIMEOUT_MS)
    expect(chat_input).to_have_value(typed)  # nothing lost on the way
    expect(_cells(page)).to_have_count(1)

    # Focus shows: the focused input has an outline or a ring in the focus colour.
    ring = chat_input.evaluate(
        "(el) => { const s = getComputedStyle(el); return [s.outlineStyle, s.boxShadow]; }"
    )
    assert ring[0] != "none" or ring[1] != "none", ring

    # Its sidebar tab opens it with the cursor in the input too.
    tab = page.locator('.jp-SideBar.jp-mod-right .lm-TabBar-tab[data-id="prime-agent-lab-chat"]')
    tab.click()  # the current tab: closes the sidebar
    expect(panel).to_be_hidden(timeout=UI_TIMEOUT_MS)
    _focus_notebook_in_command_mode(page)
    tab.click()
    expect(chat_input).to_be_focused(timeout=UI_TIMEOUT_MS)


def test_every_text_in_the_panel_is_readable_in_light_and_dark_and_code_blocks_copy_and_insert(
    lab_server: LabServer, page: Any
) -> None:
    from playwright.sync_api import expect

    name = "answers.ipynb"
    _create_notebook(lab_server, name)
    _open_notebook(page, lab_server, name)
    expect(_cells(page)).to_have_count(1, timeout=UI_TIMEOUT_MS)
    _wait_for_idle_kernel(lab_server, name, KERNEL_IDLE_TIMEOUT)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    _focus_notebook_in_command_mode(page)
    _palette(page, "Open Prime Agent")
    panel = page.get_by_test_id("pal-chat-panel")
    expect(panel.get_by_test_id("pal-status")).to_have_attribute(
        "data-connection", "connected", timeout=UI_TIMEOUT_MS
    )

    send_to_chat(panel, "Sum the first ten squares.")
    block = panel.get_by_test_id("pal-code-block")
    expect(block).to_have_count(1, timeout=TURN_TIMEOUT_MS)
    expect(panel.get_by_test_id("pal-status")).to_have_attribute(
        "data-status", "idle", timeout=TURN_TIMEOUT_MS
    )
    expect(_cells(page)).to_have_count(2)  # the heading and the agent's cell

    # Copy: the code on the clipboard, and a confirmation to see.
    copy = block.get_by_role("button", name="Copy code")
    copy.click()
    expect(block.get_by_test_id("pal-code-result")).to_have_text("Copied", timeout=UI_TIMEOUT_MS)
    assert page.evaluate("() => navigator.clipboard.readText()") == ANSWER_CODE

    # Insert below the active cell (the heading): a code cell, not run.
    _cells(page).first.locator(".jp-InputPrompt").click()
    block.get_by_role("button", name="Insert below the active cell").click()
    expect(_cells(page)).to_have_count(3, timeout=UI_TIMEOUT_MS)
    inserted = _cells(page).nth(1)
    expect(inserted).to_have_class(re_word("jp-CodeCell"))
    expect(inserted).to_have_class(re_word("jp-mod-active"))
    expect(inserted.locator(".cm-content")).to_contain_text(
        "roots = [math.sqrt(s) for s in squares]"
    )
    expect(inserted.locator(".jp-InputPrompt")).to_have_text("[ ]:")
    expect(block.get_by_test_id("pal-code-result")).to_have_text("Inserted")

    # JupyterLab's undo takes it back (Escape in the input returns to the notebook).
    panel.get_by_test_id("pal-chat-input").focus()
    page.keyboard.press("Escape")
    page.wait_for_function(FOCUS_IN_NOTEBOOK_JS, timeout=UI_TIMEOUT_MS)
    page.keyboard.press("z")
    expect(_cells(page)).to_have_count(2, timeout=UI_TIMEOUT_MS)

    # The next agent cell to review, from the palette.
    _cells(page).first.locator(".jp-InputPrompt").click()
    _palette(page, "Select the next agent cell to review")
    expect(_cells(page).nth(1)).to_have_class(re_word("jp-mod-active"), timeout=UI_TIMEOUT_MS)
    expect(_cells(page).nth(1)).to_have_class(re_word("pal-agent-cell"))

    # Contrast of every visible text, light then dark (the notebook's "agent · turn 1" badge too).
    agent_cell = page.locator(".jp-NotebookPanel .jp-Cell.pal-agent-cell").first
    panel.get_by_test_id("pal-chat-input").focus()
    try:
        for theme, light, shot in (
            ("JupyterLab Light", "true", "pairing_keyboard_light.png"),
            ("JupyterLab Dark", "false", "pairing_keyboard_dark.png"),
        ):
            _switch_theme(page, theme)
            expect(page.locator("body")).to_have_attribute(
                "data-jp-theme-light", light, timeout=UI_TIMEOUT_MS
            )
            expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=UI_TIMEOUT_MS)
            save_screenshot(page, shot)
            assert _unreadable(panel) == [], theme
            badge = agent_cell.evaluate(BADGE_CONTRAST_JS)
            assert "agent · turn 1" in badge["text"]
            assert badge["contrast"] >= MIN_CONTRAST, (theme, badge)
    finally:
        _switch_theme(page, "JupyterLab Light")


# The user's own cell runs until the test writes this file; the agent's cell waits behind it, so
# the turn runs for as long as the test needs (docs/pairing.md, "Steer and queue").
HOLD_FILE = "keys.go"
USER_CELL = f"import os, time\nwhile not os.path.exists({HOLD_FILE!r}): time.sleep(0.05)"
FIRST, QUEUED, STEERED, FROM_PALETTE = (
    "Sum the first ten squares.",
    "Then list them.",
    "Use integers only.",
    "And their mean.",
)


def test_steer_and_queue_from_the_keyboard_while_a_cell_runs(
    lab_server: LabServer, page: Any
) -> None:
    from playwright.sync_api import expect

    name = "steer-keys.ipynb"
    _create_notebook(lab_server, name)
    _open_notebook(page, lab_server, name)
    expect(_cells(page)).to_have_count(1, timeout=UI_TIMEOUT_MS)
    _wait_for_idle_kernel(lab_server, name, KERNEL_IDLE_TIMEOUT)
    _run_cell(page, USER_CELL)  # runs until HOLD_FILE exists

    panel = page.get_by_test_id("pal-chat-panel")
    chat_input = panel.get_by_test_id("pal-chat-input")
    status = panel.get_by_test_id("pal-status")
    page.keyboard.press("Control+Shift+A")
    expect(chat_input).to_be_focused(timeout=UI_TIMEOUT_MS)
    expect(status).to_have_attribute("data-connection", "connected", timeout=UI_TIMEOUT_MS)
    page.keyboard.type(FIRST)
    page.keyboard.press("Enter")
    # The agent's work waits for the user's cell: the turn runs until the test lets it go.
    expect(status).to_have_attribute("data-status", "running", timeout=TURN_TIMEOUT_MS)

    queued = panel.get_by_test_id("pal-queued")
    page.keyboard.type(QUEUED)
    page.keyboard.press("Alt+Enter")  # prime-agent-lab:queue
    expect(panel.get_by_test_id("pal-queued-text")).to_have_text([QUEUED], timeout=UI_TIMEOUT_MS)
    expect(chat_input).to_have_value("")
    page.keyboard.type(STEERED)
    page.keyboard.press("Alt+Shift+Enter")  # prime-agent-lab:steer
    expect(chat_input).to_be_focused()  # the keys stayed in the chat, none reached the notebook
    expect(panel.get_by_test_id("pal-queued-text")).to_have_text(
        [QUEUED, STEERED], timeout=UI_TIMEOUT_MS
    )
    # The palette's queue command takes the input's text too.
    chat_input.focus()
    page.keyboard.type(FROM_PALETTE)
    _palette(page, "Queue the Prime Agent chat message as a follow-up")
    expect(panel.get_by_test_id("pal-queued-text")).to_have_text(
        [QUEUED, STEERED, FROM_PALETTE], timeout=UI_TIMEOUT_MS
    )
    expect(queued.nth(0)).to_have_attribute("data-mode", "follow_up")
    expect(queued.nth(1)).to_have_attribute("data-mode", "steer")
    expect(queued.nth(2)).to_have_attribute("data-mode", "follow_up")
    expect(status).to_have_attribute("data-status", "running")  # all of it while the turn ran
    save_screenshot(page, "pairing_keyboard_steer_queue.png")

    (lab_server.root_dir / HOLD_FILE).write_text("go")
    # The steer entered the running turn after its cell; each follow-up started a turn of its own.
    expect(panel.get_by_test_id("pal-user")).to_have_text(
        [FIRST, STEERED, QUEUED, FROM_PALETTE], timeout=TURN_TIMEOUT_MS
    )
    expect(panel.get_by_test_id("pal-user").nth(1)).to_have_attribute("data-mode", "steer")
    expect(status).to_have_attribute("data-status", "idle", timeout=TURN_TIMEOUT_MS)
    expect(panel.get_by_test_id("pal-queue")).to_be_hidden()
    expect(panel.get_by_test_id("pal-error")).to_have_count(0)

    # Ctrl+Shift+O: the session list, with the focus on the current session's row.
    page.keyboard.press("Control+Shift+O")
    expect(panel.get_by_test_id("pal-session-list")).to_be_visible(timeout=UI_TIMEOUT_MS)
    current = panel.locator('[data-testid="pal-session-row"][data-current="true"]')
    expect(current).to_be_focused(timeout=UI_TIMEOUT_MS)
