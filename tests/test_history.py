"""The kernel's `history` over a long, compacted or branched session: everything is there and only
what is new travels."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prime_agent_kernel.history import History

from prime_agent_lab.core.sessions import SessionLog, SessionRepository
from prime_agent_lab.core.transcript import history_since


class Wire:
    """`history.get` with `since`, through JSON as over the bridge, counting what travels."""

    def __init__(self, session: SessionLog) -> None:
        self.session = session
        self.sent = 0

    def __call__(self, since: str | None) -> dict[str, Any]:
        answer = json.loads(json.dumps(history_since(self.session, since)))
        self.sent += len(answer["records"])
        return answer


def session_with_turns(tmp_path: Path, turns: int) -> SessionLog:
    log = SessionRepository(tmp_path / "sessions").create(
        notebook_path="a.ipynb", provider="scripted", model="demo"
    )
    for turn in range(1, turns + 1):
        add_turn(log, turn)
    return log


def add_turn(log: SessionLog, turn: int) -> None:
    log.append("user_message", text=f"question {turn}", turn=turn)
    call = {"id": f"c{turn}", "name": "python", "arguments": json.dumps({"code": f"x = {turn}"})}
    log.append("assistant_message", text="", tool_calls=[call], turn=turn)
    log.append("cell_started", tool_call_id=f"c{turn}", cell_id=f"cell{turn}", turn=turn)
    log.append("tool_result", tool_call_id=f"c{turn}", observation=f"out {turn}", turn=turn)
    log.append("turn_end", turn=turn, stop_reason="end_turn", final_text=f"answer {turn}")


def test_history_asks_only_for_what_was_appended_since_it_last_looked(tmp_path: Path) -> None:
    log = session_with_turns(tmp_path, 100)
    wire = Wire(log)
    history = History(wire)

    assert len(history) == 400  # cell_started is bookkeeping, not history
    assert wire.sent == 400
    assert len(history) == 400 and wire.sent == 400  # nothing new: nothing travels
    add_turn(log, 101)
    assert len(history) == 404 and wire.sent == 404
    assert history.search("question 101")[0].type == "user_message"
    assert history.cells()[-1].code == "x = 101"
    assert [e.text for e in history[-2:]] == ["out 101", "answer 101"]


def test_history_holds_compacted_entries_and_the_summary(tmp_path: Path) -> None:
    log = session_with_turns(tmp_path, 10)
    kept = [e for e in log.entries if e["type"] == "user_message"][8]
    log.append(
        "compaction",
        summary="## Goal\nanswer ten questions",
        first_kept_entry_id=kept["id"],
        tokens_before=9000,
        instructions=None,
    )
    history = History(Wire(log))

    assert len(history.of_type("user_message")) == 10  # compacted ones included
    (compaction,) = history.compactions()
    assert compaction.text.startswith("## Goal")
    assert [e.text for e in history.since_compaction() if e.type == "user_message"] == [
        "question 9",
        "question 10",
    ]
    assert history.search("answer ten", type="compaction") == [compaction]
    # What the model sees: the summary, then the kept turns.
    messages = log.context_messages()
    assert messages[0].text.endswith("## Goal\nanswer ten questions\n\nquestion 9")


def test_after_a_branch_history_is_the_new_path_not_the_abandoned_one(tmp_path: Path) -> None:
    log = session_with_turns(tmp_path, 3)
    wire = Wire(log)
    history = History(wire)
    assert len(history) == 12
    second_end = [e for e in log.entries if e["type"] == "turn_end"][1]
    log.move_leaf(second_end["id"])
    log.append("user_message", text="another way", turn=3)

    texts = [e.text for e in history if e.type == "user_message"]
    assert texts == ["question 1", "question 2", "another way"]


def test_a_reopened_chat_shows_the_compaction_and_clean_up_lines(tmp_path: Path) -> None:
    from prime_agent_lab.core.transcript import chat_transcript

    log = session_with_turns(tmp_path, 3)
    kept = [e for e in log.entries if e["type"] == "user_message"][2]
    log.append(
        "compaction",
        turn=3,
        summary="s",
        first_kept_entry_id=kept["id"],
        tokens_before=190_000,
        tokens_after=21_000,
        trigger="threshold",
        dropped_entries=10,
        instructions=None,
    )
    log.append("kernel_gc", turn=3, text="Kernel clean-up after compaction: deleted big.")
    notices = [i for i in chat_transcript(log) if i["type"] == "notice"]
    assert [(n["kind"], n["text"]) for n in notices] == [  # type: ignore[typeddict-item]
        (
            "compacted",
            "Context compacted (near the context window): 190,000 → about 21,000 tokens; 10 "
            "earlier entries are summarised (the full record stays in `history`).",
        ),
        ("kernel_gc", "Kernel clean-up after compaction: deleted big."),
    ]
