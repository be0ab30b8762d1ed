"""The harness panel in a real JupyterLab: the chat panel's Harness button shows
`rlm.harness.panel()` in a console on a subshell of the notebook's kernel; it renders in the
light and dark themes, follows a change made by another writer, and its buttons work while the
agent's kernel runs a long cell (docs/ui.md "The Harness view")."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from prime_agent_lab.core.harness.keeper import ENV_GLOBAL_DIR
from prime_agent_lab.core.harness.store import HarnessStore
from prime_agent_lab.core.trust import Signer

from .conftest import LabServer, save_screenshot, send_to_chat
from .test_branch_badge import _switch_theme
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

MIN_CONTRAST = 4.5

# The memory the refine tests start from (PROPOSAL updates it).
FLAKY_TEST = {"title": "flaky test", "content": "retry three times"}

# The scripted planner's answer to `/refine`: one valid edit and one the host must reject.
PROPOSAL = {
    "summary": "Retry flaky tests five times",
    "rationale": "three reruns in a row passed on the fourth try",
    "expected_outcome": "fewer red runs",
    "edits": [
        {"action": "update", "kind": "memory", "id": "flaky_test", "content": "retry five times"},
        {"action": "update", "kind": "prompt", "id": "base_system_prompt", "content": "obey"},
    ],
}

# Contrast of an element's text against its own (opaque) background, WCAG formula.
TEXT_CONTRAST_JS = """
(el) => {
  const rgb = (text) => text.match(/rgba?\\(([^)]+)\\)/)[1].split(',').slice(0, 3).map(Number);
  const lum = (c) => {
    const [r, g, b] = c.map((v) => {
      const s = v / 255;
      return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const style = getComputedStyle(el);
  const [hi, lo] = [lum(rgb(style.color)), lum(rgb(style.backgroundColor))].sort((x, y) => y - x);
  return { contrast: (hi + 0.05) / (lo + 0.05), background: style.backgroundColor };
}
"""


@pytest.fixture(scope="module")
def release_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The agent's long cell runs until this file exists."""
    return tmp_path_factory.mktemp("harness-release") / "release"


@pytest.fixture(scope="module")
def lab_script(release_file: Path) -> dict[str, Any]:
    long_cell = (
        "import os, time\n"
        f"while not os.path.exists({str(release_file)!r}):\n"
        "    time.sleep(0.1)\n"
        "print('released')"
    )
    return {
        "turns": [
            {"text": "I will wait for the release file.", "code": long_cell},
            {"text": "Released."},
        ],
        "side": {"refine": [{"text": json.dumps(PROPOSAL)}]},
    }


def _stores(server: LabServer, session_id: str) -> tuple[HarnessStore, HarnessStore]:
    """The session's local store and the lab's global store, as another writer sees them."""
    # signed with the lab's secret, as every writer of a local store signs (docs/trust.md)
    secret = server.base / "data" / "prime_agent_lab" / "signing_secret"
    local = HarnessStore(
        server.base / "sessions" / session_id / "harness", "local", Signer.load(secret)
    )
    # As the server finds it: the tests' temporary global store (tests/conftest.py), else the
    # one in the lab's Jupyter data directory.
    global_dir = (
        os.environ.get(ENV_GLOBAL_DIR) or server.base / "data" / "prime_agent_lab" / "harness"
    )
    global_ = HarnessStore(Path(global_dir), "global")
    return local, global_


def _seed(local: HarnessStore, global_: HarnessStore) -> None:
    local.create("memory", FLAKY_TEST, "user")
    local.create(
        "prompt", {"title": "units", "content": "report lengths in metres", "path": "style"}
    )
    global_.create(
        "skill",
        {
            "title": "mean",
            "content": "Average of numbers.",
            "reference": {"type": "python", "import": "statistics", "callable": "mean"},
            "arguments": {"data": "list[float]"},
        },
    )
    before = local.get("memory", "flaky_test")
    after = local.update("memory", "flaky_test", {"content": "retry five times"}, "refine")
    local.append_refinement(
        {
            "id": "ref_seeded",
            "trigger": "user",
            "scope": "local",
            "instructions": "promote the retry pattern",
            "summary": "Retry flaky tests five times",
            "rationale": "three reruns in a row passed on the fourth try",
            "expected_outcome": "fewer red runs",
            "edits": [
                {
                    "action": "update",
                    "kind": "memory",
                    "id": "flaky_test",
                    "applied": True,
                    "error": None,
                    "before": before.to_dict() if before else None,
                    "after": after.to_dict(),
                },
                {
                    "action": "update",
                    "kind": "prompt",
                    "id": "base_system_prompt",
                    "applied": False,
                    "error": "the base system prompt is never editable",
                    "before": None,
                    "after": None,
                },
            ],
            "rollback_of": None,
            "harness_version": {"local": local.revision(), "global": global_.revision()},
            "created_at": "2026-11-30T12:00:00+00:00",
        }
    )


def _attach(page: Any, server: LabServer, name: str) -> tuple[Any, str]:
    """Open a new notebook with the chat panel attached; returns (chat panel, session id)."""
    from playwright.sync_api import expect

    _create_notebook(server, name)
    _open_notebook(page, server, name)
    _wait_for_idle_kernel(server, name, KERNEL_IDLE_TIMEOUT)
    chat = _open_panel(page)
    status = chat.get_by_test_id("pal-status")
    expect(status).to_have_attribute("data-connection", "connected", timeout=UI_TIMEOUT_MS)
    session_id = status.get_attribute("data-session")
    assert session_id
    return chat, session_id


def _open_harness(page: Any, chat: Any) -> Any:
    """Click Harness; returns the panel in the Harness console."""
    from playwright.sync_api import expect

    chat.get_by_test_id("pal-harness").click()
    panel = page.locator(".pal-HarnessView .pal-harness-panel")
    try:
        expect(panel).to_be_visible(timeout=UI_TIMEOUT_MS)
    except AssertionError:
        consoles = page.locator(".pal-HarnessView")
        shown = consoles.last.inner_text() if consoles.count() else "(no view)"
        errors = chat.get_by_test_id("pal-error").all_inner_texts()
        raise AssertionError(f"no panel; view: {shown!r}; chat errors: {errors}") from None
    return panel


def _tab(panel: Any, label: str) -> None:
    panel.locator(".lm-TabBar-tab, .p-TabBar-tab", has_text=label).first.click()


def test_the_harness_view_renders_in_light_and_dark_and_follows_another_writer(
    lab_server: LabServer, page: Any
) -> None:
    from playwright.sync_api import expect

    chat, session_id = _attach(page, lab_server, "harness-view.ipynb")
    local, global_ = _stores(lab_server, session_id)
    _seed(local, global_)
    panel = _open_harness(page, chat)

    memories = panel.locator('[data-testid="pal-harness-entry"][data-kind="memory"]')
    _tab(panel, "Memories")
    expect(memories).to_have_count(1, timeout=UI_TIMEOUT_MS)
    expect(memories).to_have_attribute("data-version", "2")
    expect(memories).to_contain_text("retry five times")
    _tab(panel, "Skills")
    skill = panel.locator('[data-testid="pal-harness-entry"][data-kind="skill"]')
    expect(skill).to_have_attribute("data-scope", "global")
    expect(skill).to_contain_text("statistics.mean(data)")
    _tab(panel, "History")
    record = panel.locator('[data-testid="pal-harness-refinement"]')
    expect(record).to_have_attribute("data-applied", "1")
    expect(record).to_have_attribute("data-rejected", "1")
    expect(record).to_contain_text("+content: retry five times")
    expect(record).to_contain_text("rejected: the base system prompt is never editable")

    for theme, light in (("JupyterLab Light", "true"), ("JupyterLab Dark", "false")):
        _switch_theme(page, theme)
        expect(page.locator("body")).to_have_attribute(
            "data-jp-theme-light", light, timeout=UI_TIMEOUT_MS
        )
        expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=UI_TIMEOUT_MS)
        seen = record.evaluate(TEXT_CONTRAST_JS)
        assert seen["contrast"] >= MIN_CONTRAST, (theme, seen)
        save_screenshot(page, f"harness_panel_{'light' if light == 'true' else 'dark'}.png")

    # Another writer's change shows without touching the page.
    local.create("memory", {"title": "late note", "content": "written by another process"})
    _tab(panel, "Memories")
    expect(memories).to_have_count(2, timeout=UI_TIMEOUT_MS)
    expect(panel.get_by_text("written by another process")).to_be_visible()
    _switch_theme(page, "JupyterLab Light")


def test_the_harness_view_answers_while_the_agents_cell_runs(
    lab_server: LabServer, page: Any, release_file: Path
) -> None:
    from playwright.sync_api import expect

    chat, session_id = _attach(page, lab_server, "harness-busy.ipynb")
    local, _ = _stores(lab_server, session_id)
    local.create("memory", {"title": "stale", "content": "delete me"}, "user")

    send_to_chat(chat, "Wait for the release file.")
    cell_line = chat.get_by_test_id("pal-cell-line")
    expect(cell_line).to_have_attribute("data-status", "running", timeout=TURN_TIMEOUT_MS)

    # The agent's cell runs: the view opens, draws and takes a click all the same; the host
    # queues the delete for the turn boundary (never while a cell runs) and says so.
    panel = _open_harness(page, chat)
    _tab(panel, "Memories")
    stale = '[data-testid="pal-harness-entry"][data-id="stale"]'
    entry = panel.locator(stale)
    expect(entry).to_be_visible(timeout=UI_TIMEOUT_MS)
    delete = panel.locator(".pal-harness-entry", has=page.locator(stale)).locator("button")
    delete.click()
    expect(delete).to_have_text("Confirm delete", timeout=UI_TIMEOUT_MS)
    delete.click()
    answer = panel.get_by_test_id("pal-harness-answer")
    expect(answer).to_contain_text(
        "Delete memory stale: queued: applies at the next turn boundary", timeout=UI_TIMEOUT_MS
    )
    expect(cell_line).to_have_attribute("data-status", "running")
    assert local.get("memory", "stale") is not None
    save_screenshot(page, "harness_panel_busy.png")

    # At the boundary after the cell the delete applies, recorded as a refinement.
    release_file.touch()
    expect(cell_line).to_have_attribute("data-status", "ok", timeout=TURN_TIMEOUT_MS)
    expect(entry).to_have_count(0, timeout=TURN_TIMEOUT_MS)
    assert local.get("memory", "stale") is None
    # The answer line no longer says "queued" once the host recorded the delete.
    expect(answer).to_contain_text("Delete memory stale: applied", timeout=UI_TIMEOUT_MS)
    _tab(panel, "History")
    record = panel.locator('[data-testid="pal-harness-refinement"]')
    expect(record).to_have_count(1, timeout=UI_TIMEOUT_MS)
    expect(record).to_contain_text("trigger delete")
    expect(record).to_contain_text("-content: delete me")
    expect(chat.get_by_test_id("pal-status")).to_have_attribute(
        "data-status", "idle", timeout=TURN_TIMEOUT_MS
    )


def test_a_rollback_from_the_panel_is_recorded_like_any_other_refinement(
    lab_server: LabServer, page: Any
) -> None:
    from playwright.sync_api import expect

    chat, session_id = _attach(page, lab_server, "harness-rollback.ipynb")
    local, _ = _stores(lab_server, session_id)
    local.create("memory", FLAKY_TEST, "user")

    # /refine in the chat: planned by the scripted planner, applied at once (the agent is idle).
    send_to_chat(chat, "/refine promote the retry pattern")
    lines = chat.get_by_test_id("pal-refinement")
    expect(lines).to_have_count(1, timeout=TURN_TIMEOUT_MS)
    expect(lines.first).to_have_attribute("data-applied", "1")
    expect(lines.first).to_have_attribute("data-rejected", "1")
    refined = lines.first.get_attribute("data-refinement-id")
    assert local.get("memory", "flaky_test").content == "retry five times"  # type: ignore[union-attr]

    panel = _open_harness(page, chat)
    _tab(panel, "History")
    record = panel.locator(f'[data-testid="pal-harness-refinement"][data-id="{refined}"]')
    expect(record).to_contain_text("-content: retry three times", timeout=UI_TIMEOUT_MS)
    expect(record).to_contain_text("+content: retry five times")
    panel.locator(
        ".pal-harness-refinement",
        has=page.locator(f'[data-testid="pal-harness-refinement"][data-id="{refined}"]'),
    ).locator("button", has_text="Rollback").click()
    answer = panel.get_by_test_id("pal-harness-answer")
    expect(answer).to_contain_text(f"Rollback of {refined}: applied", timeout=UI_TIMEOUT_MS)

    # Recorded like any other refinement: in the store, the panel, the chat and GET refinements.
    records = panel.locator('[data-testid="pal-harness-refinement"]')
    expect(records).to_have_count(2, timeout=UI_TIMEOUT_MS)
    expect(records.first).to_contain_text(f"rollback of {refined}")
    expect(records.first).to_contain_text("+content: retry three times")
    expect(lines).to_have_count(2, timeout=UI_TIMEOUT_MS)
    # The chat names the rollback in words, as /refine history does; the ids are in the tooltip.
    expect(lines.last).to_contain_text(f"Rollback of “{PROPOSAL['summary']}” from ")
    expect(lines.last).to_contain_text("update memory “flaky test”")
    expect(lines.last).not_to_contain_text(refined)
    assert refined in (lines.last.locator(".pal-refinement-text").get_attribute("title") or "")
    restored = local.get("memory", "flaky_test")
    assert restored is not None and restored.content == "retry three times"
    assert restored.version == 3  # versions keep rising through a rollback
    listed = lab_server.api("GET", f"prime-agent/api/sessions/{session_id}/refinements")
    assert [r.get("rollback_of") for r in listed["refinements"]] == [None, refined]

    # The rollback form lists both, newest first.
    send_to_chat(chat, "/refine history")
    rows = chat.get_by_test_id("pal-refine-row")
    expect(rows).to_have_count(2, timeout=UI_TIMEOUT_MS)
    expect(rows.last).to_have_attribute("data-refinement-id", refined or "")
    save_screenshot(page, "harness_panel_rollback.png")
