"""Anthropic Messages API provider (official `anthropic` SDK, tool use, streaming or not)."""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Sequence
from functools import partial
from typing import Any

import anthropic

from ..core.messages import Message, ModelRequest, ModelResponse, ToolCall, Usage
from ..core.ports import ProviderError, ProviderEvent, ResponseDone, TextDelta
from .common import WireMemo, tool_input, within_deadline
from .errors import ANTHROPIC_KEY_ENV, incomplete_stream, map_sdk_error
from .fenced import apply_fenced_fallback

VENDOR = "Anthropic API"
_EPHEMERAL = {"type": "ephemeral"}


class AnthropicProvider:
    name = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        stream: bool = True,
        timeout: float = 600.0,
        api_key: str | None = None,
        base_url: str | None = None,
        fenced_code: bool = False,
    ) -> None:
        self.model = model
        self.streaming = stream
        self.timeout = timeout
        self.fenced_code = fenced_code
        self._client: anthropic.AsyncAnthropic | None = None
        self._memo = WireMemo()
        self._setup_problem = ""
        try:
            # The SDK reads ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL itself when these are None.
            self._client = anthropic.AsyncAnthropic(
                api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0
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
                f"{VENDOR} client setup failed ({self._setup_problem}); set the "
                f"{ANTHROPIC_KEY_ENV} environment variable or pass an API key.",
                kind="auth",
            )
        params = build_params(request, self.model, self._memo)
        async for event in within_deadline(self._call(self._client, params), self.timeout, VENDOR):
            yield event

    async def _call(
        self, client: anthropic.AsyncAnthropic, params: dict[str, Any]
    ) -> AsyncIterator[ProviderEvent]:
        try:
            if self.streaming:
                async for event in self._stream(client, params):
                    yield event
            else:
                message = await _create(client, params, self._memo, stream=False)
                response = response_from_message(message, self.model, fenced_code=self.fenced_code)
                if response.text:
                    yield TextDelta(response.text)
                yield ResponseDone(response)
        except ProviderError:
            raise
        except Exception as exc:
            secrets = (client.api_key, client.auth_token)
            raise map_sdk_error(
                exc, vendor=VENDOR, key_env=ANTHROPIC_KEY_ENV, secrets=secrets
            ) from exc

    async def _stream(
        self, client: anthropic.AsyncAnthropic, params: dict[str, Any]
    ) -> AsyncIterator[ProviderEvent]:
        text: list[str] = []
        tools: dict[int, dict[str, Any]] = {}  # content block index -> tool_use being assembled
        usage = Usage()
        model = self.model
        stop_reason: str | None = None
        finished = False
        events = await _create(client, params, self._memo, stream=True)
        try:
            async for event in events:
                kind = event.type
                if kind == "message_start":
                    model = event.message.model or model
                    _merge_usage(usage, event.message.usage)
                elif kind == "content_block_start":
                    block = event.content_block
                    if block.type == "text" and block.text:
                        text.append(block.text)
                        yield TextDelta(block.text)
                    elif block.type == "tool_use":
                        tools[event.index] = {
                            "id": block.id,
                            "name": block.name,
                            "input": block.input,
                            "parts": [],
                        }
                elif kind == "content_block_delta":
                    delta = event.delta
                    if delta.type == "text_delta" and delta.text:
                        text.append(delta.text)
                        yield TextDelta(delta.text)
                    elif delta.type == "input_json_delta" and event.index in tools:
                        tools[event.index]["parts"].append(delta.partial_json)
                elif kind == "message_delta":
                    stop_reason = event.delta.stop_reason or stop_reason
                    _merge_usage(usage, event.usage)
                elif kind == "message_stop":
                    finished = True
        finally:
            await events.close()
        if not finished:
            raise incomplete_stream(VENDOR)
        calls = []
        for index in sorted(tools):
            tool = tools[index]
            # The raw JSON text is kept even when malformed: the loop reports it to the model.
            arguments = "".join(tool["parts"]) or json.dumps(tool["input"] or {})
            calls.append(ToolCall(id=tool["id"], name=tool["name"], arguments=arguments))
        response = ModelResponse(
            text="".join(text),
            tool_calls=calls,
            usage=usage,
            stop_reason=stop_reason or ("tool_use" if calls else "end_turn"),
            model=model,
        )
        yield ResponseDone(
            apply_fenced_fallback(response, id_prefix="toolu_", enabled=self.fenced_code)
        )


_POST_TAKES_CONTENT = "content" in inspect.signature(anthropic.AsyncAnthropic.post).parameters


async def _create(
    client: anthropic.AsyncAnthropic, params: dict[str, Any], memo: WireMemo, *, stream: bool
) -> Any:
    """`messages.create`, with the body sent as the JSON we built.

    The SDK copies every message of the request into fresh containers on each call (to drop
    `NotGiven`s and read file inputs), a cost that grows with the conversation. Our body is
    plain JSON already, so where the SDK's `post` takes raw content it gets the encoded bytes:
    auth, base URL, timeouts, streaming and error types stay the SDK's.
    """
    if not _POST_TAKES_CONTENT:  # an older SDK: let it build the body itself
        return await client.messages.create(**params, stream=stream)
    body = {**params, "stream": True} if stream else params
    return await client.post(
        "/v1/messages",
        cast_to=anthropic.types.Message,
        content=memo.json_body(body),
        options={"headers": {"Content-Type": "application/json"}},
        stream=stream,
        stream_cls=anthropic.AsyncStream[anthropic.types.RawMessageStreamEvent],
    )


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
    message: Any, default_model: str, *, fenced_code: bool = False
) -> ModelResponse:
    text: list[str] = []
    calls: list[ToolCall] = []
    for block in message.content:
        if block.type == "text":
            text.append(block.text)
        elif block.type == "tool_use":
            calls.append(ToolCall(id=block.id, name=block.name, arguments=json.dumps(block.input)))
    usage = Usage()
    _merge_usage(usage, message.usage)
    response = ModelResponse(
        text="".join(text),
        tool_calls=calls,
        usage=usage,
        stop_reason=message.stop_reason or ("tool_use" if calls else "end_turn"),
        model=message.model or default_model,
    )
    return apply_fenced_fallback(response, id_prefix="toolu_", enabled=fenced_code)


def _merge_usage(usage: Usage, reported: Any) -> None:
    """Apply an SDK usage object; streamed counts are cumulative, so later values replace."""
    if reported is None:
        return
    if reported.input_tokens is not None:
        usage.input_tokens = reported.input_tokens
    if reported.output_tokens is not None:
        usage.output_tokens = reported.output_tokens
    if reported.cache_read_input_tokens is not None:
        usage.cache_read_tokens = reported.cache_read_input_tokens
    if reported.cache_creation_input_tokens is not None:
        usage.cache_write_tokens = reported.cache_creation_input_tokens
