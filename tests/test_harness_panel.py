"""The live harness panel (`prime_agent_kernel.harness_panel`, docs/harness.md "The panel").

The first tests drive the widget against a small in-process stand-in for the host's
`harness.wait_for_change` long poll; the kernel test below builds it in a real kernel against the
real host.
"""

from __future__ import annotations

import copy
import queue
import threading
import time
from pathlib import Path
from typing import Any

import ipywidgets as widgets
import pytest
from prime_agent_kernel.harness_panel import HarnessPanel, build_panel, edit_diff
from prime_agent_kernel.operations import (
    DELETE_ENTRY,
    DELETE_ENTRY_BY_REFINEMENT,
    ROLLBACK_REFINEMENT,
    WAIT_FOR_HARNESS_CHANGE,
)

from prime_agent_lab.core.harness.store import HarnessStore

from .test_harness_crud import attached, kernel


def entry(kind: str, id_: str, title: str, content: str, version: int = 1, **extra: Any) -> dict:
    return {
        "id": id_,
        "kind": kind,
        "title": title,
        "content": content,
        "path": "general",
        "scope": extra.pop("scope", "local"),
        "reference": None,
        "arguments": None,
        "metadata": {},
        "source": "agent",
        "created_at": "2026-11-30T10:00:00+00:00",
        "updated_at": f"2026-11-30T10:0{version}:00+00:00",
        "version": version,
        **extra,
    }


REFINEMENT = {
    "id": "r1",
    "trigger": "user",
    "scope": "local",
    "instructions": "promote the retry pattern",
    "summary": "Retry flaky tests",
    "rationale": "three failures in a row were flaky",
    "expected_outcome": "fewer reruns",
    "harness_version": {"local": 3, "global": 0},
    "created_at": "2026-11-30T11:00:00+00:00",
    "rollback_of": None,
    "edits": [
        {
            "action": "update",
            "kind": "memory",
            "id": "flaky_test",
            "applied": True,
            "error": None,
            "before": entry("memory", "flaky_test", "flaky test", "retry three times"),
            "after": entry("memory", "flaky_test", "flaky test", "retry five times", 2),
        },
        {
            "action": "update",
            "kind": "prompt",
            "id": "base_system_prompt",
            "applied": False,
            "error": "the base system prompt is not editable",
            "before": None,
            "after": None,
        },
    ],
}


class FakeHost:
    """The host's answer to `WAIT_FOR_HARNESS_CHANGE`: at once when the caller's stamp is old,
    else when the state changes or the timeout passes. Records every other call."""

    def __init__(self, state: dict[str, Any]) -> None:
        self._state = state
        self._stamp = 1
        self._changed = threading.Condition()
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.answers: dict[str, Any] = {}
        self.unknown: set[str] = set()

    def set_state(self, state: dict[str, Any]) -> None:
        with self._changed:
            self._state = state
            self._stamp += 1
            self._changed.notify_all()

    def call(self, op: str, payload: dict[str, Any]) -> Any:
        if op in self.unknown:
            raise RuntimeError(f"host refused the call (404): unknown bridge operation {op}")
        if op != WAIT_FOR_HARNESS_CHANGE:
            self.calls.append((op, payload))
            answer = self.answers.get(op, {"note": "applied"})
            if isinstance(answer, Exception):
                raise answer
            return answer
        with self._changed:
            self._changed.wait_for(lambda: payload["stamp"] != self._stamp, payload["timeout"])
            changed = payload["stamp"] != self._stamp
            # flat, as the host sends it: the state's fields beside `changed`
            return {**copy.deepcopy(self._state), "stamp": self._stamp, "changed": changed}


def state(entries: list[dict], refinements: list[dict] | None = None, local: int = 1) -> dict:
    return {
        "version": {"local": local, "global": 0},
        "entries": entries,
        "refinements": refinements or [],
        "problems": [],
    }


def tab_html(panel: HarnessPanel, index: int) -> str:
    """All the HTML text shown in one tab."""
    texts: list[str] = []

    def walk(widget: widgets.Widget) -> None:
        if isinstance(widget, widgets.HTML):
            texts.append(widget.value)
        for child in getattr(widget, "children", ()):
            walk(child)

    walk(panel._tabs.children[index])
    return "\n".join(texts)


