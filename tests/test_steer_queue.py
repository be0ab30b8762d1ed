"""The chat's steer and queue (docs/pairing.md, "Steer and queue") on the real server: the user's
messages while a turn runs go through the session's mailbox. A steer reaches the model in the
running turn, follow-ups start a turn each once the run ends, in order; a queued message can be
removed until it starts; a Stop and a restart hold the queue until the user sends again."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from prime_agent_lab.core.agent import Agent
from prime_agent_lab.core.mailbox import MAILBOX_FILE
from prime_agent_lab.providers import make_provider

from .conftest import next_event, wait_for
from .test_compaction import RecordingProvider
from .test_messaging import gated_script, restarted_host
from .test_rest_edges import message_of, post


def gated_turns(flag: Path, *answers: str) -> list[dict[str, Any]]:
    """Turn 1: a cell that runs until `flag` exists, then "work done"; one answer per turn after."""
    return [*gated_script(flag), *({"text": a} for a in answers)]


class Busy:
    """A session whose first turn runs a cell until `release()`; its provider records requests."""

    def __init__(self, agent: Agent, provider: RecordingProvider, flag: Path) -> None:
        self.agent, self.provider, self.flag = agent, provider, flag

    @property
    def session_id(self) -> str:
        return self.agent.session_id

    def release(self) -> None:
        self.flag.write_text("go")


async def busy_session(
    host: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any, tmp_path: Path, *answers: str
) -> Busy:
    flag = tmp_path / "release.flag"
    script = agent_script(gated_turns(flag, *answers))
    providers: list[RecordingProvider] = []

    def provider() -> RecordingProvider:
        providers.append(RecordingProvider(make_provider("scripted", None, script_path=script)))
        return providers[-1]

    host._provider_factory = provider
    agent: Agent = await host.attach(make_notebook("queue.ipynb"))
    events = agent.events.subscribe()
    try:
        started = await post(
            jp_fetch, "sessions", agent.session_id, "messages", body={"text": "work"}
        )
        assert started.code == 202, started.body
        assert json.loads(started.body) == {"mode": "auto", "delivery_status": "started", "turn": 1}
        await next_event(events, "cell_running")
    finally:
        agent.events.unsubscribe(events)
    return Busy(agent, providers[-1], flag)


async def send(
    jp_fetch: Any, busy: Busy | str, text: str, mode: str | None = None
) -> dict[str, Any]:
    """POST the user's message; `busy` is the session (or its id)."""
    session_id = busy if isinstance(busy, str) else busy.session_id
    body: dict[str, Any] = {"text": text} if mode is None else {"text": text, "mode": mode}
    answer = await post(jp_fetch, "sessions", session_id, "messages", body=body)
    assert answer.code == 202, answer.body
    return json.loads(answer.body)  # type: ignore[no-any-return]


async def session(jp_fetch: Any, session_id: str) -> dict[str, Any]:
    answer = await jp_fetch("prime-agent", "api", "sessions", session_id)
    return json.loads(answer.body)  # type: ignore[no-any-return]


async def delete(jp_fetch: Any, session_id: str, message_id: str) -> Any:
    route = ("prime-agent", "api", "sessions", session_id, "messages", message_id)
    return await jp_fetch(*route, method="DELETE", raise_error=False)


def entries_with(agent: Agent, message_id: str) -> list[dict[str, Any]]:
    return [e for e in agent.session.entries if e.get("message_id") == message_id]


def queue_texts(state: dict[str, Any]) -> list[tuple[str, str]]:
    return [(item["text"], item["mode"]) for item in state["items"]]


async def test_a_steer_while_a_cell_runs_reaches_the_model_in_the_same_turn(
    host: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any, tmp_path: Path
) -> None:
    busy = await busy_session(host, jp_fetch, make_notebook, agent_script, tmp_path)
    events = busy.agent.events.subscribe()

    steer = await send(jp_fetch, busy, "use the median", "steer")
    assert (steer["mode"], steer["delivery_status"]) == ("steer", "queued")
    shown = (await session(jp_fetch, busy.session_id))["queue"]
    assert queue_texts(shown) == [("use the median", "steer")] and not shown["paused"]

    busy.release()
    await wait_for(lambda: not busy.agent.running)

    (entry,) = entries_with(busy.agent, steer["message_id"])
    assert (entry["type"], entry["turn"], entry["text"]) == ("agent_message", 1, "use the median")
    assert entry["from_user"] is True and busy.agent.session.turns() == 1
    kinds = [e["type"] for e in busy.agent.session.path()]
    at = kinds.index("agent_message")
    assert kinds[at - 1] == "tool_result" and kinds[at + 1] == "assistant_message"
    # The model's second call of turn 1 read it, as the user's words, after the cell's result.
    second = busy.provider.requests[1]
    assert [m.role for m in second.messages][-2:] == ["tool", "user"], second.messages
    assert second.messages[-1].text == "use the median"

    detail = await session(jp_fetch, busy.session_id)
    users = [i for i in detail["transcript"] if i["type"] == "user"]
    assert [(u["text"], u["turn"], u.get("mode")) for u in users] == [
        ("work", 1, None),
        ("use the median", 1, "steer"),
    ]
    assert detail["queue"] == {"items": [], "paused": False}
    changes = []
    while not events.empty():
        event = events.get_nowait()
        if event["type"] == "queue":
            changes.append((event["change"], event.get("message_id"), len(event["state"]["items"])))
    assert changes == [("queued", steer["message_id"], 1), ("started", steer["message_id"], 0)]


