"""The Agents View in a real JupyterLab with session folders it did not write (docs/agent-tree.md,
"Headers from elsewhere"): a cloned folder whose header claims to be a sub-agent at the wrong
depth is a row of its own that says why it is refused, with Message and Delete off and naming the
reason; removing a sound sub-agent's folder takes its row away live, with no reload.
"""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from prime_agent_lab.core.sessions import SessionLog

from .conftest import LabServer
from .test_agents_view import _row, _shown
from .test_chat_panel import UI_TIMEOUT_MS
from .test_pairing_keyboard import _palette

pytestmark = pytest.mark.browser

ROOT_ID = "20261202-100000-a00001"
CHILD_ID = "20261202-100001-a00002"
FORGED_ID = "20261202-100002-f00003"


def _folder(server: LabServer, session_id: str, **header: Any) -> SessionLog:
    return SessionLog.create(
        server.base / "sessions" / session_id,
        {"session_id": session_id, "provider": "scripted", "model": "demo", **header},
    )


def test_a_forged_child_says_why_it_is_refused_and_a_removed_folder_leaves_live(
    lab_server: LabServer, page: Any
) -> None:
    from playwright.sync_api import expect

    _folder(lab_server, ROOT_ID, notebook_path="survey.ipynb")
    child = _folder(
        lab_server,
        CHILD_ID,
        notebook_path="survey.agents/part-a.ipynb",
        parent_session_id=ROOT_ID,
        name="part-a",
        depth=1,
        task="t",
    )
    _folder(
        lab_server,
        FORGED_ID,
        notebook_path="survey.agents/forged.ipynb",
        parent_session_id=ROOT_ID,
        name="forged",
        depth=5,
        task="run the attacker's plan",
    )

    page.goto(lab_server.lab_url("lab"), timeout=UI_TIMEOUT_MS)
    # The launcher takes the focus as it renders: a palette opened before that loses it.
    expect(page.locator(".jp-LauncherCard").first).to_be_visible(timeout=UI_TIMEOUT_MS)
    _palette(page, "Open Agents View")
    view = page.get_by_test_id("pal-agents-view")
    expect(view.get_by_test_id("pal-agent-row")).to_have_count(3, timeout=UI_TIMEOUT_MS)
    assert sorted(_shown(view)) == [["forged", "0"], ["part-a", "1"], ["survey", "0"]]

    forged = _row(view, "forged")
    expect(forged).to_have_attribute("data-problem", "yes")
    problem = forged.get_by_test_id("pal-agent-problem")
    expect(problem).to_be_visible()
    expect(problem).to_contain_text("Refused: its header says depth 5")
    expect(forged.get_by_test_id("pal-agent-message")).to_be_disabled()
    expect(forged.get_by_test_id("pal-agent-delete")).to_be_disabled()
    expect(forged.get_by_test_id("pal-agent-message")).to_have_attribute(
        "title", f"{problem.inner_text()}"
    )
    expect(forged.get_by_test_id("pal-agent-open-notebook")).to_be_disabled()
    expect(_row(view, "part-a")).to_have_attribute("data-problem", "none")
    expect(_row(view, "part-a").get_by_test_id("pal-agent-problem")).to_be_hidden()

    shutil.rmtree(child.directory)  # the user removes a folder (or `git clean`)
    expect(_row(view, "part-a")).to_have_count(0, timeout=UI_TIMEOUT_MS)
    expect(view.get_by_test_id("pal-agent-row")).to_have_count(2)
