"""Server-sent events read from a streamed HTTP body, for the SDK-based providers.

The vendor SDKs still make the request (auth, base URL, headers, timeouts, the connection and the
error for a bad status); we read the raw body they hand back. Their own stream classes build a
pydantic model for every event, which costs more than the rest of an agent step; the events are
small JSON objects we read as plain dicts instead.

The parsing follows the WHATWG `text/event-stream` rules that matter for model APIs: lines end
in LF, CRLF or CR; `event:` names the event, `data:` lines are joined with LF, a line starting
with `:` is a comment (keepalive), other fields are ignored, and a blank line dispatches the
event if it has data. An event still open when the body ends is dropped, as the spec says.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass

DRAIN_SECONDS = 0.1


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    event: str  # "" when the event named none
    data: str


async def server_sent_events(chunks: AsyncIterable[bytes]) -> AsyncIterator[ServerSentEvent]:
    """The events of a `text/event-stream` body, in order, from its raw (decoded) byte chunks."""
    parser = _EventParser()
    pending = b""
    async for chunk in chunks:
        pending += chunk
        # A CR at the very end may be the first half of a CRLF: wait for the next byte.
        cut = len(pending) - 1 if pending.endswith(b"\r") else len(pending)
        last = max(pending.rfind(b"\n", 0, cut), pending.rfind(b"\r", 0, cut))
        if last < 0:
            continue
        complete, pending = pending[: last + 1], pending[last + 1 :]
        for line in complete.splitlines():
            event = parser.feed(line)
            if event is not None:
                yield event
    if pending.endswith(b"\r"):  # the body's last byte ends a line
        event = parser.feed(pending[:-1])
        if event is not None:
            yield event


async def drain(chunks: AsyncIterator[bytes], seconds: float = DRAIN_SECONDS) -> None:
    """Read what is left of a body after its last event (an answer ends with `data: [DONE]`
    before the body does), for at most `seconds`: a body read to its end lets the HTTP client
    keep the connection for the next call instead of opening a new one."""
    with contextlib.suppress(Exception):  # the answer is complete; a failure here changes nothing
        async with asyncio.timeout(seconds):
            async for _ in chunks:
                pass


class _EventParser:
    __slots__ = ("_data", "_event")

    def __init__(self) -> None:
        self._event = ""
        self._data: list[str] = []

    def feed(self, line: bytes) -> ServerSentEvent | None:
        """Take one line (without its ending); the event a blank line completes, if any."""
        if not line:
            if not self._data:
                self._event = ""
                return None
            event = ServerSentEvent(self._event, "\n".join(self._data))
            self._event, self._data = "", []
            return event
        if line.startswith(b":"):
            return None
        name, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            self._data.append(value.decode("utf-8", "replace"))
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        return None
