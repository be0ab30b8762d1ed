"""The chat panel at 300 px (issue 19, item 2): every `/tree` row and every `/refine history` row
shows its label (wrapped, or cut with the whole text in its tooltip), and the restore line after a
kernel restart has a Copy button that copies its command. Screenshots go to the test's tmp dir."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from .conftest import LabServer, send_to_chat
from .test_branch_badge import _switch_theme
from .test_chat_panel import (
    KERNEL_IDLE_TIMEOUT,
    TURN_TIMEOUT_MS,
    UI_TIMEOUT_MS,
    _wait_for_idle_kernel,
)
from .test_harness_panel import FLAKY_TEST, _attach, _stores
from .test_harness_review import _restart_from_the_kernel_menu

pytestmark = pytest.mark.browser

PANEL_WIDTH = 300
# A wider sidebar, as many users keep it: the narrow-panel layout must not spoil it.
WIDE_PANEL_WIDTH = 420
# A label squeezed to "tur…" was about 25 px wide; a readable one has room for a few words.
MIN_LABEL_WIDTH = 100

FIRST_REFINEMENT = {
    "summary": "Retry flaky tests five times before reporting them",
    "rationale": "three reruns in a row passed on the fourth try",
    "expected_outcome": "fewer red runs",
    "edits": [
        {"action": "update", "kind": "memory", "id": "flaky_test", "content": "retry five times"}
    ],
}
SECOND_REFINEMENT = {
    "summary": (
        "Remember that the nightly export lands in /data/exports/nightly/2026-11-30T02:00:00Z "
        "and is read-only for every agent of this project"
    ),
    "rationale": "the agent wrote into the export twice",
    "expected_outcome": "no writes to the export",
    "edits": [
        {"action": "update", "kind": "memory", "id": "flaky_test", "content": "export is ro"}
    ],
}

MESSAGES = (
    "first: summarise the quarterly revenue table by region and flag every outlier you find",
    "second: now do the same for the cost table, with the same regions and thresholds",
    "third: compare both tables and write the three largest differences as a short list",
)


@pytest.fixture(scope="module")
def lab_script() -> dict[str, Any]:
    return {
        "restart_each_message": True,
        "turns": [
            {"text": "Running it.", "code": "x = 41\nprint('ran')"},
            {"text": "Done."},
        ],
        "side": {
            "refine": [
                {"text": json.dumps(FIRST_REFINEMENT)},
                {"text": json.dumps(SECOND_REFINEMENT)},
            ]
        },
    }


# Where a label sits and whether its text is cut: a label is readable when it is wide enough,
# inside the panel, not cut sideways, and either not cut at the bottom or carrying its whole
# text in the tooltip.
LABEL_BOX_JS = """
(label) => {
  const box = label.getBoundingClientRect();
  const panel = label.closest('[data-testid="pal-chat-panel"]').getBoundingClientRect();
  const slot = label.closest('.pal-tree-slot').getBoundingClientRect();
  return {
    width: box.width,
    height: box.height,
    insidePanel: box.left >= panel.left - 0.5 && box.right <= panel.right + 0.5,
    insideSlot: box.top >= slot.top - 0.5 && box.bottom <= slot.bottom + 0.5,
    cutSideways: label.scrollWidth > label.clientWidth + 1,
    cutBelow: label.scrollHeight > label.clientHeight + 1,
    text: label.innerText,
    title: label.title,
  };
}
"""


# The split handle between the main area and the right sidebar (JupyterLab's main split panel).
RIGHT_HANDLE = "#jp-main-split-panel > .lm-SplitPanel-handle:not(.lm-mod-hidden)"
RIGHT_TAB_BAR = ".jp-SideBar.jp-mod-right"


def _panel_width(chat: Any) -> float:
    return float(chat.evaluate("node => node.getBoundingClientRect().width"))


def _narrow(page: Any, chat: Any, width: int = PANEL_WIDTH) -> None:
    """The chat panel `width` px wide, the way a user makes it: by dragging the split handle
    between the main area and the right sidebar (a few drags, each correcting the last)."""
    handle = page.locator(RIGHT_HANDLE).last
    for _ in range(4):
        shown = _panel_width(chat)
        if abs(shown - width) <= 1:
            break
        box = handle.bounding_box()
        assert box, "no split handle next to the right sidebar"
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        page.mouse.move(x, y)
        page.mouse.down()
        page.mouse.move(x + (shown - width), y, steps=8)
        page.mouse.up()
    where = chat.evaluate(
        f"""node => {{
          const box = node.getBoundingClientRect();
          const bar = document.querySelector('{RIGHT_TAB_BAR}').getBoundingClientRect();
          return {{ width: box.width, right: box.right, bar: bar.left }};
        }}"""
    )
    assert abs(where["width"] - width) <= 1, where
    # Nothing of the panel under the sidebar's tab bar.
    assert where["right"] <= where["bar"] + 0.5, where


# Every visible button and row label inside `scope` (a selector under the chat panel): where it
# sits against the panel's box, and whether its text is cut; and each overflowing container.
FITS_JS = """
([scopes, labels]) => {
  const panel = document.querySelector('[data-testid="pal-chat-panel"]');
  // What the user sees of the panel: its box, clipped by the sidebar holding it and by the
  // sidebar's tab bar.
  const own = panel.getBoundingClientRect();
  const holder = panel.parentElement.getBoundingClientRect();
  const bar = document.querySelector('.jp-SideBar.jp-mod-right').getBoundingClientRect();
  const box = {
    left: Math.max(own.left, holder.left),
    right: Math.min(own.right, holder.right, bar.left),
  };
  const problems = [];
  const overflows = (node) => node.scrollWidth > node.clientWidth + 1;
  if (overflows(panel)) {
    problems.push(`panel overflows: ${panel.scrollWidth} > ${panel.clientWidth}`);
  }
  let checked = 0;
  for (const selector of scopes) {
    const roots = panel.querySelectorAll(selector);
    if (roots.length === 0) {
      problems.push(`nothing matches ${selector}`);
    }
    for (const root of roots) {
      if (overflows(root)) {
        problems.push(`${selector} overflows: ${root.scrollWidth} > ${root.clientWidth}`);
      }
      for (const node of root.querySelectorAll(`button, select, ${labels}`)) {
        const r = node.getBoundingClientRect();
        if (r.width === 0 || r.height === 0 || node.closest('.pal-visually-hidden')) {
          continue;  // not shown
        }
        checked += 1;
        const name = `${selector} ${node.tagName.toLowerCase()}.${node.className} ` +
          `"${(node.innerText || node.getAttribute('aria-label') || '').slice(0, 40)}"`;
        if (r.left < box.left - 0.5 || r.right > box.right + 0.5) {
          problems.push(
            `${name} sticks out: ${r.left}..${r.right} vs panel ${box.left}..${box.right}`);
        }
        if (node.tagName !== 'SELECT' && node.scrollWidth > node.clientWidth + 1) {
          problems.push(`${name} cut sideways: ${node.scrollWidth} > ${node.clientWidth}`);
        }
        const cutBelow = node.scrollHeight > node.clientHeight + 1;
        const tip = node.title || node.getAttribute('aria-label') || '';
        if (cutBelow && !(tip && tip.length >= (node.innerText || '').trim().length)) {
          problems.push(`${name} cut below without its whole text in a tooltip`);
        }
      }
    }
  }
  return { problems, checked };
}
"""
ROW_LABELS = ".pal-tree-label, .pal-tree-title, .pal-title, label, .pal-notebook, .pal-status"
HEADER = '[data-testid="pal-header"]'
COMPOSER = ".pal-composer"


def _assert_one_row(chat: Any, *test_ids: str) -> None:
    """The elements with these test ids sit on one line (a group, not scattered over lines)."""
    middles = [
        chat.get_by_test_id(test_id).evaluate(
            "node => { const r = node.getBoundingClientRect(); return r.top + r.height / 2; }"
        )
        for test_id in test_ids
    ]
    assert max(middles) - min(middles) <= 4, dict(zip(test_ids, middles, strict=True))


def _assert_fits(chat: Any, *scopes: str) -> None:
    """No horizontal overflow in the panel or in `scopes`; every button and label in them lies
    inside the panel's box and shows its text (cut below only with all of it in a tooltip)."""
    result = chat.evaluate(f"(_node, args) => ({FITS_JS})(args)", [list(scopes), ROW_LABELS])
    assert result["checked"] > 0, result
    assert not result["problems"], "\n".join(result["problems"])