def buttons(panel: HarnessPanel, index: int, description: str) -> list[widgets.Button]:
    found: list[widgets.Button] = []

    def walk(widget: widgets.Widget) -> None:
        if isinstance(widget, widgets.Button) and widget.description == description:
            found.append(widget)
        for child in getattr(widget, "children", ()):
            walk(child)

    walk(panel._tabs.children[index])
    return found


@pytest.fixture
def fake_panel() -> Any:
    host = FakeHost(state([entry("memory", "flaky_test", "flaky test", "retry three times")]))
    panel = build_panel(host.call, watch_timeout=5)
    assert panel.wait_for_render(1, timeout=10)
    yield host, panel
    panel.close()


def test_panel_lists_entries_by_kind_with_version_scope_and_time(fake_panel: Any) -> None:
    _, panel = fake_panel
    memories = tab_html(panel, 1)
    assert "flaky test" in memories and "retry three times" in memories
    assert 'data-version="1"' in memories and 'data-scope="local"' in memories
    assert "2026-11-30 10:01 UTC" in memories
    assert panel._tabs.titles == (
        "Prompt notes (0)",
        "Memories (1)",
        "Skills (0)",
        "Sub-agents (0)",
        "History (0)",
    )


def test_panel_follows_a_change_made_by_another_writer(fake_panel: Any) -> None:
    host, panel = fake_panel
    old_row = panel._tabs.children[1].children[0]
    skill = entry(
        "skill",
        "fit_curve",
        "fit curve",
        "Fit a polynomial.",
        reference={"type": "python", "import": "fit_tools", "callable": "fit"},
        arguments={"x": "list[float]", "y": "list[float]"},
        scope="global",
    )
    host.set_state(
        state([entry("memory", "flaky_test", "flaky test", "retry five times", 2), skill], local=2)
    )
    assert panel.wait_for_render(2, timeout=10)
    memories = tab_html(panel, 1)
    assert "retry five times" in memories and 'data-version="2"' in memories
    assert "retry three times" not in memories
    assert old_row.comm is None, "the replaced row's widgets are closed"
    skills = tab_html(panel, 2)
    assert "fit_tools.fit(x, y)" in skills and 'data-scope="global"' in skills
    assert 'data-local="2"' in panel._header.value


def test_history_shows_each_edit_with_its_diff_and_rejection(fake_panel: Any) -> None:
    host, panel = fake_panel
    host.set_state(state([], [REFINEMENT], local=3))
    assert panel.wait_for_render(2, timeout=10)
    history = tab_html(panel, 4)
    for text in (
        "Retry flaky tests",
        "trigger user",
        "three failures in a row were flaky",
        "fewer reruns",
        "produced version local 3 · global 0",
        "1 applied, 1 rejected",
        "rejected: the base system prompt is not editable",
        "-content: retry three times",
        "+content: retry five times",
    ):
        assert text in history, text
    assert panel._tabs.titles[4] == "History (1)"


def test_rollback_button_asks_the_host_and_shows_its_answer(fake_panel: Any) -> None:
    host, panel = fake_panel
    host.answers[ROLLBACK_REFINEMENT] = {"note": "queued: applies at the next turn boundary"}
    host.set_state(state([], [REFINEMENT]))
    assert panel.wait_for_render(2, timeout=10)
    [rollback] = buttons(panel, 4, "Rollback")
    rollback.click()
    assert panel.wait_for_answer("queued: applies at the next turn boundary", timeout=10)
    assert host.calls == [(ROLLBACK_REFINEMENT, {"id": "r1"})]
    assert "Rollback of r1" in panel.last_answer


def rollback_record(id_: str, of: str, applied: bool, error: str | None = None) -> dict:
    edit = {**REFINEMENT["edits"][0], "applied": applied, "error": error}
    return {**REFINEMENT, "id": id_, "trigger": "rollback", "rollback_of": of, "edits": [edit]}


def test_a_queued_rollback_says_applied_once_the_host_recorded_it(fake_panel: Any) -> None:
    host, panel = fake_panel
    host.answers[ROLLBACK_REFINEMENT] = {
        "queued": True,
        "note": "queued: applies at the next turn boundary",
    }
    host.set_state(state([], [REFINEMENT]))
    assert panel.wait_for_render(2, timeout=10)
    [rollback] = buttons(panel, 4, "Rollback")
    rollback.click()
    assert panel.wait_for_answer("queued", timeout=10)
    host.set_state(state([], [REFINEMENT, rollback_record("r2", "r1", applied=True)]))
    assert panel.wait_for_answer("Rollback of r1: applied (r2)", timeout=10)
    assert "queued" not in panel._answer.value and 'data-tone="info"' in panel._answer.value


