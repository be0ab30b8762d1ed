"""Compaction through the real `anthropic` and `openai` SDKs against the local wire-format server:
the summary call goes out without tools, and the compacted conversation is one each vendor's wire
format accepts, smaller than the window."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from prime_agent_lab.core.sessions import SUMMARY_LABEL
from prime_agent_lab.core.settings import Settings
from prime_agent_lab.headless import HeadlessRun

from .fake_llm_server import FakeLLMServer, RecordedRequest, Reply

WINDOW = 6_000
SUMMARY = "## Goal\nSUMMARY-OF-WORK: print long lines"


def compacting_policy(request: RecordedRequest) -> Reply:
    """Cells that print long lines; once the conversation holds the summary and two cells after
    it, a final answer. A request without tools is the summary call."""
    if "tools" not in request.body:
        return Reply(text=SUMMARY)
    wire = json.dumps(request.messages)
    if "SUMMARY-OF-WORK" in wire and len(request.turn_tool_results()) >= 2:
        return Reply(text="done after compaction")
    return Reply.code('print("w" * 4000)')


@pytest.fixture
def fake_llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(compacting_policy) as server:
        yield server


@pytest.mark.parametrize("vendor", ["anthropic", "openai"])
async def test_a_compacted_conversation_goes_through_each_vendors_sdk(
    vendor: str, tmp_path: Path, fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    if vendor == "anthropic":
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_llm.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-anthropic")
    else:
        monkeypatch.setenv("OPENAI_BASE_URL", fake_llm.openai_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")
    run = HeadlessRun(
        cwd=tmp_path,
        notebook="analysis.ipynb",
        provider=vendor,
        model="fake-model",
        script_path=None,
        stream=True,
        kernel_name="python3",
        settings=Settings(
            cell_timeout=60,
            context_window=WINDOW,
            compaction_reserve_tokens=1_500,
            compaction_keep_recent_tokens=1_500,
        ),
        kernel_pool_size=0,
        auto_refine_every=0,  # no auto-refine review after the compaction: the last request
        # must be the turn's own (the review is covered by tests/test_refine.py)
    )
    await run.start(lambda event: None)
    try:
        outcome = await run.agent.run_turn("print long lines until you are compacted")
    finally:
        await run.close()

    assert outcome.stop_reason == "end_turn", outcome
    assert outcome.final_text == "done after compaction"
    assert [e["type"] for e in run.agent.session.entries].count("compaction") >= 1
    summary_calls = [r for r in fake_llm.requests if "tools" not in r.body]
    assert summary_calls
    assert "print long lines until you are compacted" in json.dumps(summary_calls[0].messages)
    after = next(r for r in fake_llm.requests if SUMMARY_LABEL in json.dumps(r.messages))
    assert json.dumps(SUMMARY)[1:-1] in json.dumps(after.messages)
    assert len(json.dumps(after.body)) // 4 < WINDOW
    # The final answer came from the compacted context.
    assert SUMMARY_LABEL in json.dumps(fake_llm.requests[-1].messages)
