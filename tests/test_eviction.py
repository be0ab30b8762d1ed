"""Idle sub-agents are evicted (snapshot, kernel gone, out of memory) and come back with their
variables when addressed; a pinned or attached one stays."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from jupyter_ydoc import YNotebook
from pycrdt import Provider
from pycrdt.websocket.websocket import HttpxWebsocket

from prime_agent_lab.core.lifecycle import sweep_interval
from prime_agent_lab.core.snapshots import RESTORED

from .conftest import run_turn, use_script, wait_for

WAIT_UNTIL_DONE = (
    "import asyncio, time\n"
    "deadline = time.time() + 60\n"
    "while time.time() < deadline:\n"
    "    subs = await rlm.list_subagents()\n"
    "    if subs and all(s.status in ('completed', 'inactive') for s in subs):\n"
    "        break\n"
    "    await asyncio.sleep(0.05)\n"
    "print('done')"
)
CHILD = {
    "turns": [
        {"code": 'found = "{task}".upper()\nprint(found)'},
        {"text": "did {task}"},
        {"code": "print(found + '!')"},
        {"text": "{last_output_line}"},
    ]
}


def tree_script(tmp_path: Path) -> str:
    path = tmp_path / "tree-script.json"
    spawn = 'a = await rlm("alpha words", name="alpha")'
    turns = [{"code": spawn}, {"code": WAIT_UNTIL_DONE}, {"text": "spawned"}]
    path.write_text(json.dumps({"turns": turns, "child": CHILD}), encoding="utf-8")
    return str(path)


def set_runtime(host: Any, **settings: Any) -> None:
    host.runtime.settings = dataclasses.replace(host.runtime.settings, **settings)


def process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def spawn_child(host: Any, make_notebook: Any, tmp_path: Path) -> tuple[Any, Any, int]:
    use_script(host, tree_script(tmp_path))
    parent = await host.attach(make_notebook("work/analysis.ipynb"))
    await run_turn(host, parent.session_id, "fan out")
    (child_id,) = host.runtime.descendants(parent.session_id)
    child = host.agents[child_id]
    kernel_id = child.kernel.kernel_id
    pid = host.serverapp.kernel_manager.get_kernel(kernel_id).provisioner.pid
    return parent, child, pid


async def test_an_idle_child_is_evicted_and_a_message_brings_it_back_with_its_variables(
    host: Any, make_notebook: Any, tmp_path: Path
) -> None:
    set_runtime(host, evict_after_minutes=0.3 / 60, snapshot_debounce=0.05)
    parent, child, pid = await spawn_child(host, make_notebook, tmp_path)

    await wait_for(lambda: child.session_id not in host.agents and process_gone(pid))

    # Evicted, it keeps how its task ended (it read "inactive" before: issue 19).
    assert host.runtime.child_status(child.session_id) == "completed"
    (listed,) = host.runtime.list_children(parent.session_id)
    assert listed["status"] == "completed"
    # Unloaded, not taken over: a tab that shows the child gets no "took over" line.
    (gone,) = [e for e in child.events.since(0) if e.get("status") == "inactive"]
    assert "taken_over_by" not in gone
    manifest = json.loads((child.session.directory / "kernel-state" / "manifest.json").read_text())
    assert [e["name"] for e in manifest["saved"]] == ["found"]

    set_runtime(host, evict_after_minutes=0)  # the test reads the child back before it idles again
    host.runtime.mailbox.send(parent, "add a bang", "child", "alpha", "auto")

    def second_turn_ended() -> Any:
        back = host.agents.get(child.session_id)
        last = back.session.last_of("turn_end") if back is not None else None
        return last if last is not None and last["turn"] == 2 else None

    ended = await wait_for(second_turn_ended, timeout=60)
    assert ended["final_text"] == "ALPHA WORDS!"
    back = host.agents[child.session_id]
    assert back is not child and back.kernel.kernel_id != child.kernel.kernel_id
    notices = [e for e in back.session.path() if e["type"] == "notice"]
    assert notices[-1]["kind"] == RESTORED and "found" in notices[-1]["text"]
    told = [m.text for m in back.session.context_messages() if m.role == "user"]
    assert any(t.startswith("[notice] Kernel variables restored") for t in told)


async def test_a_pinned_or_attached_child_is_not_evicted_until_released(
    host: Any, make_notebook: Any, tmp_path: Path
) -> None:
    lifecycle = host.runtime.lifecycle
    pinned: set[str] = set()
    release = lifecycle.add_pin(lambda session_id: session_id in pinned)
    set_runtime(host, evict_after_minutes=0, snapshot_debounce=0.05)
    _, child, pid = await spawn_child(host, make_notebook, tmp_path)
    pinned.add(child.session_id)
    chat = child.events.subscribe()  # a chat attached to the child
    set_runtime(host, evict_after_minutes=0.01 / 60)

    assert lifecycle.held(child)
    assert await lifecycle.sweep() == []
    release()
    assert lifecycle.held(child)  # still attached
    assert await lifecycle.sweep() == []
    assert host.agents.get(child.session_id) is child and not process_gone(pid)

    child.events.unsubscribe(chat)

    assert not lifecycle.held(child)
    # Idle long enough: the debounced after-turn snapshot may have touched it a moment ago.
    await wait_for(lambda: lifecycle.evictable(child))
    assert await lifecycle.sweep() == [child.session_id]
    await wait_for(lambda: process_gone(pid))
    assert host.runtime.child_status(child.session_id) == "completed"


def test_the_sweep_runs_at_a_third_of_the_idle_time_within_bounds() -> None:
    assert sweep_interval(30 * 60.0) == 60.0
    assert sweep_interval(90.0) == 30.0
    assert sweep_interval(0.01) == 0.05


async def test_a_tab_attaching_while_the_child_is_being_evicted_keeps_it_loaded(
    host: Any, make_notebook: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    """The eviction's snapshot takes a while; a tab attaches meanwhile. The attach used to
    answer with the agent the eviction then unloaded, so the tab's chat asked for the events of
    a session no longer attached (404, retried for ever). Now the eviction sees the attach."""
    set_runtime(host, evict_after_minutes=0, snapshot_debounce=0.05)
    _, child, pid = await spawn_child(host, make_notebook, tmp_path)
    lifecycle = host.runtime.lifecycle
    saving, release = asyncio.Event(), asyncio.Event()
    save_snapshot = host.runtime.save_snapshot

    async def slow_save(session_id: str, reason: str) -> Any:
        saving.set()
        await release.wait()
        return await save_snapshot(session_id, reason)

    monkeypatch.setattr(host.runtime, "save_snapshot", slow_save)
    set_runtime(host, evict_after_minutes=1 / 60)  # idle for a second
    await wait_for(lambda: lifecycle.evictable(child))
    eviction = asyncio.ensure_future(lifecycle.evict(child))
    await asyncio.wait_for(saving.wait(), 30)

    attached = await host.attach(child.notebook.path)
    release.set()

    assert await eviction is False
    assert attached is child and host.agents.get(child.session_id) is child
    assert not process_gone(pid)


async def test_a_tab_showing_the_childs_notebook_keeps_it_loaded_before_its_kernel_connects(
    host: Any, make_notebook: Any, tmp_path: Path, rtc_connect_doc_client: Any
) -> None:
    """A tab opening a child's notebook joins the document's room first and connects to the
    kernel later (seconds later on a busy machine). The eviction used to shut the kernel down in
    between: the tab then waited on a dead kernel and its chat on an unloaded session."""
    set_runtime(host, evict_after_minutes=0, snapshot_debounce=0.05)
    _, child, pid = await spawn_child(host, make_notebook, tmp_path)
    lifecycle = host.runtime.lifecycle
    websocket, room = await rtc_connect_doc_client("json", "notebook", child.notebook.path)
    tab = YNotebook()
    async with websocket as ws, Provider(tab.ydoc, HttpxWebsocket(ws, room)):
        await wait_for(lambda: len(tab.ycells) > 0)
        set_runtime(host, evict_after_minutes=0.01 / 60)
        assert lifecycle.held(child)
        assert await lifecycle.sweep() == []
        assert host.agents.get(child.session_id) is child and not process_gone(pid)

    await wait_for(lambda: not lifecycle.held(child))  # the tab closed: nothing holds it
    await wait_for(lambda: lifecycle.evictable(child))
    assert await lifecycle.sweep() == [child.session_id]
