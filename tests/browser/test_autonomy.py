"""Autonomous mode in the panel (docs/autonomy.md, docs/ui.md): the switch turns it on with a gate,
the indicator shows the run, the failed gate is a line in the chat, and Stop ends the run and turns
the switch off. The indicator and the gate line stay readable in the light and the dark theme.

Every test here fails on any uncaught page error or console error (see `new_page`).
"""

from __future__ import annotations

import re
import shlex
import sys
from typing import Any

import pytest

from .conftest import LabServer, save_screenshot, send_to_chat
from .test_branch_badge import MIN_CONTRAST, _switch_theme
from .test_chat_panel import (
    KERNEL_IDLE_TIMEOUT,
    TURN_TIMEOUT_MS,
    UI_TIMEOUT_MS,
    _create_notebook,
    _open_notebook,
    _wait_for_idle_kernel,
)
from .test_harness_panel import TEXT_CONTRAST_JS
from .test_stop_and_sessions import _connected_panel, session_of

pytestmark = pytest.mark.browser

NOTEBOOK = "autonomy.ipynb"
# A shell gate that always fails, with one line of output (the same command whether the server
# runs it through a shell or splits it into arguments).
GATE_OUTPUT = "gate-not-ready"
GATE = f"{shlex.quote(sys.executable)} -c \"print('{GATE_OUTPUT}'); raise SystemExit(3)\""
MAX_TURNS = 5
# Model call 1 answers without a cell, so the run's gate runs and fails; its output goes back to
# the model as the continuation, and model call 2 writes a cell that runs until Stop.
SLOW_CELL = "import time\nprint('working on it', flush=True)\ntime.sleep(120)"
SCRIPT = {
    "turns": [
        {"text": "Nothing left to do, I think."},
        {"text": "The gate failed; working on it.", "code": SLOW_CELL},
        {"text": "Done."},
    ]
}


@pytest.fixture(scope="module")
def lab_script() -> dict[str, Any]:
    return SCRIPT


def _autonomy(server: LabServer, session_id: str) -> dict[str, Any]:
    return server.api("GET", f"prime-agent/api/sessions/{session_id}/autonomy")


def _readable_in_both_themes(page: Any, element: Any, what: str) -> None:
    """`element`'s text has at least 4.5:1 contrast in the dark and the light theme (ends light)."""
    from playwright.sync_api import expect

    for theme, light in (("JupyterLab Dark", "false"), ("JupyterLab Light", "true")):
        _switch_theme(page, theme)
        expect(page.locator("body")).to_have_attribute(
            "data-jp-theme-light", light, timeout=UI_TIMEOUT_MS
        )
        expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=UI_TIMEOUT_MS)
        seen = element.evaluate(TEXT_CONTRAST_JS)
        assert seen["contrast"] >= MIN_CONTRAST, (what, theme, seen)


