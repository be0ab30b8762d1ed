"""OpenAI Chat Completions provider (official `openai` SDK, tools, streaming or not).

Works with any OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio) through
`OPENAI_BASE_URL` or an explicit `base_url`.
"""

from __future__ import annotations

import inspect
import json
import uuid
from collections.abc import AsyncIterator, Sequence
from functools import partial
from typing import Any

import httpx2
import openai

from ..core.messages import ImagePart, Message, ModelRequest, ModelResponse, ToolCall, Usage
from ..core.ports import ErrorMapping, ProviderError, ProviderEvent, ResponseDone, TextDelta
from .common import WireMemo, tool_arguments_json, within_deadline
from .errors import (
    answer_json,
    map_sdk_error,
    missing_credentials,
    refuse_a_page,
    stream_error,
    unfinished_stream,
)
from .fenced import apply_fenced_fallback
from .sse import drain, server_sent_events

_POST_TAKES_CONTENT = "content" in inspect.signature(openai.AsyncOpenAI.post).parameters

_STREAM_FIELDS = {"stream": True, "stream_options": {"include_usage": True}}

_FINISH_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


class OpenAIProvider:
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
        base_url: str | None = None,
        fenced_code: bool = False,
    ) -> None:
        self.name = name
        self.model = model
        self._errors = errors
        self.streaming = stream
        self.timeout = timeout
        self.fenced_code = fenced_code
        self._client: openai.AsyncOpenAI | None = None
        self._setup_problem = ""
        self._memo = WireMemo()
        try:
            self._client = openai.AsyncOpenAI(
                api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0
            )
        except openai.OpenAIError as exc:
            # The SDK refuses to build a client without a key; that is reported on each call
            # instead, so a server can start and show the problem in the chat.
            self._setup_problem = str(exc)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        if self._client is None:
            if "credentials" in self._setup_problem.lower():
                raise missing_credentials(self._errors)
            raise ProviderError(f"{self._errors.vendor} client setup failed: {self._setup_problem}")
        client = self._client
        params = build_params(request, self.model, official=_is_official(client), memo=self._memo)
        async for event in within_deadline(
            self._call(client, params), self.timeout, self._errors.vendor
        ):
            yield event

    async def _call(
        self, client: openai.AsyncOpenAI, params: dict[str, Any]
    ) -> AsyncIterator[ProviderEvent]:
        try:
            if self.streaming:
                async for event in self._stream(client, params):
                    yield event
            else:
                answer = await self._post(client, params, stream=False)
                body = answer_json(answer, self._errors)
                response = response_from_completion(body, self.model, fenced_code=self.fenced_code)
                if response.text:
                    yield TextDelta(response.text)
                yield ResponseDone(response)
        except ProviderError:
            raise
        except Exception as exc:
            raise map_sdk_error(exc, self._errors, (client.api_key,)) from exc

    async def _post(
        self, client: openai.AsyncOpenAI, params: dict[str, Any], *, stream: bool
    ) -> httpx2.Response:
        """`POST /chat/completions` through the SDK's own `post` (auth, base URL, headers,
        timeouts, the connection and the error for a bad status stay the SDK's), with the body
        sent as the JSON we built (each message encoded once, see WireMemo.json_body) and the
        raw response handed back: we read its JSON or its events as plain dicts (see sse.py)."""
        body = {**params, **_STREAM_FIELDS} if stream else params
        if not _POST_TAKES_CONTENT:  # an older SDK: it encodes the body itself, still no walk
            return await client.post(
                "/chat/completions", cast_to=httpx2.Response, body=body, stream=stream
            )
        return await client.post(
            "/chat/completions",
            cast_to=httpx2.Response,
            content=self._memo.json_body(body),
            options={"headers": {"Content-Type": "application/json"}},
            stream=stream,
        )

    async def _stream(
        self, client: openai.AsyncOpenAI, params: dict[str, Any]
    ) -> AsyncIterator[ProviderEvent]:
        completion = _StreamedCompletion(self.model)
        answer = await self._post(client, params, stream=True)
        chunks = answer.aiter_bytes()
        seen = False
        try:
            refuse_a_page(answer, self._errors)
            async for event in server_sent_events(chunks):
                seen = True
                if event.data.startswith("[DONE]"):
                    await drain(chunks)
                    break
                chunk = json.loads(event.data)
                if not isinstance(chunk, dict):
                    continue
                if chunk.get("error"):
                    raise stream_error(chunk, self._errors, (client.api_key,))
                for piece in completion.add(chunk):
                    yield TextDelta(piece)
        finally:
            await answer.aclose()
        if completion.finish is None:
            raise unfinished_stream(answer, seen, self._errors)
        yield ResponseDone(
            apply_fenced_fallback(
                completion.response(), id_prefix="call_", enabled=self.fenced_code
            )
        )