def _assert_readable(label: Any, full_text: str) -> dict[str, Any]:
    label.scroll_into_view_if_needed()
    box = label.evaluate(LABEL_BOX_JS)
    where = f"{full_text!r}: {box}"
    assert box["width"] >= MIN_LABEL_WIDTH, where
    assert box["insidePanel"] and box["insideSlot"], where
    assert not box["cutSideways"], where
    if box["cutBelow"]:
        assert full_text in box["title"], where
    else:
        assert box["text"].replace("\n", " ").strip().startswith(full_text[:20]), where
    return box


def _screenshot(page: Any, chat: Any, path: Path) -> None:
    chat.screenshot(path=str(path))
    assert path.stat().st_size > 0


def test_tree_rows_of_a_root_and_its_branches_are_readable_in_a_300px_panel(
    lab_server: LabServer, page: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    chat, _ = _attach(page, lab_server, "narrow-tree.ipynb")
    _narrow(page, chat)
    status = chat.get_by_test_id("pal-status")
    for turn, text in enumerate(MESSAGES, start=1):
        send_to_chat(chat, text)
        expect(chat.get_by_test_id("pal-assistant").filter(has_text="Done.")).to_have_count(
            turn, timeout=TURN_TIMEOUT_MS
        )
        expect(status).to_have_attribute("data-status", "idle", timeout=TURN_TIMEOUT_MS)
    # Back to the end of turn 1 and on from there: the tree has a root and two branches.
    send_to_chat(chat, "/tree")
    rows = chat.get_by_test_id("pal-tree-row")
    expect(rows).to_have_count(6, timeout=UI_TIMEOUT_MS)
    rows.and_(chat.locator('[data-type="turn_end"]')).first.get_by_test_id(
        "pal-tree-branch"
    ).click()
    expect(chat.get_by_test_id("pal-tree")).to_have_count(0, timeout=UI_TIMEOUT_MS)
    send_to_chat(chat, "fourth: " + MESSAGES[2])
    expect(chat.get_by_test_id("pal-assistant").filter(has_text="Done.")).to_have_count(
        2, timeout=TURN_TIMEOUT_MS
    )
    expect(status).to_have_attribute("data-status", "idle", timeout=TURN_TIMEOUT_MS)

    send_to_chat(chat, "/tree")
    expect(rows).to_have_count(8, timeout=UI_TIMEOUT_MS)
    assert max(int(rows.nth(i).get_attribute("data-depth") or 0) for i in range(8)) >= 1
    _screenshot(page, chat, tmp_path / "narrow_tree.png")
    _assert_fits(chat, HEADER, '[data-testid="pal-tree-slot"]', COMPOSER)

    slot = chat.get_by_test_id("pal-tree-slot")
    heights = slot.evaluate(
        "node => ({ shown: node.clientHeight, content: node.scrollHeight,"
        " panel: node.closest('[data-testid=\"pal-chat-panel\"]').clientHeight })"
    )
    # The view is not a strip: its own height, up to 45% of the panel.
    assert heights["shown"] >= min(heights["content"], 0.4 * heights["panel"]), heights
    for index in range(8):
        label = rows.nth(index).get_by_test_id("pal-tree-label")
        full = label.get_attribute("title") or ""
        assert full.startswith("turn "), full
        _assert_readable(label, full)
    _screenshot(page, chat, tmp_path / "narrow_tree_scrolled.png")
    _narrow(page, chat, WIDE_PANEL_WIDTH)
    _assert_fits(chat, HEADER, '[data-testid="pal-tree-slot"]', COMPOSER)
    _screenshot(page, chat, tmp_path / "wide_tree.png")


def test_refine_history_rows_say_what_each_refinement_changed_in_a_300px_panel(
    lab_server: LabServer, page: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    chat, session_id = _attach(page, lab_server, "narrow-refine.ipynb")
    local, _ = _stores(lab_server, session_id)
    local.create("memory", FLAKY_TEST, "user")
    _narrow(page, chat)
    lines = chat.get_by_test_id("pal-refinement")
    send_to_chat(chat, "/refine retry flaky tests")
    expect(lines).to_have_count(1, timeout=TURN_TIMEOUT_MS)
    send_to_chat(chat, "/refine remember the export")
    expect(lines).to_have_count(2, timeout=TURN_TIMEOUT_MS)

    send_to_chat(chat, "/refine history")
    rows = chat.get_by_test_id("pal-refine-row")
    expect(rows).to_have_count(2, timeout=UI_TIMEOUT_MS)
    _screenshot(page, chat, tmp_path / "narrow_refine_history.png")
    _assert_fits(
        chat, HEADER, '[data-testid="pal-refinement"]', '[data-testid="pal-refine-form"]', COMPOSER
    )

    headlines = []
    for index, summary in enumerate((SECOND_REFINEMENT["summary"], FIRST_REFINEMENT["summary"])):
        row = rows.nth(index)
        what = row.get_by_test_id("pal-refine-what")
        # The summary (shortened past 80 characters, whole on expand) leads the row, not its id.
        assert summary.startswith(what.inner_text().rstrip("…▸ ").strip()), what.inner_text()
        headlines.append(what.inner_text())
        label = row.get_by_test_id("pal-refine-label")
        title = label.get_attribute("title") or ""
        assert summary in title and f"id {row.get_attribute('data-refinement-id')}" in title
        assert "refine_" not in label.inner_text()
        _assert_readable(label, summary)
        details = row.get_by_test_id("pal-refine-details").inner_text()
        # An entry by its kind and title ("flaky test"), as a rollback's line in the chat names it.
        assert "update memory “flaky test”" in details and "1 applied" in details, details
        rollback = row.get_by_test_id("pal-refine-rollback")
        expect(rollback).to_be_visible()
        assert rollback.evaluate(
            "(b) => { const r = b.getBoundingClientRect();"
            " const p = b.closest('[data-testid=\"pal-chat-panel\"]').getBoundingClientRect();"
            " return r.left >= p.left && r.right <= p.right; }"
        )
    assert headlines[0] != headlines[1]
    _narrow(page, chat, WIDE_PANEL_WIDTH)
    _assert_fits(
        chat, HEADER, '[data-testid="pal-refinement"]', '[data-testid="pal-refine-form"]', COMPOSER
    )
    _screenshot(page, chat, tmp_path / "wide_refine_history.png")


def test_header_session_list_and_input_fit_at_300_and_420_px_in_the_dark_theme(
    lab_server: LabServer, page: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    chat, _ = _attach(page, lab_server, "narrow-dark.ipynb")
    send_to_chat(chat, MESSAGES[0])
    expect(chat.get_by_test_id("pal-assistant").filter(has_text="Done.")).to_have_count(
        1, timeout=TURN_TIMEOUT_MS
    )
    expect(chat.get_by_test_id("pal-status")).to_have_attribute(
        "data-status", "idle", timeout=TURN_TIMEOUT_MS
    )
    _switch_theme(page, "JupyterLab Dark")
    expect(page.locator("body")).to_have_attribute(
        "data-jp-theme-light", "false", timeout=UI_TIMEOUT_MS
    )
    expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=UI_TIMEOUT_MS)
    chat.get_by_test_id("pal-sessions").click()
    sessions = '[data-testid="pal-session-list"]'
    expect(chat.locator(sessions)).to_be_visible(timeout=UI_TIMEOUT_MS)
    for width, name in ((PANEL_WIDTH, "narrow_dark.png"), (WIDE_PANEL_WIDTH, "wide_dark.png")):
        _narrow(page, chat, width)
        _assert_fits(chat, HEADER, sessions, ".pal-transcript", COMPOSER)
        # The header's buttons wrap as one group; the model, context and permission mode share
        # one row above Stop, Steer and Send.
        _assert_one_row(chat, "pal-sessions", "pal-harness", "pal-new-session")
        _assert_one_row(chat, "pal-model-picker", "pal-context-use", "pal-permission-mode")
        _screenshot(page, chat, tmp_path / name)
    # The theme is a user setting the server keeps: the module's next tests run light again.
    _switch_theme(page, "JupyterLab Light")
    expect(page.locator("body")).to_have_attribute(
        "data-jp-theme-light", "true", timeout=UI_TIMEOUT_MS
    )


def test_the_restore_line_after_a_kernel_restart_copies_its_command(
    lab_server: LabServer, page: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    name = "narrow-restore.ipynb"
    chat, session_id = _attach(page, lab_server, name)
    origin = "{0.scheme}://{0.netloc}".format(urlsplit(lab_server.url))
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=origin)
    _narrow(page, chat)
    send_to_chat(chat, "set x")
    expect(chat.get_by_test_id("pal-assistant").filter(has_text="Done.")).to_have_count(
        1, timeout=TURN_TIMEOUT_MS
    )
    manifest = lab_server.base / "sessions" / session_id / "kernel-state" / "manifest.json"
    # The snapshot comes a moment after the turn (snapshot_debounce); the hint needs it.
    deadline = time.monotonic() + KERNEL_IDLE_TIMEOUT
    while not manifest.exists() and time.monotonic() < deadline:
        time.sleep(0.25)
    assert manifest.exists(), f"no kernel snapshot at {manifest}"

    _restart_from_the_kernel_menu(page)
    _wait_for_idle_kernel(lab_server, name, KERNEL_IDLE_TIMEOUT)
    line = chat.locator('[data-testid="pal-notice"][data-kind="kernel_state_not_restored"]')
    expect(line).to_have_count(1, timeout=UI_TIMEOUT_MS)
    command = line.get_by_test_id("pal-inline-command-code")
    expect(command).to_have_count(1)
    expected = command.inner_text()
    assert expected.startswith("import prime_agent_kernel; prime_agent_kernel.restore_snapshot(")
    assert "`" not in line.inner_text()
    _screenshot(page, chat, tmp_path / "narrow_restore_line.png")

    copy = line.get_by_test_id("pal-command-copy")
    copy.click()
    expect(copy).to_have_text("Copied", timeout=UI_TIMEOUT_MS)
    assert page.evaluate("() => navigator.clipboard.readText()") == expected
    # The line fits the panel: the long command wraps instead of widening it.
    assert line.evaluate("(node) => node.scrollWidth <= node.clientWidth + 1")
