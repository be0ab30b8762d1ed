"""OpenAI Chat Completions provider (official `openai` SDK, tools, streaming or not).

Works with any OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio) through
`OPENAI_BASE_URL` or an explicit `base_url`.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import AsyncIterator, Sequence
from functools import partial
from typing import Any

import openai

from ..core.messages import ImagePart, Message, ModelRequest, ModelResponse, ToolCall, Usage
from ..core.ports import ProviderError, ProviderEvent, ResponseDone, TextDelta
from .common import WireMemo, prebuilt_body, tool_arguments_json, within_deadline
from .errors import OPENAI_KEY_ENV, incomplete_stream, map_sdk_error, missing_credentials
from .fenced import apply_fenced_fallback

VENDOR = "OpenAI-compatible API"
_SDK_KEYS = ("model",)  # the rest of the body is sent as built (see prebuilt_body)
_POST_TAKES_CONTENT = "content" in inspect.signature(openai.AsyncOpenAI.post).parameters

_FINISH_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


class OpenAIProvider:
    name = "openai"

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
                raise missing_credentials(VENDOR, OPENAI_KEY_ENV)
            raise ProviderError(f"{VENDOR} client setup failed: {self._setup_problem}")
        client = self._client
        params = build_params(request, self.model, official=_is_official(client), memo=self._memo)
        async for event in within_deadline(self._call(client, params), self.timeout, VENDOR):
            yield event

    async def _call(
        self, client: openai.AsyncOpenAI, params: dict[str, Any]
    ) -> AsyncIterator[ProviderEvent]:
        try:
            if self.streaming:
                async for event in self._stream(client, params):
                    yield event
            else:
                completion = await self._create(client, params, stream=False)
                response = response_from_completion(
                    completion, self.model, fenced_code=self.fenced_code
                )
                if response.text:
                    yield TextDelta(response.text)
                yield ResponseDone(response)
        except ProviderError:
            raise
        except Exception as exc:
            raise map_sdk_error(
                exc, vendor=VENDOR, key_env=OPENAI_KEY_ENV, secrets=(client.api_key,)
            ) from exc

    async def _create(
        self, client: openai.AsyncOpenAI, params: dict[str, Any], *, stream: bool
    ) -> Any:
        """`chat.completions.create` with the body sent as the JSON we built (each message
        encoded once, see WireMemo.json_body), through the SDK's own `post`: auth, base URL,
        timeouts, streaming and error types stay the SDK's. An older SDK without raw content
        gets the history in `extra_body`, past its per-call type walk (see prebuilt_body)."""
        extra = {"stream": True, "stream_options": {"include_usage": True}} if stream else {}
        if not _POST_TAKES_CONTENT:
            return await client.chat.completions.create(
                **prebuilt_body(params, sdk_keys=_SDK_KEYS), **extra
            )
        return await client.post(
            "/chat/completions",
            cast_to=openai.types.chat.ChatCompletion,
            content=self._memo.json_body({**params, **extra}),
            options={"headers": {"Content-Type": "application/json"}},
            stream=stream,
            stream_cls=openai.AsyncStream[openai.types.chat.ChatCompletionChunk],
        )

    async def _stream(
        self, client: openai.AsyncOpenAI, params: dict[str, Any]
    ) -> AsyncIterator[ProviderEvent]:
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}  # tool call index -> call being assembled
        usage = Usage()
        model = self.model
        finish: str | None = None
        chunks = await self._create(client, params, stream=True)
        try:
            async for chunk in chunks:
                # Fields a compatible server leaves out are None (the SDK does not validate).
                model = chunk.model or model
                if chunk.usage is not None:
                    usage = _usage(chunk.usage)
                for choice in chunk.choices or ():
                    delta = choice.delta
                    if choice.index not in (0, None) or delta is None:
                        continue
                    piece = (delta.content or "") + (delta.refusal or "")
                    if piece:
                        text.append(piece)
                        yield TextDelta(piece)
                    for call in delta.tool_calls or ():
                        # Servers that send whole calls may leave out the index.
                        index = call.index if call.index is not None else len(calls)
                        slot = calls.setdefault(index, {"id": None, "name": "", "parts": []})
                        if call.id and not slot["id"]:
                            slot["id"] = call.id
                        if call.function is not None:
                            if call.function.name and not slot["name"]:
                                slot["name"] = call.function.name
                            if call.function.arguments:
                                slot["parts"].append(call.function.arguments)
                    if choice.finish_reason:
                        finish = choice.finish_reason
        finally:
            await chunks.close()
        if finish is None:
            raise incomplete_stream(VENDOR)
        tool_calls = [
            ToolCall(
                id=slot["id"] or _synthetic_id(),
                name=slot["name"],
                arguments="".join(slot["parts"]),
            )
            for _, slot in sorted(calls.items())
        ]
        response = ModelResponse(
            text="".join(text),
            tool_calls=tool_calls,
            usage=usage,
            stop_reason=_stop_reason(finish, bool(tool_calls)),
            model=model,
        )
        yield ResponseDone(
            apply_fenced_fallback(response, id_prefix="call_", enabled=self.fenced_code)
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
    completion: Any, default_model: str, *, fenced_code: bool = False
) -> ModelResponse:
    text = ""
    calls: list[ToolCall] = []
    finish: str | None = None
    if completion.choices:
        choice = completion.choices[0]
        finish = choice.finish_reason
        message = choice.message
        text = (message.content or "") + (message.refusal or "")
        for call in message.tool_calls or ():
            function = getattr(call, "function", None)
            if function is None:  # custom (non-function) tools are never declared here
                continue
            calls.append(
                ToolCall(
                    id=call.id or _synthetic_id(),
                    name=function.name,
                    arguments=function.arguments or "",
                )
            )
    response = ModelResponse(
        text=text,
        tool_calls=calls,
        usage=_usage(completion.usage) if completion.usage is not None else Usage(),
        stop_reason=_stop_reason(finish, bool(calls)),
        model=completion.model or default_model,
    )
    return apply_fenced_fallback(response, id_prefix="call_", enabled=fenced_code)


def _usage(reported: Any) -> Usage:
    details = reported.prompt_tokens_details
    cached = (details.cached_tokens or 0) if details is not None else 0
    written = (details.cache_write_tokens or 0) if details is not None else 0
    # Like Anthropic's `input_tokens`, count only the prompt tokens not read from cache.
    return Usage(
        input_tokens=max(0, (reported.prompt_tokens or 0) - cached),
        output_tokens=reported.completion_tokens or 0,
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