def test_a_queued_rollback_the_host_rejected_says_why(fake_panel: Any) -> None:
    host, panel = fake_panel
    host.answers[ROLLBACK_REFINEMENT] = {"note": "queued: applies at the next turn boundary"}
    host.set_state(state([], [REFINEMENT]))
    assert panel.wait_for_render(2, timeout=10)
    buttons(panel, 4, "Rollback")[0].click()
    assert panel.wait_for_answer("queued", timeout=10)
    why = "entry changed since refinement r1 was applied; not rolled back"
    host.set_state(state([], [REFINEMENT, rollback_record("r2", "r1", False, why)]))
    assert panel.wait_for_answer(f"Rollback of r1: rejected: {why}", timeout=10)
    assert 'data-tone="error"' in panel._answer.value


def test_a_queued_delete_says_applied_once_the_host_recorded_it(fake_panel: Any) -> None:
    host, panel = fake_panel
    host.answers[DELETE_ENTRY_BY_REFINEMENT] = {"note": "queued: applies at the next turn boundary"}
    [delete] = buttons(panel, 1, "Delete")
    delete.click()
    delete.click()
    assert panel.wait_for_answer("queued", timeout=10)
    # An unrelated refinement recorded meanwhile does not settle it.
    host.set_state(state([], [REFINEMENT]))
    assert panel.wait_for_render(2, timeout=10)
    assert "queued" in panel.last_answer
    edit = {"action": "delete", "kind": "memory", "id": "flaky_test", "applied": True}
    removal = {**REFINEMENT, "id": "r3", "trigger": "delete", "edits": [edit]}
    host.set_state(state([], [REFINEMENT, removal]))
    assert panel.wait_for_answer("Delete memory flaky_test: applied (r3)", timeout=10)


def test_delete_asks_first_then_asks_the_host_to_delete_at_the_turn_boundary(
    fake_panel: Any,
) -> None:
    host, panel = fake_panel
    host.answers[DELETE_ENTRY_BY_REFINEMENT] = {"note": "queued: applies at the next turn boundary"}
    [delete] = buttons(panel, 1, "Delete")
    delete.click()
    assert host.calls == [] and delete.description == "Confirm delete"
    delete.click()
    assert panel.wait_for_answer("queued: applies at the next turn boundary", timeout=10)
    payload = {"kind": "memory", "id": "flaky_test", "global": False}
    assert host.calls == [(DELETE_ENTRY_BY_REFINEMENT, payload)]


def test_delete_on_a_host_without_refine_deletes_at_once_and_shows_errors(
    fake_panel: Any,
) -> None:
    host, panel = fake_panel
    host.unknown.add(DELETE_ENTRY_BY_REFINEMENT)
    host.answers[DELETE_ENTRY] = RuntimeError("host refused the call (404): no such entry")
    [delete] = buttons(panel, 1, "Delete")
    delete.click()
    delete.click()
    assert panel.wait_for_answer("no such entry", timeout=10)
    payload = {"kind": "memory", "id": "flaky_test", "global": False}
    assert host.calls == [(DELETE_ENTRY, payload)]
    assert 'data-tone="error"' in panel._answer.value
    # The button is given back, asking first again.
    assert not delete.disabled and delete.description == "Delete"


def test_a_refused_rollback_gives_the_button_back_to_try_again(fake_panel: Any) -> None:
    host, panel = fake_panel
    host.answers[ROLLBACK_REFINEMENT] = RuntimeError(
        "host refused the call (409): r1 changed since"
    )
    host.set_state(state([], [REFINEMENT]))
    assert panel.wait_for_render(2, timeout=10)
    [rollback] = buttons(panel, 4, "Rollback")
    rollback.click()
    assert panel.wait_for_answer("changed since", timeout=10)
    assert not rollback.disabled
    host.answers[ROLLBACK_REFINEMENT] = {"note": "queued: applies at the next turn boundary"}
    rollback.click()
    assert panel.wait_for_answer("queued", timeout=10)
    assert host.calls == [(ROLLBACK_REFINEMENT, {"id": "r1"})] * 2


