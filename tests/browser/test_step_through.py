"""The step-through of a saved session in a real JupyterLab (docs/teaching.md, "Step-through"):
a scripted root spawns a sub-agent and floods its output past the cap; the user opens the
session's step-through from the palette, steps forward and back with the buttons and the arrow
keys, reads the cut marker of the observation as the model saw it, and steps through the
sub-agent's lane. Then the session list's "Step through" brings the same view to the front.

`SESSION_SCRIPT` and `MESSAGE` make the session stepped through; point them at an example of
examples/ (its script and first message) to step through that instead.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from .conftest import LabServer, save_screenshot
from .test_agent_tree import _ask_in_a_new_notebook
from .test_chat_panel import (
    KERNEL_IDLE_TIMEOUT,
    TURN_TIMEOUT_MS,
    UI_TIMEOUT_MS,
    _open_notebook,
    _wait_for_idle_kernel,
)
from .test_pairing_keyboard import _focus_notebook_in_command_mode, _palette

pytestmark = pytest.mark.browser

NOTEBOOK = "teach.ipynb"
MESSAGE = "Fan out to alpha."
SPAWN_AND_FLOOD = 'a = await rlm("alpha words", name="alpha")\nprint("x" * 50_000)\nprint("end")'
WAIT_FOR_ALPHA = (
    "import asyncio, time\n"
    "deadline = time.time() + 60\n"
    "while time.time() < deadline:\n"
    "    subs = await rlm.list_subagents()\n"
    "    if subs and all(s.status in ('completed', 'replied', 'error') for s in subs):\n"
    "        break\n"
    "    await asyncio.sleep(0.05)\n"
    "print(sorted((s.name, s.status) for s in subs))"
)
SESSION_SCRIPT = {
    "turns": [
        {"text": "Spawning **alpha**.", "code": SPAWN_AND_FLOOD},
        {"text": "Waiting for it.", "code": WAIT_FOR_ALPHA},
        {"text": "children: {last_output_line}"},
    ],
    "child": {
        "turns": [
            {"text": "Shouting it.", "code": 'found = "{task}".upper()\nprint(found)'},
            {"text": "did {task}"},
        ]
    },
}
PALETTE_LABEL = "Step through a Prime Agent session…"


@pytest.fixture(scope="module")
def lab_script() -> dict[str, Any]:
    return SESSION_SCRIPT


def test_step_through_a_session_with_a_sub_agent_and_a_cut_observation(
    lab_server: LabServer, page: Any
) -> None:
    from playwright.sync_api import expect

    panel = _ask_in_a_new_notebook(page, lab_server, NOTEBOOK, MESSAGE)
    expect(panel.get_by_test_id("pal-assistant").last).to_have_text(
        "children: [('alpha', 'completed')]", timeout=TURN_TIMEOUT_MS
    )

    # The palette asks which session of the notebook; there is one.
    _focus_notebook_in_command_mode(page)
    _palette(page, PALETTE_LABEL)
    dialog = page.locator(".jp-Dialog")
    expect(dialog.locator("select")).to_contain_text(MESSAGE, timeout=UI_TIMEOUT_MS)
    dialog.locator(".jp-Dialog-button.jp-mod-accept").click()

    view = page.get_by_test_id("pal-step-through")
    expect(view).to_be_visible(timeout=UI_TIMEOUT_MS)
    expect(page.locator(".jp-NotebookPanel").first).to_be_visible()  # beside the notebook
    counter = view.get_by_test_id("pal-step-counter")
    expect(counter).to_have_text("Step 1 of 3", timeout=UI_TIMEOUT_MS)
    main = view.get_by_test_id("pal-step-main")
    expect(main.get_by_test_id("pal-step-user")).to_contain_text(MESSAGE)
    expect(main.get_by_test_id("pal-step-text")).to_contain_text("Spawning alpha.")
    expect(main.get_by_test_id("pal-step-text").locator("strong")).to_have_text("alpha")
    expect(main.get_by_test_id("pal-step-code")).to_contain_text('rlm("alpha words"')
    cut = main.get_by_test_id("pal-step-cut")
    expect(cut).to_have_count(1)
    expect(cut).to_contain_text("characters cut here")
    expect(cut).to_be_visible()

    # The sub-agent's lane: its own steps, its own Previous / Next.
    lane = view.get_by_test_id("pal-step-lane")
    expect(lane).to_have_count(1)
    expect(lane.get_by_test_id("pal-step-lane-name")).to_have_text("alpha")
    expect(lane.get_by_test_id("pal-step-lane-counter")).to_have_text(
        "Step 1 of 2", timeout=UI_TIMEOUT_MS
    )
    expect(lane.get_by_test_id("pal-step-observation")).to_contain_text("ALPHA WORDS")
    save_screenshot(page, "step_through.png")
    lane.get_by_test_id("pal-step-lane-next").click()
    expect(lane.get_by_test_id("pal-step-lane-counter")).to_have_text("Step 2 of 2")
    expect(lane.get_by_test_id("pal-step-text")).to_contain_text("did alpha words")
    expect(counter).to_have_text("Step 1 of 3")  # the session's own step stays

    # Forward and back with the buttons and with the arrow keys.
    previous = view.get_by_test_id("pal-step-previous")
    expect(previous).to_be_disabled()
    view.get_by_test_id("pal-step-next").click()
    expect(counter).to_have_text("Step 2 of 3")
    expect(view.get_by_test_id("pal-step-lane")).to_have_count(0)
    expect(main.get_by_test_id("pal-step-cut")).to_have_count(0)
    view.focus()
    page.keyboard.press("ArrowRight")
    expect(counter).to_have_text("Step 3 of 3")
    expect(main.get_by_test_id("pal-step-text")).to_contain_text("children: [('alpha', ")
    expect(main.get_by_test_id("pal-step-code")).to_have_count(0)
    expect(view.get_by_test_id("pal-step-next")).to_be_disabled()
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("ArrowLeft")
    expect(counter).to_have_text("Step 1 of 3")
    expect(lane.get_by_test_id("pal-step-lane-counter")).to_have_text("Step 2 of 2")  # kept

    # The session list's action brings the same view to the front.
    panel.get_by_test_id("pal-sessions").click()
    row = panel.get_by_test_id("pal-session-row").first
    row.get_by_test_id("pal-session-step-through").click()
    expect(page.get_by_test_id("pal-step-through")).to_have_count(1)
    expect(counter).to_have_text("Step 1 of 3")


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fan-out"


def test_step_through_the_committed_fan_out_example(lab_server: LabServer, page: Any) -> None:
    """The fan-out example as a clone brings it (its notebooks and its saved sessions): its
    step-through shows the three sub-agents' lanes at the step that spawned them."""
    from playwright.sync_api import expect

    for item in ("fan-out.ipynb", "fan-out.agents"):
        source = EXAMPLE / item
        target = lab_server.root_dir / item
        if source.is_dir():
            shutil.copytree(source, target)
        else:
            shutil.copy(source, target)
    sessions = lab_server.base / "sessions"  # the lab's sessions_dir (tests/lab_process.py)
    for session in (EXAMPLE / ".prime-agent" / "sessions").iterdir():
        shutil.copytree(session, sessions / session.name)
    prompt = json.loads((EXAMPLE / "example.json").read_text())["prompt"]

    _open_notebook(page, lab_server, "fan-out.ipynb")
    expect(page.locator(".jp-NotebookPanel")).to_be_visible(timeout=UI_TIMEOUT_MS)
    _wait_for_idle_kernel(lab_server, "fan-out.ipynb", KERNEL_IDLE_TIMEOUT)
    _focus_notebook_in_command_mode(page)
    _palette(page, PALETTE_LABEL)
    # The example's session, among any the notebook got on opening.
    dialog = page.locator(".jp-Dialog")
    example = dialog.locator("select option", has_text=prompt[:30])
    expect(example).to_have_count(1, timeout=UI_TIMEOUT_MS)
    dialog.locator("select").select_option(value=example.get_attribute("value"))
    dialog.locator(".jp-Dialog-button.jp-mod-accept").click()

    view = page.get_by_test_id("pal-step-through")
    counter = view.get_by_test_id("pal-step-counter")
    expect(counter).to_have_text("Step 1 of 4", timeout=UI_TIMEOUT_MS)
    main = view.get_by_test_id("pal-step-main")
    expect(main.get_by_test_id("pal-step-user")).to_contain_text(prompt)
    expect(main.get_by_test_id("pal-step-code")).to_contain_text("rlm(")
    lanes = view.get_by_test_id("pal-step-lane-name")
    expect(lanes).to_have_text(["part-a", "part-b", "part-c"], timeout=UI_TIMEOUT_MS)
    first_lane = view.get_by_test_id("pal-step-lane").first
    expect(first_lane.get_by_test_id("pal-step-lane-counter")).to_contain_text("Step 1 of")
    save_screenshot(page, "step_through_fan_out_example.png")
    for step in (2, 3, 4):
        view.get_by_test_id("pal-step-next").click()
        expect(counter).to_have_text(f"Step {step} of 4")
    expect(main.get_by_test_id("pal-step-text")).to_contain_text("vowels between them")