async def test_follow_ups_start_a_turn_each_after_the_run_ends_in_the_order_they_were_queued(
    host: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any, tmp_path: Path
) -> None:
    busy = await busy_session(
        host, jp_fetch, make_notebook, agent_script, tmp_path, "plotted", "saved"
    )
    first = await send(jp_fetch, busy, "then plot it")  # `auto` while a turn runs: a follow-up
    second = await send(jp_fetch, busy, "and save the plot", "follow_up")
    assert (first["mode"], first["delivery_status"]) == ("follow_up", "queued")
    assert queue_texts(second["queue"]) == [
        ("then plot it", "follow_up"),
        ("and save the plot", "follow_up"),
    ]
    assert busy.agent.session.turns() == 1  # nothing entered the running turn

    busy.release()
    await wait_for(lambda: busy.agent.session.turns() == 3 and not busy.agent.running)

    opened = [e for e in busy.agent.session.entries if e["type"] == "user_message"]
    assert [(e["turn"], e["text"], e.get("message_id")) for e in opened] == [
        (1, "work", None),
        (2, "then plot it", first["message_id"]),
        (3, "and save the plot", second["message_id"]),
    ]
    assert all(e["from_user"] is True and e["mode"] == "follow_up" for e in opened[1:])
    ends = [e["stop_reason"] for e in busy.agent.session.entries if e["type"] == "turn_end"]
    assert ends == ["end_turn", "end_turn", "end_turn"]
    assert not [e for e in busy.agent.session.entries if e["type"] == "agent_message"]


async def test_a_queued_message_is_removed_until_it_starts_and_then_removing_it_is_409(
    host: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any, tmp_path: Path
) -> None:
    busy = await busy_session(host, jp_fetch, make_notebook, agent_script, tmp_path, "kept")
    dropped = await send(jp_fetch, busy, "never mind this one")
    kept = await send(jp_fetch, busy, "do this one")

    removed = await delete(jp_fetch, busy.session_id, dropped["message_id"])
    assert removed.code == 200, removed.body
    assert queue_texts(json.loads(removed.body)["queue"]) == [("do this one", "follow_up")]
    again = await delete(jp_fetch, busy.session_id, dropped["message_id"])
    assert again.code == 404 and "no queued message" in message_of(again)
    unknown = await delete(jp_fetch, busy.session_id, "user_0123456789abcdef")
    assert unknown.code == 404

    busy.release()
    await wait_for(lambda: busy.agent.session.turns() == 2 and not busy.agent.running)
    late = await delete(jp_fetch, busy.session_id, kept["message_id"])
    assert late.code == 409 and "already started (turn 2)" in message_of(late)
    assert not entries_with(busy.agent, dropped["message_id"])
    journal = (busy.agent.session.directory / MAILBOX_FILE).read_text()
    assert '"reason": "removed by the user"' in journal


