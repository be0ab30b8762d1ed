"""Where a compaction cuts: never at a tool result, never between a call and its results."""

from __future__ import annotations

from typing import Any

from prime_agent_lab.core.compaction import _cut_index, reserve_tokens
from prime_agent_lab.core.installed_providers import context_window
from prime_agent_lab.core.tokens import reported_context


def step(n: int, cells: int, size: int = 400) -> list[dict[str, Any]]:
    calls = [{"id": f"c{n}_{i}", "name": "python", "arguments": "{}"} for i in range(cells)]
    out: list[dict[str, Any]] = [{"type": "assistant_message", "text": "", "tool_calls": calls}]
    for call in calls:
        out.append({"type": "cell_started", "tool_call_id": call["id"]})
        out.append({"type": "tool_result", "tool_call_id": call["id"], "observation": "z" * size})
    return out


def test_the_cut_falls_on_a_message_never_between_a_call_and_its_results() -> None:
    entries = [{"type": "user_message", "text": "go"}]
    for n in range(10):
        entries += step(n, cells=3)
    for keep in range(0, 4000, 37):
        cut = _cut_index(entries, keep)
        assert cut is not None and cut > 0
        assert entries[cut]["type"] in ("user_message", "assistant_message", "agent_message")


def test_the_cut_keeps_at_least_the_recent_tokens_asked_for() -> None:
    entries = [{"type": "user_message", "text": "go"}]
    for n in range(10):
        entries += step(n, cells=1, size=4000)  # about 1,000 tokens a step
    cut = _cut_index(entries, 2_500)
    assert cut is not None
    kept_steps = sum(1 for e in entries[cut:] if e["type"] == "assistant_message")
    assert kept_steps == 3


def test_a_session_of_one_step_is_too_short_to_compact() -> None:
    assert _cut_index([{"type": "user_message", "text": "go"}], 10) is None
    entries = [{"type": "user_message", "text": "go"}, *step(0, cells=2)]
    assert _cut_index(entries, 10) is None  # dropping only the task would lose it
    entries += step(1, cells=1)
    assert _cut_index(entries, 10_000) == 6  # the first whole step goes, the second stays


def test_context_windows_come_from_the_table_and_an_override_wins() -> None:
    assert context_window("claude-sonnet-4-5") == 200_000
    assert context_window("openai/gpt-4o-mini") == 128_000
    assert context_window("gpt-4.1") == 1_047_576
    assert context_window("some-local-model") == 128_000
    assert context_window("claude-sonnet-4-5", override=50_000) == 50_000
    assert reserve_tokens(16_384, 32_000) == 8_000
    assert reserve_tokens(16_384, 200_000) == 16_384


def test_reported_context_counts_input_and_cache_and_output() -> None:
    usage = {
        "input_tokens": 10,
        "cache_read_tokens": 1_000,
        "cache_write_tokens": 5,
        "output_tokens": 7,
    }
    assert reported_context(usage) == 1_022
    assert reported_context({"input_tokens": 0, "output_tokens": 3}) is None
    assert reported_context(None) is None
