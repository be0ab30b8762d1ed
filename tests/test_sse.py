"""The server-sent-events reader the SDK-based providers parse streamed answers with."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import pytest

from prime_agent_lab.providers.sse import ServerSentEvent, server_sent_events

BODY = (
    b": keepalive\n"
    b"event: message_start\n"
    b'data: {"type": "message_start", "text": "h\xc3\xa9"}\n'
    b"\n"
    b"data: first line\n"
    b"data:second line\n"
    b"id: 7\n"
    b"retry: 100\n"
    b"\n"
    b"event: ping\n"
    b"\n"
    b"data: [DONE]\n"
    b"\n"
)
EXPECTED = [
    ServerSentEvent("message_start", '{"type": "message_start", "text": "hé"}'),
    ServerSentEvent("", "first line\nsecond line"),
    ServerSentEvent("", "[DONE]"),
]


async def _chunks(parts: Sequence[bytes]) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


def events(parts: Sequence[bytes]) -> list[ServerSentEvent]:
    async def collect() -> list[ServerSentEvent]:
        return [event async for event in server_sent_events(_chunks(parts))]

    return asyncio.run(collect())


@pytest.mark.parametrize("ending", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
def test_events_are_read_with_every_line_ending(ending: bytes) -> None:
    assert events([BODY.replace(b"\n", ending)]) == EXPECTED


@pytest.mark.parametrize("ending", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
def test_events_split_at_any_byte_read_the_same(ending: bytes) -> None:
    body = BODY.replace(b"\n", ending)
    for cut in range(1, len(body)):
        assert events([body[:cut], body[cut:]]) == EXPECTED, f"split at byte {cut}"
    assert events([body[i : i + 1] for i in range(len(body))]) == EXPECTED


def test_a_comment_or_a_nameless_blank_line_dispatches_nothing() -> None:
    assert events([b": ping\n\n\n: more\n\n"]) == []


def test_an_event_name_does_not_leak_into_the_next_event() -> None:
    assert events([b"event: a\ndata: 1\n\ndata: 2\n\n"]) == [
        ServerSentEvent("a", "1"),
        ServerSentEvent("", "2"),
    ]


def test_an_event_cut_off_by_the_end_of_the_body_is_dropped() -> None:
    assert events([b"data: whole\n\ndata: cut"]) == [ServerSentEvent("", "whole")]
    assert events([b"data: whole\n\ndata: cut\n"]) == [ServerSentEvent("", "whole")]
    assert events([b"data: whole\r\rdata: cut\r"]) == [ServerSentEvent("", "whole")]


def test_a_body_ending_in_a_blank_line_made_of_a_lone_cr_dispatches() -> None:
    assert events([b"data: last\r", b"\r"]) == [ServerSentEvent("", "last")]
