"""Anthropic Messages API provider (official `anthropic` SDK, tool use, streaming or not)."""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Sequence
from functools import partial
from typing import Any

import anthropic
import httpx2

from ..core.messages import Message, ModelRequest, ModelResponse, ToolCall, Usage
from ..core.ports import ErrorMapping, ProviderError, ProviderEvent, ResponseDone, TextDelta
from .common import WireMemo, tool_input, within_deadline
from .errors import (
    answer_json,
    map_sdk_error,
    refuse_a_page,
    stream_error,
    unfinished_stream,
)
from .fenced import apply_fenced_fallback
from .sse import server_sent_events

_EPHEMERAL = {"type": "ephemeral"}


class AnthropicProvider:
    """`name` and `errors` come from the provider's declaration (providers/builtin.py)."""

    def __init__(
        self,
        model: str,
        *,
        name: str,
        errors: ErrorMapping,
        stream: bool = True,
        timeout: float = 600.0,
        api_key: str | None = None,
        auth_token: str | None = None,
        base_url: str | None = None,
        fenced_code: bool = False,
    ) -> None:
        self.name = name
        self.model = model
        self._errors = errors
        self.streaming = stream
        self.timeout = timeout
        self.fenced_code = fenced_code
        self._client: anthropic.AsyncAnthropic | None = None
        self._memo = WireMemo()
        self._setup_problem = ""
        try:
            # The SDK reads ANTHROPIC_API_KEY / ANTHROPIC_AUTH_TOKEN / ANTHROPIC_BASE_URL itself
            # when these are None; it takes one credential argument at most.
            credential = {"api_key": api_key} if api_key else {"auth_token": auth_token}
            self._client = anthropic.AsyncAnthropic(
                **credential, base_url=base_url, timeout=timeout, max_retries=0
            )
        except anthropic.AnthropicError as exc:
            # E.g. no key and an unreadable credentials profile. Reported by each call instead,
            # so a server can start and show the problem in the chat.
            self._setup_problem = str(exc)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        if self._client is None:
            raise ProviderError(
                f"{self._errors.vendor} client setup failed ({self._setup_problem}); set the "
                f"{self._errors.key_variable} environment variable or pass an API key.",
                kind="auth",
            )
        params = build_params(request, self.model, self._memo)
        async for event in within_deadline(
            self._call(self._client, params), self.timeout, self._errors.vendor
        ):
            yield event

    async def _call(
        self, client: anthropic.AsyncAnthropic, params: dict[str, Any]
    ) -> AsyncIterator[ProviderEvent]:
        try:
            if self.streaming:
                async for event in self._stream(client, params):
                    yield event
            else:
                answer = await _post(client, params, self._memo, stream=False)
                body = answer_json(answer, self._errors)
                response = response_from_message(body, self.model, fenced_code=self.fenced_code)
                if response.text:
                    yield TextDelta(response.text)
                yield ResponseDone(response)
        except ProviderError:
            raise
        except Exception as exc:
            raise map_sdk_error(exc, self._errors, _secrets(client)) from exc

    async def _stream(
        self, client: anthropic.AsyncAnthropic, params: dict[str, Any]
    ) -> AsyncIterator[ProviderEvent]:
        message = _StreamedMessage(self.model)
        answer = await _post(client, params, self._memo, stream=True)
        seen = False
        try:
            refuse_a_page(answer, self._errors)
            async for sse in server_sent_events(answer.aiter_bytes()):
                seen = True
                if sse.event not in _STREAM_EVENTS:
                    continue  # ping, and event types newer than this code
                event = json.loads(sse.data)
                if sse.event == "error":
                    raise stream_error(event, self._errors, _secrets(client))
                piece = message.add(sse.event, event) if isinstance(event, dict) else None
                if piece:
                    yield TextDelta(piece)
        finally:
            await answer.aclose()
        if not message.finished:
            raise unfinished_stream(answer, seen, self._errors)
        yield ResponseDone(
            apply_fenced_fallback(message.response(), id_prefix="toolu_", enabled=self.fenced_code)
        )


