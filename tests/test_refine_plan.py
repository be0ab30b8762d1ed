"""The refine planner's request and the tolerant reading of its reply (pure functions)."""

from __future__ import annotations

import json

import pytest

from prime_agent_lab.core.harness.refine_plan import (
    CONVERSATION_CHARS,
    CUT_OFF,
    DEFAULT_SUMMARY,
    ENTRY_CHARS,
    PlanError,
    parse_proposal,
    planner_prompt,
)

PROPOSAL = {
    "summary": "remember the retry pattern",
    "rationale": "the test failed twice, then passed",
    "expected_outcome": "fewer wasted runs",
    "edits": [{"action": "create", "kind": "memory", "title": "flaky test", "content": "retry"}],
}


def _entry(kind: str, number: int, scope: str = "local", content: str = "c") -> dict[str, object]:
    return {
        "id": f"{kind}_{number:03d}",
        "kind": kind,
        "title": f"{kind} {number:03d}",
        "content": content,
        "path": "general",
        "scope": scope,
        "version": 1,
        "reference": {"type": "python", "import": "m", "callable": "f"} if kind == "skill" else {},
        "arguments": {},
    }


def test_a_bare_json_reply_is_read_whole() -> None:
    proposal = parse_proposal(json.dumps(PROPOSAL))
    assert proposal.summary == "remember the retry pattern"
    assert proposal.expected_outcome == "fewer wasted runs"
    assert proposal.edits == PROPOSAL["edits"]


def test_a_fenced_json_reply_with_prose_around_it_is_read() -> None:
    text = f"Here is my plan.\n\n```json\n{json.dumps(PROPOSAL, indent=2)}\n```\nThanks."
    assert parse_proposal(text).summary == "remember the retry pattern"


def test_json_inside_prose_without_a_fence_is_sliced_out() -> None:
    text = f"My proposal: {json.dumps(PROPOSAL)} -- end"
    assert parse_proposal(text).rationale == "the test failed twice, then passed"


def test_json_followed_by_prose_with_braces_is_read() -> None:
    text = f"{json.dumps(PROPOSAL)}\n\nNote: later edits can name {{id}} placeholders."
    assert parse_proposal(text).summary == "remember the retry pattern"


def test_expected_outcome_in_camel_case_is_accepted() -> None:
    reply = {"summary": "s", "expectedOutcome": "better", "edits": []}
    assert parse_proposal(json.dumps(reply)).expected_outcome == "better"


def test_missing_fields_get_defaults() -> None:
    proposal = parse_proposal("{}")
    assert (proposal.summary, proposal.rationale, proposal.expected_outcome) == (
        DEFAULT_SUMMARY,
        "",
        "",
    )
    assert proposal.edits == []


@pytest.mark.parametrize(
    "text",
    [
        json.dumps(PROPOSAL)[:-40],  # brackets left open
        '```json\n{"summary": "s", "rationale": "the test failed tw',  # a string left open
    ],
)
def test_a_reply_cut_off_mid_json_is_reported_as_cut_off_not_as_bad_json(text: str) -> None:
    with pytest.raises(PlanError) as caught:
        parse_proposal(text)
    assert str(caught.value) == CUT_OFF


def test_a_reply_that_stopped_at_the_token_limit_is_cut_off_even_if_it_parses() -> None:
    with pytest.raises(PlanError, match="cut off"):
        parse_proposal(json.dumps(PROPOSAL), stop_reason="max_tokens")
    with pytest.raises(PlanError, match="cut off"):
        parse_proposal(json.dumps(PROPOSAL), stop_reason="length")


def test_prose_without_json_is_a_json_error() -> None:
    with pytest.raises(PlanError, match="not valid JSON"):
        parse_proposal("I would not change anything.")


def test_edits_that_are_not_a_list_are_refused() -> None:
    with pytest.raises(PlanError, match="must be a list"):
        parse_proposal('{"edits": {"action": "create"}}')


def test_the_request_has_every_section_in_order_with_the_instructions() -> None:
    prompt = planner_prompt(
        [_entry("memory", 1)],
        [{"id": "refine_1", "trigger": "user", "scope": "local", "summary": "s", "edits": []}],
        [{"type": "user_message", "text": "fit the curve"}],
        "local",
        "promote the retry pattern",
    )
    names = [
        "current_harness_state",
        "refinement_history",
        "conversation",
        "scope_policy",
        "user_refine_instructions",
    ]
    positions = [prompt.index(f"<{name}>") for name in names]
    assert positions == sorted(positions)
    assert "[local:memory_001] memory 001" in prompt
    assert "[user] fit the curve" in prompt
    assert "promote the retry pattern" in prompt
    assert "read-only" in prompt


def test_the_state_shows_at_most_40_entries_per_kind_each_cut_to_240_chars() -> None:
    entries = [_entry("memory", n, content="x" * 1000) for n in range(45)]
    entries.append(_entry("skill", 1, scope="global"))
    prompt = planner_prompt(entries, [], [], "global", None)
    state = prompt.split("<current_harness_state>")[1].split("</current_harness_state>")[0]
    memory_lines = [line for line in state.splitlines() if line.startswith("- [local:memory_")]
    assert len(memory_lines) == 40
    assert all(len(line) <= ENTRY_CHARS + 2 for line in memory_lines)
    assert "memory: 45" in state and "+5 more memory entries" in state
    assert '[global:skill_001] skill 001 (general, v1): c ref={"type":"python"' in state
    assert "<user_refine_instructions>" not in prompt


def test_the_planner_sees_a_skills_arguments_in_the_order_of_its_call() -> None:
    """A planner shown `degree, x, y` for `fit(x, y, degree=2)` would write them back so."""
    skill = {**_entry("skill", 1), "arguments": {"x": "list", "y": "list", "degree": "int"}}
    state = planner_prompt([skill], [], [], "local", None)
    assert 'args={"x":"list","y":"list","degree":"int"}' in state


def test_the_history_shows_the_last_20_records_with_rejections() -> None:
    history = [
        {"id": f"refine_{n:02d}", "trigger": "user", "scope": "local", "summary": f"s{n}"}
        for n in range(25)
    ]
    history[-1]["edits"] = [
        {
            "action": "update",
            "kind": "prompt",
            "id": "base_system_prompt",
            "applied": False,
            "error": "the base system prompt is not editable",
        },
    ]
    prompt = planner_prompt([], history, [], "local", None)
    assert "refine_04" not in prompt and "refine_05" in prompt and "refine_24" in prompt
    assert "5 older refinements not shown" in prompt
    assert "update prompt:base_system_prompt (rejected: the base system prompt" in prompt


def test_the_conversation_is_its_last_80000_characters() -> None:
    entries = [{"type": "user_message", "text": f"message {n} " + "y" * 1000} for n in range(200)]
    prompt = planner_prompt([], [], entries, "local", None)
    conversation = prompt.split("<conversation>\n")[1].split("\n</conversation>")[0]
    assert len(conversation) <= CONVERSATION_CHARS + 100
    assert "message 199" in conversation and "message 0 " not in conversation
