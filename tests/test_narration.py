"""The markdown of narration cells (core/narration.py; docs/teaching.md)."""

from __future__ import annotations

from prime_agent_lab.core.narration import ANSWER, USER, narration


def test_the_users_message_and_the_answer_are_led_by_who_said_them() -> None:
    assert narration(USER, "  Find the incident.\n", {"from_user": True}) == (
        "**User:** Find the incident."
    )
    assert narration(USER, "go", {}) == "**User:** go"
    assert narration(ANSWER, "It is INC-4471.", {}) == "**Agent:** It is INC-4471."


def test_nothing_is_narrated_for_an_empty_message_or_answer() -> None:
    assert narration(USER, " \n", {}) is None
    assert narration(ANSWER, "", {}) is None


def test_a_sub_agents_task_is_left_to_its_backlink_cell() -> None:
    fields = {"from_name": "root", "relationship": "parent", "composed": "2026-12-02T07:00:00Z"}
    assert narration(USER, "[task from parent]\n\nCount the vowels.", fields) is None


def test_a_message_from_another_agent_names_its_sender_without_the_time_it_was_written() -> None:
    text = '[message from child "part-a", written 2026-12-02T07:00:00Z, id m1]\nvowels 11'
    fields = {"from_name": "part-a", "relationship": "child", "message_id": "m1"}
    assert narration(USER, text, fields) == '**Message from child "part-a":** vowels 11'


def test_a_notice_that_starts_a_turn_is_narrated_as_a_notice() -> None:
    text = "[notice] Sub-agent 'part-a' finished its task without replying."
    fields = {"from_name": "part-a", "relationship": "child", "notice": "unreplied"}
    assert narration(USER, text, fields) == (
        "**Notice:** Sub-agent 'part-a' finished its task without replying."
    )