async def test_stop_holds_the_queue_until_the_user_sends_it(
    host: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any, tmp_path: Path
) -> None:
    busy = await busy_session(
        host, jp_fetch, make_notebook, agent_script, tmp_path, "first", "second"
    )
    first = await send(jp_fetch, busy, "first after the run")
    await send(jp_fetch, busy, "second after the run")
    events = busy.agent.events.subscribe()

    stopped = await post(jp_fetch, "sessions", busy.session_id, "stop", body={})
    assert json.loads(stopped.body) == {"stopped": True}
    paused = await next_event(events, "queue")
    assert paused["change"] == "paused" and paused["state"]["paused"] is True
    await asyncio.sleep(0.5)  # nothing starts by itself
    assert not busy.agent.running and busy.agent.session.turns() == 1
    assert len((await session(jp_fetch, busy.session_id))["queue"]["items"]) == 2

    now = await post(
        jp_fetch,
        "sessions",
        busy.session_id,
        "messages",
        first["message_id"],
        "send",
        body={},
    )
    assert now.code == 202, now.body
    answer = json.loads(now.body)
    assert (answer["delivery_status"], answer["turn"]) == ("started", 2)
    assert queue_texts(answer["queue"]) == [("second after the run", "follow_up")]
    assert answer["queue"]["paused"] is False
    # The queue goes on again: the second starts once the first's turn ended.
    await wait_for(lambda: busy.agent.session.turns() == 3 and not busy.agent.running)
    opened = [e["text"] for e in busy.agent.session.entries if e["type"] == "user_message"]
    assert opened == ["work", "first after the run", "second after the run"]


async def test_the_queue_survives_a_server_restart_held_and_in_order(
    host: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any, tmp_path: Path
) -> None:
    busy = await busy_session(host, jp_fetch, make_notebook, agent_script, tmp_path)
    first = await send(jp_fetch, busy, "one")
    second = await send(jp_fetch, busy, "two", "steer")  # never taken: the cell ran till the end
    session_id, path = busy.session_id, busy.agent.notebook.path
    await host.shutdown()  # the turn is stopped; the queue is only on disk now

    busy.release()
    again = restarted_host(host, agent_script([{"text": "answered"}] * 4))
    try:
        assert again.runtime.mailbox.recover() == 2
        again.runtime.deliver_recovered()  # brings back no agent: the user's queue is held
        await asyncio.sleep(0.2)
        assert session_id not in again.agents
        agent = await again.attach(path)
        assert agent.session_id == session_id
        await asyncio.sleep(0.5)
        assert not agent.running and agent.session.turns() == 1
        state = (await session(jp_fetch, session_id))["queue"]
        assert queue_texts(state) == [("one", "follow_up"), ("two", "steer")]
        assert state["paused"] is True
        assert [i["message_id"] for i in state["items"]] == [
            first["message_id"],
            second["message_id"],
        ]

        resumed = await send(jp_fetch, session_id, "and now", "auto")
        assert resumed["delivery_status"] == "started"
        await wait_for(lambda: not agent.running and agent.session.turns() >= 3, timeout=60)
        await wait_for(lambda: not agent.running and not again.runtime.mailbox.pending(session_id))
        messages = ("user_message", "agent_message")
        carried = [
            (e["type"], e["turn"], e["text"])
            for e in agent.session.path()
            if e["type"] in messages and e["turn"] > 1
        ]
        # The new message's turn took the held steer at its first model call; the follow-up
        # started the next turn.
        assert carried == [
            ("user_message", 2, "and now"),
            ("agent_message", 2, "two"),
            ("user_message", 3, "one"),
        ]
    finally:
        host.serverapp.web_app.settings["prime_agent_host"] = host
        await again.shutdown()


async def test_a_bad_mode_or_text_is_a_clear_400_and_queues_nothing(
    host: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any, tmp_path: Path
) -> None:
    busy = await busy_session(host, jp_fetch, make_notebook, agent_script, tmp_path, "idle")
    cases = [
        (
            {"text": "x", "mode": "later"},
            'mode must be "auto", "steer" or "follow_up", not \'later\'',
        ),
        ({"text": "x", "mode": 5}, 'mode must be "auto", "steer" or "follow_up", not a number'),
        ({"text": "x", "mode": ["steer"]}, "not an array"),
        ({"text": "   ", "mode": "steer"}, "message text is required"),
        ({"mode": "follow_up"}, "message text is required"),
        ({"text": 3, "mode": "steer"}, "text must be a string, not a number"),
    ]
    for body, expected in cases:
        answer = await post(jp_fetch, "sessions", busy.session_id, "messages", body=body)
        assert (answer.code, expected in message_of(answer)) == (400, True), (body, answer.body)
    assert (await session(jp_fetch, busy.session_id))["queue"]["items"] == []
    assert host.runtime.mailbox.pending(busy.session_id) == 0
    busy.release()
    await wait_for(lambda: not busy.agent.running)
    # Idle, a steer (like any mode) starts a turn at once.
    idle = await send(jp_fetch, busy, "start over", "steer")
    assert idle == {"mode": "steer", "delivery_status": "started", "turn": 2}
    await wait_for(lambda: not busy.agent.running)
    assert [e["text"] for e in busy.agent.session.entries if e["type"] == "user_message"] == [
        "work",
        "start over",
    ]