def test_closing_the_panel_stops_its_watcher() -> None:
    host = FakeHost(state([]))
    panel = build_panel(host.call, watch_timeout=0.2)
    assert panel.wait_for_render(1, timeout=10)
    thread = panel._thread
    assert thread is not None and thread.is_alive()
    panel.close()
    thread.join(timeout=10)
    assert not thread.is_alive()
    host.set_state(state([entry("memory", "late", "late", "after close")]))
    assert panel.renders == 1


def test_watch_errors_show_in_the_panel_and_it_keeps_trying(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    attempts: list[int] = []
    host = FakeHost(state([entry("memory", "m", "m", "back again")]))

    def flaky(op: str, payload: dict[str, Any]) -> Any:
        if op == WAIT_FOR_HARNESS_CHANGE and not attempts:
            attempts.append(1)
            raise RuntimeError("cannot reach the Prime Agent Lab host")
        return host.call(op, payload)

    monkeypatch.setattr("prime_agent_kernel.harness_panel.RETRY_DELAY", 0.05)
    panel = HarnessPanel(flaky, watch_timeout=5)
    panel.start()
    assert panel.wait_for_answer("Cannot follow the harness", timeout=10)
    assert panel.wait_for_render(1, timeout=10)
    assert "back again" in tab_html(panel, 1)
    panel.close()


def test_edit_diff_covers_create_update_and_delete() -> None:
    before = entry("memory", "m", "m", "line one\nline two")
    after = entry("memory", "m", "m", "line one\nline 2", 2, metadata={"why": "typo"})
    diff = edit_diff(before, after)
    assert "-    line two" in diff and "+    line 2" in diff
    assert '+metadata: {"why": "typo"}' in diff
    assert edit_diff(None, after)[0] == "--- (none)"
    assert edit_diff(before, None)[1] == "+++ (deleted)"


def test_edit_diff_shows_a_change_of_argument_order() -> None:
    """A skill's arguments are its call's parameters in order: reordering them is an edit."""
    before = entry("skill", "fit", "fit", "c", arguments={"x": "list", "degree": "int"})
    after = entry("skill", "fit", "fit", "c", 2, arguments={"degree": "int", "x": "list"})
    diff = edit_diff(before, after)
    assert '-arguments: {"x": "list", "degree": "int"}' in diff
    assert '+arguments: {"degree": "int", "x": "list"}' in diff


# ---------------------------------------------------------------------- a busy kernel

STAND_IN_HOST = """
import os, threading, time
from prime_agent_kernel.harness_panel import build_panel
from prime_agent_kernel.operations import WAIT_FOR_HARNESS_CHANGE

def stand_in_call(op, payload, answers=[0]):
    # harness.wait_for_change: a first state at once, a second once the test releases it, then quiet
    if op != WAIT_FOR_HARNESS_CHANGE:
        return {"note": "applied"}
    answers[0] += 1
    if answers[0] == 2:
        while not os.path.exists(RELEASE):
            time.sleep(0.02)
    elif answers[0] > 2:
        threading.Event().wait(payload["timeout"])
    entry = {"id": f"m{answers[0]}", "kind": "memory", "title": "t", "content": "c",
             "scope": "local", "version": 1}
    state = {"version": {"local": answers[0], "global": 0}, "entries": [entry],
             "refinements": [], "problems": []}
    return {"stamp": answers[0], "changed": True, "state": state}

panel = build_panel(stand_in_call, watch_timeout=60)
assert panel.wait_for_render(1, timeout=30)
"""


class KernelWire:
    """A blocking client on a real ipykernel 7 kernel, speaking to its subshells."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def control(self, msg_type: str, content: dict[str, Any]) -> dict[str, Any]:
        msg = self.client.session.msg(msg_type, content)
        self.client.control_channel.send(msg)
        while True:
            reply = self.client.get_control_msg(timeout=30)
            if reply["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
                return dict(reply["content"])

    def shell(self, msg_type: str, content: dict[str, Any], subshell: str | None = None) -> str:
        msg = self.client.session.msg(msg_type, content)
        if subshell:
            msg["header"]["subshell_id"] = subshell
        self.client.shell_channel.send(msg)
        return str(msg["header"]["msg_id"])

    def iopub_until(self, done: Any, timeout: float = 30.0) -> dict[str, Any]:
        """Read IOPub until `done(msg)`; fails on an error output or the deadline."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            assert remaining > 0, "the kernel did not send the awaited message in time"
            try:
                msg = self.client.get_iopub_msg(timeout=remaining)
            except queue.Empty:
                continue
            assert msg["header"]["msg_type"] != "error", msg["content"]
            if done(msg):
                return dict(msg)


@pytest.fixture
def kernel_wire() -> Any:
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel()
    try:
        yield KernelWire(client)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def _idle_after(msg_id: str) -> Any:
    return lambda msg: (
        msg["header"]["msg_type"] == "status"
        and msg["parent_header"].get("msg_id") == msg_id
        and msg["content"]["execution_state"] == "idle"
    )


def _delete_button_opened(msg: dict[str, Any]) -> bool:
    state = msg["content"].get("data", {}).get("state", {})
    return msg["header"]["msg_type"] == "comm_open" and state.get("description") == "Delete"


def _row_holding(comm_id: str) -> Any:
    def opened(msg: dict[str, Any]) -> bool:
        state = msg["content"].get("data", {}).get("state", {})
        children = state.get("children") or []
        return msg["header"]["msg_type"] == "comm_open" and f"IPY_MODEL_{comm_id}" in children

    return opened


def test_a_panel_built_in_a_subshell_answers_clicks_while_the_main_shell_runs_a_cell(
    kernel_wire: KernelWire, tmp_path: Any
) -> None:
    """The Harness console's panel: built in a subshell, re-rendered by its watcher while the
    agent's cell runs, and a click on a row drawn then is handled before that cell ends."""
    release, cell_may_end = tmp_path / "release", tmp_path / "cell-may-end"
    subshell = kernel_wire.control("create_subshell_request", {})["subshell_id"]
    setup = f"RELEASE = {str(release)!r}\n{STAND_IN_HOST}"
    built = kernel_wire.shell("execute_request", {"code": setup, "silent": False}, subshell)
    kernel_wire.iopub_until(_idle_after(built), timeout=60)

    busy_cell = (
        f"import os, time\nwhile not os.path.exists({str(cell_may_end)!r}):\n    time.sleep(0.02)\n"
    )
    agent_cell = kernel_wire.shell("execute_request", {"code": busy_cell, "silent": False})
    kernel_wire.iopub_until(
        lambda msg: (
            msg["header"]["msg_type"] == "execute_input"
            and msg["parent_header"].get("msg_id") == agent_cell
        )
    )
    release.touch()  # the watcher re-renders now, while the main shell is busy
    button = kernel_wire.iopub_until(_delete_button_opened)["content"]["comm_id"]
    # A browser can click the button only once a row holds it, and the panel makes the row after
    # it has set the button's click handler: a click sent on the button's comm_open alone could
    # arrive before its handler (CI saw such a click go unanswered).
    kernel_wire.iopub_until(_row_holding(button))

    click = {"comm_id": button, "data": {"method": "custom", "content": {"event": "click"}}}
    kernel_wire.shell("comm_msg", click)
    seen_cell_end: list[bool] = []

    def answered(msg: dict[str, Any]) -> bool:
        if _idle_after(agent_cell)(msg):
            seen_cell_end.append(True)
        state = msg["content"].get("data", {}).get("state") or {}
        return (
            msg["header"]["msg_type"] == "comm_msg"
            and msg["content"].get("comm_id") == button
            and state.get("description") == "Confirm delete"
        )

    seen: list[str] = []

    def answered_noting(msg: dict[str, Any]) -> bool:
        about = msg["parent_header"].get("msg_type", "-")
        seen.append(f"{msg['header']['msg_type']}<-{about}")
        return answered(msg)

    try:
        kernel_wire.iopub_until(answered_noting, timeout=30)
    except AssertionError:
        # Say where the click went (the main shell answers it once its cell ends), then fail.
        cell_may_end.touch()
        try:
            kernel_wire.iopub_until(answered_noting, timeout=30)
            where = "the click was handled only after the agent's cell ended"
        except AssertionError:
            where = "the click was never handled"
        raise AssertionError(f"{where}; IOPub after the click: {seen[-40:]}") from None
    assert not seen_cell_end, "the click was handled only after the agent's cell"
    cell_may_end.touch()
    kernel_wire.iopub_until(_idle_after(agent_cell))


# ---------------------------------------------------------------------- the real host

PANEL_IN_KERNEL = """
from prime_agent_kernel.harness_panel import HarnessPanel
import ipywidgets as widgets

def html_values(widget):
    found = [widget.value] if isinstance(widget, widgets.HTML) else []
    for child in getattr(widget, "children", ()):
        found.extend(html_values(child))
    return found

def texts(widget):
    return "\\n".join(html_values(widget))

panel = rlm.harness.panel()
assert isinstance(panel, HarnessPanel) and panel.watching
assert panel.wait_for_render(1, timeout=30)
print("FIRST", panel._tabs.titles[1], "flaky test" in texts(panel._tabs.children[1]))
"""


async def test_a_panel_in_the_kernel_follows_another_writer_and_deletes_through_the_host(
    tmp_path: Path,
) -> None:
    async with attached(tmp_path) as run:
        out = await kernel(run.agent, PANEL_IN_KERNEL)
        assert "FIRST Memories (0) False" in out
        # another writer of the same user (another server, a CLI run): it signs with the
        # user's secret, as every writer of a local store does (docs/trust.md)
        local = HarnessStore(run.agent.session.directory / "harness", "local", run.runtime.signer)
        local.create("memory", {"title": "flaky test", "content": "retry three times"}, "user")
        out = await kernel(
            run.agent,
            "assert panel.wait_for_render(2, timeout=30)\n"
            "memories = texts(panel._tabs.children[1])\n"
            "print('SECOND', panel._tabs.titles[1], 'retry three times' in memories,"
            " 'data-version=\"1\"' in memories)\n",
        )
        assert "SECOND Memories (1) True True" in out
        out = await kernel(
            run.agent,
            "[row] = panel._tabs.children[1].children\n"
            "delete = row.children[1]\n"
            "delete.click(); delete.click()\n"
            "assert panel.wait_for_answer('flaky_test: applied', timeout=30), panel.last_answer\n"
            "assert panel.wait_for_render(3, timeout=30)\n"
            "print('THIRD', panel._tabs.titles[1], panel.last_answer)\n"
            "panel.close()\n",
        )
        assert "THIRD Memories (0) Delete memory flaky_test: applied" in out
        assert local.get("memory", "flaky_test") is None
        # A write after closing wakes the watcher's long poll: it ends without rendering.
        local.create("memory", {"title": "late", "content": "after close"}, "user")
        out = await kernel(
            run.agent,
            "panel._thread.join(timeout=30); print('STOPPED', panel.watching, panel.renders)\n",
        )
        assert "STOPPED False 3" in out


def test_the_harness_view_waits_for_the_host_to_attach_the_kernel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import prime_agent_kernel
    from prime_agent_kernel.harness_panel import harness_view

    monkeypatch.setattr(prime_agent_kernel, "_client", None)
    with pytest.raises(prime_agent_kernel.BridgeError, match="not attached"):
        harness_view(timeout=0.3)

    host = FakeHost(state([entry("memory", "m", "m", "attached now")]))
    polls: list[int] = []

    class Client:
        call = staticmethod(host.call)

    def client() -> Any:
        polls.append(1)
        if len(polls) < 3:  # the host attaches the kernel a moment after the view opened
            raise prime_agent_kernel.BridgeError("this kernel is not attached yet")
        return Client()

    monkeypatch.setattr(prime_agent_kernel, "client", client)
    panel = harness_view(timeout=30)
    try:
        assert panel.wait_for_render(1, timeout=10)
        assert len(polls) == 3 and "attached now" in tab_html(panel, 1)
    finally:
        panel.close()


def test_closing_a_harness_view_stops_its_panel(monkeypatch: pytest.MonkeyPatch) -> None:
    import prime_agent_kernel
    from prime_agent_kernel.harness_panel import close_view, harness_view

    host = FakeHost(state([]))

    class Client:
        call = staticmethod(host.call)

    monkeypatch.setattr(prime_agent_kernel, "client", lambda: Client())
    first = harness_view(view_id="view-1")
    again = harness_view(view_id="view-1")  # the same view re-run: the old panel goes
    assert first._stop.is_set() and not again._stop.is_set()
    close_view("view-1")
    assert again._stop.is_set()
    close_view("view-1")  # unknown by now: nothing happens