class _StreamedMessage:
    """A Messages API answer assembled from its streamed events (JSON as dicts)."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.text: list[str] = []
        self.tools: dict[int, dict[str, Any]] = {}  # content block index -> tool_use so far
        self.usage = Usage()
        self.stop_reason: str | None = None
        self.finished = False

    def add(self, kind: str, event: dict[str, Any]) -> str | None:
        """Take one event; the text it adds to the answer, if any."""
        if kind == "message_start":
            message = event.get("message") or {}
            self.model = message.get("model") or self.model
            _merge_usage(self.usage, message.get("usage"))
        elif kind == "content_block_start":
            return self._start_block(event.get("index"), event.get("content_block") or {})
        elif kind == "content_block_delta":
            return self._extend_block(event.get("index"), event.get("delta") or {})
        elif kind == "message_delta":
            self.stop_reason = (event.get("delta") or {}).get("stop_reason") or self.stop_reason
            _merge_usage(self.usage, event.get("usage"))
        elif kind == "message_stop":
            self.finished = True
        return None

    def _start_block(self, index: Any, block: dict[str, Any]) -> str | None:
        if block.get("type") == "text" and block.get("text"):
            self.text.append(block["text"])
            return block["text"]
        if block.get("type") == "tool_use":
            self.tools[index] = {
                "id": block.get("id"),
                "name": block.get("name"),
                "input": block.get("input"),
                "parts": [],
            }
        return None

    def _extend_block(self, index: Any, delta: dict[str, Any]) -> str | None:
        if delta.get("type") == "text_delta" and delta.get("text"):
            self.text.append(delta["text"])
            return delta["text"]
        if delta.get("type") == "input_json_delta" and index in self.tools:
            self.tools[index]["parts"].append(delta.get("partial_json") or "")
        return None

    def response(self) -> ModelResponse:
        calls = []
        for index in sorted(self.tools):
            tool = self.tools[index]
            # The raw JSON text is kept even when malformed: the loop reports it to the model.
            arguments = "".join(tool["parts"]) or json.dumps(tool["input"] or {})
            calls.append(ToolCall(id=tool["id"], name=tool["name"], arguments=arguments))
        return ModelResponse(
            text="".join(self.text),
            tool_calls=calls,
            usage=self.usage,
            stop_reason=self.stop_reason or ("tool_use" if calls else "end_turn"),
            model=self.model,
        )


_POST_TAKES_CONTENT = "content" in inspect.signature(anthropic.AsyncAnthropic.post).parameters
_STREAM_EVENTS = frozenset(
    {
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
        "error",
    }
)


async def _post(
    client: anthropic.AsyncAnthropic, params: dict[str, Any], memo: WireMemo, *, stream: bool
) -> httpx2.Response:
    """`POST /v1/messages` through the SDK's own `post`, the raw response handed back.

    The SDK copies every message of a `messages.create` request into fresh containers on each
    call (to drop `NotGiven`s and read file inputs), a cost that grows with the conversation, and
    builds a pydantic model for each streamed event. Our body is plain JSON already, sent as the
    encoded bytes (each message encoded once), and we read the answer's JSON or events as plain
    dicts (see sse.py). Auth, base URL, headers, timeouts, the connection and the error for a bad
    status stay the SDK's.
    """
    body = {**params, "stream": True} if stream else params
    if not _POST_TAKES_CONTENT:  # an older SDK: it encodes the body itself, still no copy
        return await client.post("/v1/messages", cast_to=httpx2.Response, body=body, stream=stream)
    return await client.post(
        "/v1/messages",
        cast_to=httpx2.Response,
        content=memo.json_body(body),
        options={"headers": {"Content-Type": "application/json"}},
        stream=stream,
    )


def _secrets(client: anthropic.AsyncAnthropic) -> tuple[str | None, ...]:
    return (client.api_key, client.auth_token)


def build_params(request: ModelRequest, model: str, memo: WireMemo | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_tokens,
        "messages": to_wire_messages(
            request.messages, accepts_images=request.accepts_images, memo=memo
        ),
    }
    if request.system:
        # Cache breakpoints on the system prompt (covering tools + system) and on the newest
        # message: each agent step resends the whole history, so the prefix is read from cache.
        params["system"] = [{"type": "text", "text": request.system, "cache_control": _EPHEMERAL}]
    if request.tools:
        params["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in request.tools
        ]
    return params


def to_wire_messages(
    messages: Sequence[Message], *, accepts_images: bool = True, memo: WireMemo | None = None
) -> list[dict[str, Any]]:
    """Neutral messages -> Messages API `messages`.

    Tool results become `tool_result` blocks in a user message; consecutive messages that land in
    the same role are merged, which keeps user/assistant alternation valid.
    """
    memo = memo or WireMemo()
    start, wire, _ = memo.resume(messages)  # only what is new since the last call is converted
    for message in messages[start:]:
        role = "assistant" if message.role == "assistant" else "user"
        blocks = memo.get(message, partial(_blocks, message, accepts_images))
        if not blocks:
            continue
        if wire and wire[-1]["role"] == role:  # a new entry: earlier ones are shared
            wire[-1] = {"role": role, "content": [*wire[-1]["content"], *blocks]}
        else:
            wire.append({"role": role, "content": list(blocks)})
    memo.remember(messages, wire)
    memo.keep_only(messages)
    if not wire:
        return wire
    # A cache breakpoint on the newest block, on copies: entries and blocks are shared.
    last = wire[-1]
    content = [*last["content"][:-1], {**last["content"][-1], "cache_control": _EPHEMERAL}]
    return [*wire[:-1], {"role": last["role"], "content": content}]


def _blocks(message: Message, accepts_images: bool) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if message.role == "tool":
        content: list[dict[str, Any]] = []
        if message.text:
            content.append({"type": "text", "text": message.text})
        if accepts_images:
            content.extend(
                {
                    "type": "image",
                    "source": {
                        "type": "base64",
                        "media_type": image.media_type,
                        "data": image.data_base64,
                    },
                }
                for image in message.images
            )
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id or ""}
        if content:
            result["content"] = content
        blocks.append(result)
        return blocks
    if message.text:
        blocks.append({"type": "text", "text": message.text})
    if message.role == "assistant":
        blocks.extend(
            {
                "type": "tool_use",
                "id": call.id,
                "name": call.name,
                "input": tool_input(call.arguments),
            }
            for call in message.tool_calls
        )
    return blocks


def response_from_message(
    message: dict[str, Any], default_model: str, *, fenced_code: bool = False
) -> ModelResponse:
    """A Messages API response body (JSON as dicts) -> ModelResponse."""
    text: list[str] = []
    calls: list[ToolCall] = []
    for block in message.get("content") or ():
        if block.get("type") == "text":
            text.append(block.get("text") or "")
        elif block.get("type") == "tool_use":
            calls.append(
                ToolCall(
                    id=block.get("id") or "",
                    name=block.get("name") or "",
                    arguments=json.dumps(block.get("input") or {}),
                )
            )
    usage = Usage()
    _merge_usage(usage, message.get("usage"))
    response = ModelResponse(
        text="".join(text),
        tool_calls=calls,
        usage=usage,
        stop_reason=message.get("stop_reason") or ("tool_use" if calls else "end_turn"),
        model=message.get("model") or default_model,
    )
    return apply_fenced_fallback(response, id_prefix="toolu_", enabled=fenced_code)


def _merge_usage(usage: Usage, reported: Any) -> None:
    """Apply a reported usage object; streamed counts are cumulative, so later values replace."""
    if not isinstance(reported, dict):
        return
    if reported.get("input_tokens") is not None:
        usage.input_tokens = reported["input_tokens"]
    if reported.get("output_tokens") is not None:
        usage.output_tokens = reported["output_tokens"]
    if reported.get("cache_read_input_tokens") is not None:
        usage.cache_read_tokens = reported["cache_read_input_tokens"]
    if reported.get("cache_creation_input_tokens") is not None:
        usage.cache_write_tokens = reported["cache_creation_input_tokens"]
