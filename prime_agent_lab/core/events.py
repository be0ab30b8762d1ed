"""A per-session event stream: numbered events, a replay buffer, any number of subscribers."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

Event = dict[str, Any]

log = logging.getLogger(__name__)


class EventBus:
    """`seq` increases by one per event and keeps increasing across server restarts: a new bus
    starts from the current time in microseconds, above anything an earlier process could have
    reached, so a client that reconnects with `since=<last seq>` never misses or repeats events."""

    def __init__(self, session_id: str, buffer_size: int = 2000) -> None:
        self.session_id = session_id
        self._seq = time.time_ns() // 1000
        self._buffer: deque[Event] = deque(maxlen=buffer_size)
        self._queues: set[asyncio.Queue[Event]] = set()
        self._listeners: list[Callable[[Event], None]] = []

    @property
    def seq(self) -> int:
        return self._seq

    def emit(self, event_type: str, **fields: Any) -> Event:
        self._seq += 1
        event = {"seq": self._seq, "type": event_type, "session_id": self.session_id, **fields}
        self._buffer.append(event)
        for queue in list(self._queues):
            try:
                queue.put_nowait(event)
            except asyncio.QueueFull:  # a stalled client: drop it rather than grow without end
                self._queues.discard(queue)
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:  # one broken listener must not break the turn that emits
                log.exception("event listener %r failed on a %s event", listener, event_type)
        return event

    def forget_replay(self) -> None:
        """Drop the replay buffer: what it holds no longer describes the session (the leaf
        moved to another branch). A client that (re)connects reads the transcript instead."""
        self._buffer.clear()

    def since(self, seq: int) -> list[Event]:
        return [e for e in self._buffer if e["seq"] > seq]

    def subscribe(self, maxsize: int = 5000) -> asyncio.Queue[Event]:
        """A queue of every new event; it is dropped if it ever holds `maxsize` undelivered."""
        queue: asyncio.Queue[Event] = asyncio.Queue(maxsize)
        self._queues.add(queue)
        return queue

    @property
    def subscribers(self) -> int:
        """Open subscriptions (a chat's websocket holds one)."""
        return len(self._queues)

    def is_subscribed(self, queue: asyncio.Queue[Event]) -> bool:
        return queue in self._queues

    def unsubscribe(self, queue: asyncio.Queue[Event]) -> None:
        self._queues.discard(queue)

    def add_listener(self, listener: Callable[[Event], None]) -> None:
        """Synchronous listeners, called in emit order (the CLI prints with one). A listener that
        raises is logged and skipped; the event still reaches everyone else."""
        self._listeners.append(listener)