class _StreamedCompletion:
    """A Chat Completions answer assembled from its streamed chunks (JSON as dicts). Fields a
    compatible server leaves out read as None, as they would in the SDK's own models."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}  # tool call index -> call being assembled
        self.usage = Usage()
        self.finish: str | None = None

    def add(self, chunk: dict[str, Any]) -> list[str]:
        """Take one chunk; the text pieces it adds to the answer."""
        self.model = chunk.get("model") or self.model
        if isinstance(chunk.get("usage"), dict):
            self.usage = _usage(chunk["usage"])
        pieces: list[str] = []
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta")
            if choice.get("index") not in (0, None) or not isinstance(delta, dict):
                continue
            piece = (delta.get("content") or "") + (delta.get("refusal") or "")
            if piece:
                self.text.append(piece)
                pieces.append(piece)
            for call in delta.get("tool_calls") or ():
                self._add_call_delta(call)
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]
        return pieces

    def _add_call_delta(self, call: dict[str, Any]) -> None:
        # Servers that send whole calls may leave out the index.
        index = call.get("index")
        slot = self.calls.setdefault(
            index if index is not None else len(self.calls), {"id": None, "name": "", "parts": []}
        )
        if call.get("id") and not slot["id"]:
            slot["id"] = call["id"]
        function = call.get("function")
        if isinstance(function, dict):
            if function.get("name") and not slot["name"]:
                slot["name"] = function["name"]
            if function.get("arguments"):
                slot["parts"].append(function["arguments"])

    def response(self) -> ModelResponse:
        tool_calls = [
            ToolCall(
                id=slot["id"] or _synthetic_id(),
                name=slot["name"],
                arguments="".join(slot["parts"]),
            )
            for _, slot in sorted(self.calls.items())
        ]
        return ModelResponse(
            text="".join(self.text),
            tool_calls=tool_calls,
            usage=self.usage,
            stop_reason=_stop_reason(self.finish, bool(tool_calls)),
            model=self.model,
        )


def build_params(
    request: ModelRequest, model: str, *, official: bool = False, memo: WireMemo | None = None
) -> dict[str, Any]:
    params: dict[str, Any] = {
        "model": model,
        "messages": to_wire_messages(
            request.system, request.messages, accepts_images=request.accepts_images, memo=memo
        ),
    }
    # api.openai.com's newer models reject `max_tokens`; many compatible servers only know it.
    params["max_completion_tokens" if official else "max_tokens"] = request.max_tokens
    if request.tools:
        params["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in request.tools
        ]
    return params


def to_wire_messages(
    system: str,
    messages: Sequence[Message],
    *,
    accepts_images: bool = True,
    memo: WireMemo | None = None,
) -> list[dict[str, Any]]:
    """Neutral messages -> Chat Completions `messages`.

    Tool results are `role: "tool"` messages, which must directly follow the assistant message that
    made the calls, so their images go into one user message after the whole run of results.
    """
    memo = memo or WireMemo()
    start, wire, images = memo.resume(messages)  # only what is new since the last call
    for message in messages[start:]:
        if message.role != "tool" and images:
            wire.append(_images_message(images))
            images = []
        entry = memo.get(message, partial(_wire_entry, message))
        if entry is None:
            continue
        wire.append(entry)
        if message.role == "tool" and accepts_images:
            images.extend((message.tool_call_id or "", image) for image in message.images)
    memo.remember(messages, wire, images)
    memo.keep_only(messages)
    head = [{"role": "system", "content": system}] if system else []
    return [*head, *wire, *([_images_message(images)] if images else [])]


def _wire_entry(message: Message) -> dict[str, Any] | None:
    if message.role == "user":
        return {"role": "user", "content": message.text}
    if message.role == "assistant":
        if not message.text and not message.tool_calls:
            return None
        entry: dict[str, Any] = {"role": "assistant", "content": message.text or None}
        if message.tool_calls:
            entry["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": tool_arguments_json(call.arguments),
                    },
                }
                for call in message.tool_calls
            ]
        return entry
    return {"role": "tool", "tool_call_id": message.tool_call_id or "", "content": message.text}


def _images_message(images: list[tuple[str, ImagePart]]) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for call_id, image in images:
        content.append({"type": "text", "text": f"Image output of tool call {call_id}:"})
        url = f"data:{image.media_type};base64,{image.data_base64}"
        content.append({"type": "image_url", "image_url": {"url": url}})
    return {"role": "user", "content": content}


def response_from_completion(
    completion: dict[str, Any], default_model: str, *, fenced_code: bool = False
) -> ModelResponse:
    """A Chat Completions response body (JSON as dicts) -> ModelResponse."""
    text = ""
    calls: list[ToolCall] = []
    finish: str | None = None
    choices = completion.get("choices") or []
    if choices:
        choice = choices[0]
        finish = choice.get("finish_reason")
        message = choice.get("message") or {}
        text = (message.get("content") or "") + (message.get("refusal") or "")
        for call in message.get("tool_calls") or ():
            function = call.get("function")
            if not isinstance(function, dict):  # custom (non-function) tools are never declared
                continue
            calls.append(
                ToolCall(
                    id=call.get("id") or _synthetic_id(),
                    name=function.get("name") or "",
                    arguments=function.get("arguments") or "",
                )
            )
    usage = completion.get("usage")
    response = ModelResponse(
        text=text,
        tool_calls=calls,
        usage=_usage(usage) if isinstance(usage, dict) else Usage(),
        stop_reason=_stop_reason(finish, bool(calls)),
        model=completion.get("model") or default_model,
    )
    return apply_fenced_fallback(response, id_prefix="call_", enabled=fenced_code)


def _usage(reported: dict[str, Any]) -> Usage:
    details = reported.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens") or 0
    written = details.get("cache_write_tokens") or 0
    # Like Anthropic's `input_tokens`, count only the prompt tokens not read from cache.
    return Usage(
        input_tokens=max(0, (reported.get("prompt_tokens") or 0) - cached),
        output_tokens=reported.get("completion_tokens") or 0,
        cache_read_tokens=cached,
        cache_write_tokens=written,
    )


def _stop_reason(finish: str | None, has_calls: bool) -> str:
    if has_calls:
        return "tool_use"
    return _FINISH_REASONS.get(finish or "stop", finish or "end_turn")


def _synthetic_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def _is_official(client: openai.AsyncOpenAI) -> bool:
    return client.base_url.host == "api.openai.com"
