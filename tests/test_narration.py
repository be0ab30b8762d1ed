"""The markdown of narration cells (core/narration.py; docs/teaching.md)."""

from __future__ import annotations

import html
import re

import mistune

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


# ---------------------------------------------------------------- hostile texts

HOSTILE_MESSAGES = [
    "# not a heading",
    "```python\nprint('an unclosed fence')",
    "<script>alert(1)</script> and <b>bold?</b> &amp; an entity",
    "first line\n===\n- not a list\n1. nor this\n> nor a quote",
    "    indented four\n\n    after a blank line\n| a | b |\n|---|---|",
    "**stars** _under_ [link](http://x) ![img](y) `tick` ~~gone~~ $x^2$ \\ back\\slash",
]


def rendered(markdown: str) -> str:
    """The HTML a notebook export makes of a markdown cell (nbconvert renders with mistune)."""
    return mistune.html(markdown)


def text_of(html_text: str) -> str:
    """The text a reader sees, tags and line breaks folded."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", html_text)).split())


def test_a_users_message_reads_as_they_typed_it_whatever_markdown_it_holds() -> None:
    for message in HOSTILE_MESSAGES:
        cell = narration(USER, message, {"from_user": True})
        assert cell is not None
        page = rendered(cell)
        assert text_of(page) == " ".join(f"User: {message}".split()), (message, cell, page)
        for tag in (
            "<h1",
            "<h2",
            "<pre",
            "<code",
            "<ul",
            "<ol",
            "<blockquote",
            "<script",
            "<b>",
            "<a ",
            "<img",
            "<table",
            "<em",
            "<del",
        ):
            assert tag not in page, (message, tag, page)


def test_an_unclosed_fence_swallows_nothing_after_its_cell() -> None:
    answer = narration(ANSWER, "Run this:\n```python\nprint(1)", {})
    user = narration(USER, "```\nmy unclosed fence", {"from_user": True})
    assert answer is not None and user is not None
    page = rendered(answer + "\n\n" + user + "\n\n**after**")
    assert "<pre><code" in page and "print(1)" in page  # the answer stays Markdown
    assert page.count("<strong>") == 3, page  # Agent, User and the text after them


def test_an_answer_that_starts_with_a_block_keeps_it_a_block() -> None:
    for answer, tag in (
        ("```python\nx = 1\n```", "<pre"),
        ("# Result\nok", "<h1"),
        ("- a\n- b", "<ul"),
    ):
        cell = narration(ANSWER, answer, {})
        assert cell is not None and tag in rendered(cell), cell


def test_a_message_from_an_agent_or_a_notice_is_text_too() -> None:
    text = '[message from child "part-a", written 2026-12-02T07:00:00Z, id m1]\n# vowels <i>11</i>'
    fields = {"from_name": "part-a", "relationship": "child", "message_id": "m1"}
    cell = narration(USER, text, fields)
    assert cell is not None
    assert "<h1" not in rendered(cell) and "<i>" not in rendered(cell)
    assert text_of(rendered(cell)) == 'Message from child "part-a": # vowels <i>11</i>'
