"""Small helpers shared by the SDK-based providers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, TypeVar, cast

from ..core.jsonfile import parse_json
from ..core.ports import ProviderError

T = TypeVar("T")


async def within_deadline(
    events: AsyncIterator[T], seconds: float, vendor: str
) -> AsyncIterator[T]:
    """`events`, ended by a ProviderError of kind `timeout` once the whole call took `seconds`.

    The SDK's own timeout bounds each read only, so a server that keeps sending SSE keepalives
    would hold a turn forever. The deadline covers only the waits for the next event, never the
    consumer's work between events. If nothing arrived at all it is a plain timeout, retryable
    like the SDK's; once the answer had started, it is not retryable: a retry would most likely
    run into the same wall, and the message says which setting to raise.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    started = False
    try:
        while True:
            try:
                async with asyncio.timeout_at(deadline) as scope:
                    event = await anext(events)
            except StopAsyncIteration:
                return
            except TimeoutError:
                if not scope.expired():
                    raise
                raise _deadline_error(vendor, seconds, started) from None
            started = True
            yield event
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()


def _deadline_error(vendor: str, seconds: float, started: bool) -> ProviderError:
    if not started:
        return ProviderError(
            f"{vendor} did not start answering within {seconds:g} s, the limit of a whole model "
            "call",
            kind="timeout",
            retryable=True,
            setting="request_timeout",
        )
    return ProviderError(
        f"{vendor} did not finish its answer within {seconds:g} s, the limit of a whole model "
        "call; the call was abandoned",
        kind="timeout",
        setting="request_timeout",
    )


def tool_input(arguments: str) -> dict[str, Any]:
    """The tool-call arguments as a JSON object for the wire.

    The model's raw arguments are kept verbatim in history. When they are not a JSON object the
    vendor would reject the whole conversation, so they are resent as `{"code": <raw string>}`,
    which is also what the model most likely meant.
    """
    try:
        value = parse_json(arguments)
    except (TypeError, ValueError):
        return {"code": arguments}
    return value if isinstance(value, dict) else {"code": arguments}


def tool_arguments_json(arguments: str) -> str:
    """`tool_input` serialised again, for wire formats that carry arguments as a string."""
    try:
        value = parse_json(arguments)
    except (TypeError, ValueError):
        return json.dumps({"code": arguments})
    return arguments if isinstance(value, dict) else json.dumps({"code": arguments})


W = TypeVar("W")


class WireMemo:
    """Each message's wire form, built once per message object.

    The context the loop hands over is extended call by call with the same `Message` objects, so
    converting only the new ones keeps a model call's cost flat as the conversation grows. A value
    is shared between requests: callers never mutate it.
    """

    def __init__(self) -> None:
        self._memo: dict[int, tuple[object, Any]] = {}
        self._last: tuple[list[object], list[Any], list[Any]] = ([], [], [])
        self._encoded = _EncodedHistory()

    def resume(self, messages: Sequence[object]) -> tuple[int, list[Any], list[Any]]:
        """How many of `messages` the previous call converted, its wire list and what it carried
        over (copies to extend). The loop's context only grows between calls, with the same
        objects; anything else (a branch, a new session) starts from zero."""
        previous, wire, carry = self._last
        count = len(previous)
        extends = count and len(messages) >= count and messages[count - 1] is previous[-1]
        if extends and messages[0] is previous[0]:
            return count, list(wire), list(carry)
        return 0, [], []

    def remember(
        self, messages: Sequence[object], wire: list[Any], carry: Sequence[Any] = ()
    ) -> None:
        """The wire list for `messages` (its entries must never be changed afterwards) and what
        a converter carries to the next message (such as images waiting for their message)."""
        self._last = (list(messages), list(wire), list(carry))

    def get(self, message: object, build: Callable[[], W]) -> W:
        hit = self._memo.get(id(message))
        if hit is not None and hit[0] is message:
            return cast(W, hit[1])
        value = build()
        self._memo[id(message)] = (message, value)
        return value

    def keep_only(self, live: Sequence[object]) -> None:
        """Forget messages no longer in the conversation (after a branch or a new session)."""
        if len(self._memo) > 2 * len(live) + 64:
            ids = {id(m) for m in live}
            self._memo = {k: v for k, v in self._memo.items() if k in ids}

    def json_body(self, params: dict[str, Any]) -> bytes:
        """`params` as JSON, each wire message encoded once and the encoded history joined
        incrementally: the entries a call shares with the previous one (all of them, or all
        but the last, which a vendor may mark differently per call) are reused as one string."""
        messages = params.get("messages", [])
        shared = self._encoded.shared_prefix(messages)
        history = self._encoded.extend(shared, messages)
        rest = json.dumps({k: v for k, v in params.items() if k != "messages"})
        joined = '"messages": [' + history + "]"
        body = "{" + joined + "}" if rest == "{}" else rest[:-1] + ", " + joined + "}"
        return body.encode()


class _EncodedHistory:
    """The JSON text of the wire entries of the previous request, kept for the next one."""

    def __init__(self) -> None:
        self._entries: list[object] = []
        self._texts: list[str] = []
        self._joined = ""  # all texts, joined with ", "
        self._joined_but_last = ""  # all but the last

    def shared_prefix(self, entries: Sequence[object]) -> int:
        """How many leading `entries` are the very objects of the previous request."""
        count = 0
        for new, old in zip(entries, self._entries, strict=False):
            if new is not old:
                break
            count += 1
        return count

    def extend(self, shared: int, entries: Sequence[object]) -> str:
        """`entries` encoded and joined, reusing the first `shared` texts; remembered."""
        if shared == len(self._texts):
            base = self._joined
        elif shared == len(self._texts) - 1:
            base = self._joined_but_last
        else:  # a different conversation, or an edited one
            base = ", ".join(self._texts[:shared])
        added = [json.dumps(entry) for entry in entries[shared:]]
        if not added:
            joined = base
            self._joined_but_last = ", ".join(self._texts[: shared - 1]) if shared else ""
        else:
            head = base + ", " if base else ""
            self._joined_but_last = head + ", ".join(added[:-1]) if len(added) > 1 else base
            joined = head + ", ".join(added)
        self._entries = list(entries)
        self._texts = self._texts[:shared] + added
        self._joined = joined
        return joined
