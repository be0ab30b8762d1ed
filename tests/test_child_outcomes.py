"""A sub-agent's outcome comes from its log and survives eviction; a stopped sub-agent is
`stopped` and its parent is told (issue 19: a replied child read "inactive" once evicted, a
stopped one read "idle" and its parent heard nothing)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from .conftest import run_turn, use_script, wait_for

REPLY = 'await agent_message.send("found it", receiver_role="parent")'
WAIT_FOR_REPLY = (
    "import asyncio, time\n"
    "deadline = time.time() + 60\n"
    "while time.time() < deadline:\n"
    "    subs = await rlm.list_subagents()\n"
    "    if subs and all(s.status == 'replied' for s in subs):\n"
    "        break\n"
    "    await asyncio.sleep(0.05)\n"
    "print('replied')"
)
LONG_CELL = "import time\ntime.sleep(120)"


def write_tree(tmp_path: Path, parent: list[dict[str, Any]], child: list[dict[str, Any]]) -> str:
    path = tmp_path / "outcome-tree.json"
    path.write_text(json.dumps({"turns": parent, "child": {"turns": child}}), encoding="utf-8")
    return str(path)


def set_runtime(host: Any, **settings: Any) -> None:
    host.runtime.settings = dataclasses.replace(host.runtime.settings, **settings)


def child_statuses(parent: Any) -> list[str]:
    return [e["status"] for e in parent.events.since(0) if e["type"] == "child_status"]


async def test_a_replied_child_keeps_replied_once_evicted_in_its_status_and_its_parents_badge(
    host: Any, make_notebook: Any, tmp_path: Path
) -> None:
    spawn = 'a = await rlm("look for it", name="alpha")'
    parent_turns = [{"code": spawn}, {"code": WAIT_FOR_REPLY}, {"text": "done: {messages}"}]
    child_turns = [{"code": REPLY}, {"text": "sent"}]
    use_script(host, write_tree(tmp_path, parent_turns, child_turns))
    set_runtime(host, snapshot_debounce=0.05)
    parent = await host.attach(make_notebook("work/outcomes.ipynb"))
    await run_turn(host, parent.session_id, "fan out")
    (child_id,) = host.runtime.descendants(parent.session_id)
    await wait_for(lambda: host.runtime.child_status(child_id) == "replied")

    set_runtime(host, evict_after_minutes=0.01 / 60)
    lifecycle = host.runtime.lifecycle
    # Idle long enough: the debounced after-turn snapshot may have touched it a moment ago.
    await wait_for(lambda: lifecycle.evictable(host.agents[child_id]))
    assert await lifecycle.sweep() == [child_id]

    assert child_id in host.runtime.lifecycle.evicted
    assert host.runtime.child_status(child_id) == "replied"
    (listed,) = host.runtime.list_children(parent.session_id)
    assert listed["status"] == "replied"
    # The badge in the parent's chat follows the last child_status event.
    assert child_statuses(parent)[-1] == "replied"


async def test_a_stopped_child_is_stopped_and_its_parent_is_told(
    host: Any, make_notebook: Any, tmp_path: Path
) -> None:
    spawn = 'a = await rlm("take your time", name="slow")'
    parent_turns = [{"code": spawn}, {"text": "spawned"}, {"text": "heard: {messages}"}]
    use_script(host, write_tree(tmp_path, parent_turns, [{"code": LONG_CELL}, {"text": "x"}]))
    parent = await host.attach(make_notebook("work/stops.ipynb"))
    await run_turn(host, parent.session_id, "fan out")
    (child_id,) = host.runtime.descendants(parent.session_id)
    child = host.agents[child_id]
    await wait_for(lambda: any(e["type"] == "cell_running" for e in child.events.since(0)))

    assert await child.stop()

    assert host.runtime.child_status(child_id) == "stopped"
    await wait_for(lambda: "stopped" in child_statuses(parent))
    notices = [e for e in parent.session.path() if e["type"] == "notice"]
    assert [n["kind"] for n in notices] == ["child_stopped"]
    assert "'slow' was stopped" in notices[0]["text"]

    def told() -> list[dict[str, Any]]:
        return [
            e
            for e in parent.session.path()
            if e["type"] in ("user_message", "agent_message") and e.get("notice") == "child_stopped"
        ]

    (message,) = await wait_for(told)
    assert message["from_session_id"] == child_id and message["relationship"] == "child"
