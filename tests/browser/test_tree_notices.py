"""The chat shows a sub-agent's notice once and a message without the header line written for the
model, live and after a reload (second cold review, issue 7).

One child replies to its parent; the other finishes without replying, so its parent gets the
"completed" notice. Each child's first cell waits for a file the test writes (no timing
assumptions). Every page error or console error fails the test (`new_page`).
"""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import LabServer
from .test_agent_tree import (
    _ask_in_a_new_notebook,
    _release,
    _settled,
    _show_tab,
    _wait_for_files,
)
from .test_chat_panel import (
    TURN_TIMEOUT_MS,
    _open_panel,
)

pytestmark = pytest.mark.browser

PARENT = "notices.ipynb"
SPAWN = 'a = await rlm("talk", name="talker")\nb = await rlm("quiet", name="silent")'
CHILD_CELL = (
    "import asyncio, os\n"
    "while not os.path.exists('{task}.go'):\n"
    "    await asyncio.sleep(0.05)\n"
    "if '{task}' == 'talk':\n"
    "    await agent_message.send('hello parent', receiver_role='parent')"
)
SCRIPT = {
    "turns": [
        {"text": "Two sub-agents.", "code": SPAWN},
        {"text": "Both are working."},
        {"text": "Noted one."},
        {"text": "Noted two."},
    ],
    "child": {"turns": [{"code": CHILD_CELL}, {"text": "finished {task}"}]},
}
MODEL_HEADERS = ("[message from", "[task from parent]", "[notice]")


@pytest.fixture(scope="module")
def lab_script() -> dict[str, Any]:
    return SCRIPT


def _bubble_texts(snapshot: list[list[str]]) -> list[str]:
    return [text for kind, *_, text in snapshot if kind in ("pal-user", "pal-agent-message")]


def _notices(snapshot: list[list[str]]) -> list[str]:
    return [text for kind, *_, text in snapshot if kind == "pal-notice"]


def _assert_clean(snapshot: list[list[str]]) -> None:
    for text in _bubble_texts(snapshot):
        assert not any(header in text for header in MODEL_HEADERS), snapshot
    silent = [text for text in _notices(snapshot) if "silent" in text]
    assert len(silent) == 1, snapshot


def test_a_sub_agents_notice_shows_once_and_bubbles_have_no_model_header_live_and_reloaded(
    lab_server: LabServer, page: Any
) -> None:
    from playwright.sync_api import expect

    panel = _ask_in_a_new_notebook(page, lab_server, PARENT, "Split the work.")
    children = panel.get_by_test_id("pal-child")
    expect(children).to_have_count(2, timeout=TURN_TIMEOUT_MS)
    _wait_for_files(lab_server, [f"notices.agents/{n}.ipynb" for n in ("talker", "silent")], 30)
    _release(lab_server, "talk")
    expect(children.nth(0)).to_have_attribute("data-status", "replied", timeout=TURN_TIMEOUT_MS)
    _release(lab_server, "quiet")
    expect(children.nth(1)).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT_MS)
    expect(panel.get_by_test_id("pal-assistant").last).to_have_text(
        "Noted two.", timeout=TURN_TIMEOUT_MS
    )
    live = _settled(panel, lab_server, PARENT)
    _assert_clean(live)
    reply = panel.get_by_test_id("pal-agent-message")
    expect(reply).to_have_count(1)
    expect(reply.first).to_contain_text("hello parent")

    page.reload()
    panel = _open_panel(page)
    _show_tab(page, PARENT)
    reloaded = _settled(panel, lab_server, PARENT)
    assert reloaded == live, "\n".join(map(repr, ["LIVE", *live, "RELOADED", *reloaded]))

    # The child's own chat: its task bubble shows the task without the model's header line.
    children = panel.get_by_test_id("pal-child")
    children.nth(0).get_by_test_id("pal-child-link").click()
    child = _settled(panel, lab_server, "notices.agents/talker.ipynb")
    bubbles = _bubble_texts(child)
    assert bubbles and "talk" in bubbles[0], child
    assert not any(header in text for text in bubbles for header in MODEL_HEADERS), child