def test_autonomous_switch_indicator_gate_line_and_stop(lab_server: LabServer, page: Any) -> None:
    """Switch on with a gate: the indicator and the input say so; a message starts the run; the
    failed gate shows as a warning line (command in monospace, its output); Stop ends the run, and
    the server's `autonomy` event turns the switch and the indicator off."""
    from playwright.sync_api import expect

    _create_notebook(lab_server, NOTEBOOK, "# Autonomous run")
    _open_notebook(page, lab_server, NOTEBOOK)
    _wait_for_idle_kernel(lab_server, NOTEBOOK, KERNEL_IDLE_TIMEOUT)
    panel = _connected_panel(page, lab_server, NOTEBOOK)
    session_id = session_of(lab_server, NOTEBOOK)["session_id"]

    # Off, as the server says; a click opens the form prefilled with the server's budgets.
    switch = panel.get_by_test_id("pal-autonomy-switch")
    expect(switch).to_have_attribute("aria-checked", "false", timeout=UI_TIMEOUT_MS)
    expect(switch).to_be_enabled()
    indicator = panel.get_by_test_id("pal-autonomy-indicator")
    expect(indicator).to_be_hidden()
    budgets = _autonomy(lab_server, session_id)["budgets"]
    switch.click()
    form = panel.get_by_test_id("pal-autonomy-form")
    expect(form).to_be_visible()
    max_turns = form.get_by_test_id("pal-autonomy-max-turns")
    expect(max_turns).to_be_focused()
    expect(max_turns).to_have_value(str(budgets["max_turns"]))
    expect(form.get_by_test_id("pal-autonomy-max-tokens")).to_have_value(str(budgets["max_tokens"]))

    # A bad value is refused in the form, and nothing changes on the server.
    max_turns.fill("0")
    form.get_by_test_id("pal-autonomy-submit").click()
    expect(form.get_by_test_id("pal-autonomy-error")).to_contain_text("Max turns")
    assert _autonomy(lab_server, session_id)["enabled"] is False

    max_turns.fill(str(MAX_TURNS))
    form.get_by_test_id("pal-autonomy-gates").fill(GATE)
    form.get_by_test_id("pal-autonomy-submit").click()
    expect(form).to_have_count(0, timeout=UI_TIMEOUT_MS)
    expect(switch).to_have_attribute("aria-checked", "true")
    state = _autonomy(lab_server, session_id)
    assert state["enabled"] is True, state
    assert state["gates"] == [GATE], state
    assert state["budgets"]["max_turns"] == MAX_TURNS, state

    expect(indicator).to_be_visible()
    expect(indicator).to_contain_text("Autonomous")
    expect(indicator).to_contain_text(f"{MAX_TURNS} turns")
    expect(indicator).to_have_attribute("aria-label", re.compile("Autonomous mode is on"))
    chat_input = panel.get_by_test_id("pal-chat-input")
    expect(chat_input).to_have_attribute(
        "placeholder", re.compile("next message starts an autonomous run")
    )
    _readable_in_both_themes(page, indicator, "the indicator")

    # The message starts the run: the gate fails, the model goes on, its cell runs.
    send_to_chat(panel, "Make the gate pass.")
    gate_line = panel.locator('[data-testid="pal-notice"][data-kind="gate_failed"]')
    expect(gate_line).to_have_count(1, timeout=TURN_TIMEOUT_MS)
    expect(gate_line).to_have_attribute("data-tone", "warning")
    expect(gate_line).to_contain_text(GATE_OUTPUT)
    expect(gate_line.locator("code").first).to_contain_text("SystemExit(3)")
    expect(indicator).to_contain_text(re.compile(rf"\d+/{MAX_TURNS} turns"), timeout=UI_TIMEOUT_MS)
    cell_line = panel.get_by_test_id("pal-cell-line")
    expect(cell_line).to_have_attribute("data-status", "running", timeout=TURN_TIMEOUT_MS)
    # The gate line wraps inside the panel instead of widening it.
    transcript_box = panel.get_by_test_id("pal-transcript").bounding_box()
    gate_box = gate_line.bounding_box()
    assert transcript_box and gate_box
    assert gate_box["x"] + gate_box["width"] <= transcript_box["x"] + transcript_box["width"] + 1
    save_screenshot(page, "autonomy_run.png")

    # Stop ends the run; the server turns autonomous mode off and the switch follows its event.
    panel.get_by_test_id("pal-stop").click()
    expect(switch).to_have_attribute("aria-checked", "false", timeout=TURN_TIMEOUT_MS)
    expect(indicator).to_be_hidden()
    expect(cell_line).to_have_attribute("data-status", "interrupted", timeout=TURN_TIMEOUT_MS)
    expect(panel.get_by_test_id("pal-status")).to_have_attribute("data-status", "idle")
    expect(chat_input).not_to_have_attribute(
        "placeholder", re.compile("next message starts an autonomous run")
    )
    state = _autonomy(lab_server, session_id)
    assert state["enabled"] is False, state
    # A run the server still reports must say how it ended.
    assert state["run"] is None or state["run"]["reason"] == "stopped", state
    _readable_in_both_themes(page, gate_line, "the failed gate's line")
