"""Compaction end to end (headless, real kernels, scripted provider): the context passes the
threshold, a summary replaces the old prefix, `history` keeps everything, children stay
reachable."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from prime_agent_lab.core.messages import ModelRequest
from prime_agent_lab.core.ports import ModelProvider, ProviderEvent
from prime_agent_lab.core.sessions import SUMMARY_LABEL
from prime_agent_lab.core.settings import Settings
from prime_agent_lab.core.tokens import estimate_tokens
from prime_agent_lab.headless import HeadlessRun

from .test_subagents import WAIT_FOR_CHILDREN

WINDOW = 8_000
SMALL = {
    "context_window": WINDOW,
    "compaction_reserve_tokens": 2_000,
    "compaction_keep_recent_tokens": 2_000,
}


class RecordingProvider:
    """The scripted provider, keeping every request it got (what the model actually saw)."""

    def __init__(self, inner: ModelProvider) -> None:
        self.inner = inner
        self.name = inner.name
        self.model = inner.model
        self.requests: list[ModelRequest] = []

    def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        self.requests.append(request)
        return self.inner.stream(request)

    async def aclose(self) -> None:
        return None


def request_tokens(request: ModelRequest) -> int:
    text = request.system + "".join(
        m.text + "".join(c.arguments for c in m.tool_calls) for m in request.messages
    )
    return estimate_tokens(text)


def write_script(tmp_path: Path, data: dict[str, Any]) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def headless(tmp_path: Path, script: str, **config: Any) -> HeadlessRun:
    return HeadlessRun(
        cwd=tmp_path,
        notebook="analysis.ipynb",
        provider="scripted",
        model=None,
        script_path=script,
        stream=False,
        kernel_name="python3",
        settings=Settings(cell_timeout=60, **{**SMALL, **config}),
        kernel_pool_size=1,
    )


def filler(i: int) -> dict[str, Any]:
    return {"code": f'print("MARKER-{i} " + "x" * 4000)'}


async def test_a_session_past_the_threshold_compacts_by_itself_and_keeps_its_history_and_children(
    tmp_path: Path,
) -> None:
    send = (
        'r = await agent_message.send("hello after compaction", receiver_role="child", '
        'receiver_name="kid")\nprint(r.delivery_status)'
    )
    check_history = (
        "print('HISTORY', len(history.cells()), len(history.of_type('compaction')), "
        "bool(history.search('MARKER-0')), bool(history.search('MARKER-7')))"
    )
    turns = [
        {"code": 'h = await rlm("count words", name="kid")\nprint(h.name)'},
        {"code": WAIT_FOR_CHILDREN},
        *[filler(i) for i in range(8)],
        {"code": send},
        {"code": check_history},
        {"text": "done: {last_output_line}"},
    ]
    child = {"turns": [{"text": "did {task}"}, {"text": "got it"}]}
    script = write_script(tmp_path, {"turns": turns, "child": child})
    run = headless(tmp_path, script)
    events: list[Any] = []
    await run.start(events.append)
    recorder = RecordingProvider(run.agent.provider)
    run.agent.provider = recorder
    try:
        outcome = await run.settle(await run.agent.run_turn("work long"))
    finally:
        await run.close()

    assert outcome.stop_reason == "end_turn", outcome
    session = run.agent.session
    compactions = [e for e in session.entries if e["type"] == "compaction"]
    assert compactions, "the session never compacted"
    assert all(c["trigger"] == "threshold" for c in compactions)
    first = compactions[0]
    assert first["tokens_before"] > WINDOW - SMALL["compaction_reserve_tokens"]
    assert first["summary"].startswith("## Goal")
    kept = session.by_id[first["first_kept_entry_id"]]
    assert kept["type"] in ("user_message", "assistant_message", "agent_message")

    # The model's next prompt after the first compaction: the summary, then the recent tail.
    turn_requests = [r for r in recorder.requests if r.purpose == "turn"]
    summaries = [r for r in recorder.requests if r.purpose == "summary"]
    assert len(summaries) == len(compactions)
    after = next(r for r in turn_requests if r.messages[0].text.startswith(SUMMARY_LABEL))
    assert first["summary"] in after.messages[0].text
    assert not any("MARKER-0" in m.text for m in after.messages)  # dropped from the context
    assert request_tokens(after) < WINDOW
    assert max(request_tokens(r) for r in turn_requests) < WINDOW
    # The repeated compaction summarised from the previous summary on.
    if len(compactions) > 1:
        assert compactions[0]["summary"][:20] in "".join(m.text for m in summaries[1].messages)

    # history still holds every earlier message, compacted ones included.
    results = [e for e in session.entries if e["type"] == "tool_result"]
    checked = next(r for r in results if "HISTORY" in r["observation"])
    line = next(x for x in checked["observation"].splitlines() if x.startswith("HISTORY"))
    assert line == f"HISTORY {results.index(checked)} {len(compactions)} True True"

    # The child spawned before the compaction got the message sent after it.
    assert any("delivered" in r["observation"] or "queued" in r["observation"] for r in results)
    child_id = run.runtime.list_children(session.session_id)[0]["rlm_child_id"]
    child_log = run.repository.load(child_id)
    texts = [e.get("text", "") for e in child_log.entries]
    assert any("hello after compaction" in t for t in texts)

    notices = [e for e in events if e["type"] == "notice" and e["kind"] == "compacted"]
    assert len(notices) == len(compactions)
    assert "Context compacted" in notices[0]["text"]


async def play(tmp_path: Path, data: dict[str, Any], **config: Any) -> tuple[Any, Any, Any]:
    """One root turn of `data` (a script); the outcome, the session, the recorded requests and
    the events."""
    run = headless(tmp_path, write_script(tmp_path, data), **config)
    events: list[Any] = []
    await run.start(events.append)
    recorder = RecordingProvider(run.agent.provider)
    run.agent.provider = recorder
    try:
        outcome = await run.settle(await run.agent.run_turn("go"))
    finally:
        await run.close()
    return outcome, run.agent.session, (recorder.requests, events)


def printed(session: Any, marker: str) -> str:
    for entry in session.entries:
        for line in str(entry.get("observation", "")).splitlines():
            if line.startswith(marker):
                return line
    raise AssertionError(f"no output line starting with {marker!r}")


async def test_compact_run_schedules_a_compaction_with_instructions_and_the_turn_goes_on(
    tmp_path: Path,
) -> None:
    turns = [
        {
            "code": "s = await compact.status()\n"
            "print('STATUS', s['scheduled'], s['context_window'], s['tokens'] > 0, s['percent'])"
        },
        filler(0),
        filler(1),
        {"code": "r = await compact.run(instructions='keep the MARKER numbers')\nprint('RUN', r)"},
        {"code": "s = await compact.status()\nprint('AFTER', s['compactions'], s['scheduled'])"},
        {"text": "finished"},
    ]
    outcome, session, (requests, _) = await play(
        tmp_path, {"turns": turns}, context_window=100_000, compaction_keep_recent_tokens=500
    )

    assert outcome.stop_reason == "end_turn" and outcome.final_text == "finished", outcome
    assert printed(session, "STATUS").startswith("STATUS False 100000 True ")
    assert "'scheduled': True" in printed(session, "RUN")
    assert printed(session, "AFTER") == "AFTER 1 False"
    (compaction,) = [e for e in session.entries if e["type"] == "compaction"]
    assert compaction["trigger"] == "requested"
    assert compaction["instructions"] == "keep the MARKER numbers"
    (summary_call,) = [r for r in requests if r.purpose == "summary"]
    assert "keep the MARKER numbers" in summary_call.messages[0].text
    assert summary_call.tools == []
    # The kernel's names are part of what is summarised.
    kernel_state = summary_call.messages[0].text.split("<kernel-state>")[1]
    assert "\nr: dict (" in kernel_state and "\ns: dict (" in kernel_state


async def test_compact_run_on_a_session_too_short_is_refused_with_a_reason(
    tmp_path: Path,
) -> None:
    turns = [
        {"code": "print('RUN', await compact.run())"},
        {"text": "finished"},
    ]
    outcome, session, _ = await play(tmp_path, {"turns": turns}, context_window=100_000)
    assert outcome.stop_reason == "end_turn"
    assert printed(session, "RUN") == (
        "RUN {'scheduled': False, 'reason': 'session is too short to compact'}"
    )
    assert not [e for e in session.entries if e["type"] == "compaction"]


async def test_compact_run_between_turns_is_refused_as_there_is_no_active_turn(
    tmp_path: Path,
) -> None:
    script = write_script(tmp_path, {"turns": [filler(0), filler(1), {"text": "finished"}]})
    run = headless(tmp_path, script, context_window=100_000, compaction_keep_recent_tokens=10)
    await run.start(lambda event: None)
    try:
        await run.agent.run_turn("go")
        answer = run.agent.compactor.schedule(None)
    finally:
        await run.close()
    assert answer == {
        "scheduled": False,
        "reason": "no active turn; compaction runs within a turn",
    }


async def test_a_failed_summary_call_lets_the_turn_go_on_uncompacted_while_it_fits(
    tmp_path: Path,
) -> None:
    data = {
        "turns": [*[filler(i) for i in range(6)], {"text": "finished"}],
        "side": {"summary": [{"error": {"status": 400, "message": "no summaries today"}}]},
    }
    outcome, session, (_, events) = await play(tmp_path, data)

    assert outcome.stop_reason == "end_turn", outcome
    assert [e for e in events if e["type"] == "notice" and e["kind"] == "compaction_failed"]
    failed = [e for e in session.entries if e.get("kind") == "compaction_failed"]
    assert failed and "no summaries today" in failed[0]["text"]
    assert "goes on uncompacted" in failed[0]["text"]
    # The next attempt (the scripted default summary) compacted; nothing was lost meanwhile.
    assert len([e for e in session.entries if e["type"] == "tool_result"]) == 6


async def test_a_failed_summary_call_when_the_context_no_longer_fits_ends_the_turn_clearly(
    tmp_path: Path,
) -> None:
    big = {"code": 'print("y" * 19000)'}
    data = {
        "turns": [big, big, {"text": "never"}],
        "side": {"summary": [{"error": {"status": 400, "message": "no"}, "repeat": 1}] * 4},
    }
    outcome, session, _ = await play(tmp_path, data)

    assert outcome.stop_reason == "error"
    assert "no longer fits the model's window" in (outcome.error or "")
    assert "Nothing was lost" in (outcome.error or "")
    assert len([e for e in session.entries if e["type"] == "tool_result"]) == 2
    assert not [e for e in session.entries if e["type"] == "compaction"]
