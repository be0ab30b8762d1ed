"""A busy kernel never stalls the tab: the user opens a sub-agent's notebook while its 30 s cell
runs, and another file at the same moment; both are ready within 3 s, the child's notebook with
its live output, and the chat follows the child.

Before the fix, jupyter_server held the kernel websocket's upgrade until the kernel answered
`kernel_info`, which it does only after the cell, and Chromium queued every other websocket of
the tab (the other document's, the chat's events) behind that handshake.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from .conftest import LabServer
from .test_agent_tree import _ask_in_a_new_notebook, _wait_for_files
from .test_chat_panel import TURN_TIMEOUT_MS, UI_TIMEOUT_MS

pytestmark = pytest.mark.browser

PARENT = "analysis.ipynb"
CHILD = "analysis.agents/slow.ipynb"
OTHER = "notes.md"
OTHER_TEXT = "Questions for the data team"
CELL_SECONDS = 30
READY_WITHIN_MS = 3_000
SLOW_CELL = (
    "import time\n"
    f"for i in range({CELL_SECONDS * 4}):\n"
    "    print(f'tick {i}', flush=True)\n"
    "    time.sleep(0.25)\n"
)
SCRIPT = {
    "turns": [
        {
            "text": "A sub-agent takes the slow part.",
            "code": 'child = await rlm("slow", name="slow")',
        },
        {"text": "It is working."},
    ],
    "child": {"turns": [{"text": "This takes a while.", "code": SLOW_CELL}, {"text": "Done."}]},
}


@pytest.fixture(scope="module")
def lab_script() -> dict[str, Any]:
    return SCRIPT


def _wait_until_busy(server: LabServer, path: str, timeout: float) -> None:
    """Until the kernel of `path`'s Jupyter session runs a cell (the child's slow one)."""
    deadline = time.monotonic() + timeout
    while True:
        for session in server.api("GET", "api/sessions"):
            kernel = session.get("kernel") or {}
            if session.get("path") == path and kernel.get("execution_state") == "busy":
                return
        assert time.monotonic() < deadline, f"the kernel of {path} never got busy"
        time.sleep(0.1)


def _wait_for_a_websocket(server: LabServer, path: str, timeout: float) -> None:
    """Until a websocket is connected to the kernel of `path` (the tab's)."""
    deadline = time.monotonic() + timeout
    while True:
        for session in server.api("GET", "api/sessions"):
            kernel = session.get("kernel") or {}
            if session.get("path") == path and kernel.get("connections", 0) > 0:
                return
        if time.monotonic() > deadline:
            raise AssertionError(f"no websocket to the kernel of {path} within {timeout:.1f} s")
        time.sleep(0.05)


def _ticks(cell: Any) -> int:
    """How many lines of output the running cell shows."""
    return cell.locator(".jp-OutputArea-output").inner_text().count("tick")


def test_a_notebook_whose_agent_cell_runs_and_another_file_open_within_three_seconds(
    lab_server: LabServer, page: Any
) -> None:
    from playwright.sync_api import expect

    (lab_server.root_dir / OTHER).write_text(f"# {OTHER_TEXT}\n")
    panel = _ask_in_a_new_notebook(page, lab_server, PARENT, "Hand the slow part to a sub-agent.")
    child_line = panel.get_by_test_id("pal-child")
    expect(child_line).to_have_attribute("data-status", "running", timeout=TURN_TIMEOUT_MS)
    _wait_for_files(lab_server, [CHILD], 30)
    _wait_until_busy(lab_server, CHILD, 30)

    def ready(since: float, what: str, check: Any) -> float:
        """Seconds from `since` until `check(ms left)` passes; fails past READY_WITHIN_MS."""
        left = max(READY_WITHIN_MS - (time.monotonic() - since) * 1000, 1)
        try:
            check(left)
        except AssertionError as exc:
            took = time.monotonic() - since
            raise AssertionError(f"{what} not ready {took:.1f} s after opening: {exc}") from None
        return time.monotonic() - since

    child = page.locator(".jp-NotebookPanel").filter(
        has=page.locator(f'a[href*="/files/{PARENT}?"]')
    )
    cell = child.locator(".jp-CodeCell.pal-agent-cell").first
    status = panel.get_by_test_id("pal-status")
    editor = page.locator(".jp-FileEditor")

    # The user opens the child from the chat: its running cell's output shows.
    opened = time.monotonic()
    child_line.get_by_test_id("pal-child-link").click()
    took = {
        "child notebook": ready(
            opened,
            CHILD,
            lambda ms: expect(cell.locator(".jp-OutputArea-output")).to_contain_text(
                "tick", timeout=ms
            ),
        )
    }
    # Meanwhile (its kernel connecting), another file from the file browser.
    other_opened = time.monotonic()
    page.locator(".jp-DirListing-item").filter(has_text=OTHER).dblclick()
    took["other file"] = ready(
        other_opened, OTHER, lambda ms: expect(editor).to_contain_text(OTHER_TEXT, timeout=ms)
    )
    took["chat"] = ready(
        opened,
        "the chat",
        lambda ms: (
            expect(panel.get_by_test_id("pal-notebook-path")).to_have_text(CHILD, timeout=ms),
            expect(status).to_have_attribute("data-connection", "connected", timeout=ms),
        ),
    )
    took["kernel"] = ready(
        opened,
        "the child's kernel websocket",
        lambda ms: _wait_for_a_websocket(lab_server, CHILD, ms / 1000),
    )
    print("ready after (s):", {k: round(v, 2) for k, v in took.items()})

    # The output is live: more lines arrive while the cell runs.
    seen = _ticks(cell)
    deadline = time.monotonic() + UI_TIMEOUT_MS / 1000
    while _ticks(cell) <= seen:
        assert time.monotonic() < deadline, "the running cell's output stopped"
        time.sleep(0.1)
    expect(status).to_have_attribute("data-status", "running")
