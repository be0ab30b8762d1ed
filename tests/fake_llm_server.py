"""A local fake LLM server speaking the Anthropic Messages and OpenAI Chat Completions wire formats.

It runs `http.server` in a daemon thread on 127.0.0.1 (port 0), so sync and async tests, and
separate processes such as a jupyter_server under test, can all reach it::

    with FakeLLMServer() as server:                      # policy defaults to two_step_policy
        AsyncAnthropic(base_url=server.base_url, api_key="k")             # ANTHROPIC_BASE_URL
        AsyncOpenAI(base_url=server.openai_base_url, api_key="k")         # OPENAI_BASE_URL
        ...
        server.requests[-1].body                         # every request received, in order

Routes: `POST /v1/messages` (Anthropic) and `POST /v1/chat/completions` (OpenAI), each as JSON or,
when the body has `"stream": true`, as SSE with the vendor's real event sequence (Anthropic:
message_start, ping, content_block_start/delta/stop with text_delta and input_json_delta,
message_delta with usage, message_stop; OpenAI: `data:` chunks with tool-call deltas split across
chunks, a usage chunk when `stream_options.include_usage` is set, then `data: [DONE]`).

API (all methods thread-safe):

- `FakeLLMServer(policy=two_step_policy, *, api_key=None)`; `start()`/`stop()` or `with`.
  With `api_key` set, requests carrying another key get a vendor-shaped 401 whose message
  echoes the key they sent (as careless servers do), so tests can check that it is redacted.
- `base_url` (`http://127.0.0.1:<port>`), `openai_base_url` (`base_url + "/v1"`).
- `requests: list[RecordedRequest]`, failed ones included; `policy` may be replaced any time.
- `connections`: how many TCP connections the server accepted (a client that keeps its
  connection alive between calls opens one).
  Each carries `arrived` (when its headers were read) and `finished` (when its answer was fully
  written), both `time.perf_counter()` of this process (`finished` is 0.0 until then).
- `fail_next(n=1, status=500, message=None, retry_after=None)`: the next n requests get that
  status with a vendor-shaped error body (and a `retry-after` header if given).
- `cut_next_stream(after_events=2, error_status=None)`: the next streamed reply stops after that
  many SSE events: the connection is dropped, or, with `error_status`, an in-stream error event
  of that kind is sent and the stream ends.
- `page_next(content_type="text/html; charset=utf-8", body=WEB_PAGE)`: the next request gets
  that body with 200, as a web server answers any path (a base URL pointing at a website).
- `delay_next(seconds)`: the next request waits that long before answering (for timeouts).
- `keepalive_next(interval=0.1, after_events=1)`: the next streamed reply sends that many SSE
  events, then only SSE keepalive comments (`: keepalive`) every `interval` seconds until the
  client hangs up: every read succeeds, the response never completes.
- `send_stream_usage = False`: streamed OpenAI replies carry no usage chunk (like some servers).

A policy is `Callable[[RecordedRequest], Reply]`. `Reply(text, calls)` holds the answer text and
the raw JSON argument strings of `python` tool calls (malformed JSON is sent as is, except in a
non-streamed Anthropic reply, whose `input` must be an object: there it becomes
`{"code": <raw>}`); `Reply.code(code, text="")` is the usual one-call reply.

`two_step_policy` checks that observations reach the model: call 1 runs `secret = 7919 * 13`;
call 2 must find `SECRET` (102947) in the tool result and runs `assert secret == 102947;
print('confirmed', 102947 * 2)`; call 3 must find `confirmed 205894` and answers with text that
contains `CONFIRMED` (205894). When the expected output is missing it answers
"OBSERVATION MISSING". Steps count tool results since the last user text message, so the policy
is stateless and several sessions can share one server.

Usage in replies: input tokens = len(json of the messages) // 4, output tokens = len(text and
arguments) // 4; Anthropic replies also report `FAKE_CACHE_READ_TOKENS` cache reads and
`FAKE_CACHE_WRITE_TOKENS` cache writes, OpenAI replies `FAKE_CACHE_READ_TOKENS` cached tokens.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SECRET = 7919 * 13  # 102947
CONFIRMED = SECRET * 2  # 205894
OBSERVATION_MISSING = "OBSERVATION MISSING"
FAKE_CACHE_READ_TOKENS = 11
FAKE_CACHE_WRITE_TOKENS = 5
WEB_PAGE = (
    "<!DOCTYPE html>\n<html><head><title>Welcome</title></head>\n"
    "<body><h1>It works!</h1>\n<p>data: this is a web page, not an API</p></body></html>\n"
)

_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
_OPENAI_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_denied",
    404: "invalid_request_error",
    429: "rate_limit_exceeded",
}


@dataclass(frozen=True)
class Reply:
    text: str = ""
    calls: tuple[str, ...] = ()  # raw JSON arguments, one per `python` tool call

    @classmethod
    def code(cls, code: str, text: str = "") -> Reply:
        return cls(text=text, calls=(json.dumps({"code": code}),))


@dataclass
class RecordedRequest:
    vendor: str  # "anthropic" | "openai"
    path: str
    headers: dict[str, str]  # lower-cased names
    body: dict[str, Any]
    arrived: float = 0.0  # time.perf_counter() when the request's headers were read
    finished: float = 0.0  # time.perf_counter() when the answer was fully written

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", []))

    @property
    def api_key(self) -> str | None:
        if "x-api-key" in self.headers:
            return self.headers["x-api-key"]
        auth = self.headers.get("authorization", "")
        return auth[7:] if auth.lower().startswith("bearer ") else None

    def tool_results(self) -> list[str]:
        """Text of every tool result in the request, oldest first, in either wire format."""
        return [text for _, text in self._walk() if text is not None]

    def turn_tool_results(self) -> list[str]:
        """Tool results after the last user message that has text of its own."""
        results: list[str] = []
        for is_user_text, text in self._walk():
            if is_user_text:
                results = []
            elif text is not None:
                results.append(text)
        return results

    def _walk(self) -> Iterator[tuple[bool, str | None]]:
        """(is a user text message, tool result text or None) for each relevant item."""
        for message in self.messages:
            role, content = message.get("role"), message.get("content")
            if self.vendor == "openai":
                if role == "tool":
                    yield False, _text_of(content)
                elif role == "user" and not _is_image_note(content):
                    yield True, None
                continue
            if role != "user":
                continue
            if isinstance(content, str):
                yield True, None
                continue
            for block in content or []:
                if block.get("type") == "tool_result":
                    yield False, _text_of(block.get("content", ""))
                elif block.get("type") == "text":
                    yield True, None


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(
        part.get("text", "") for part in content or [] if part.get("type") in ("text", None)
    )


def _is_image_note(content: Any) -> bool:
    # The OpenAI provider sends tool-result images as a user message; it is not a user turn.
    return isinstance(content, list) and any(p.get("type") == "image_url" for p in content)


Policy = Callable[[RecordedRequest], Reply]


def two_step_policy(request: RecordedRequest) -> Reply:
    results = request.turn_tool_results()
    if not results:
        return Reply.code(
            "secret = 7919 * 13\nprint(secret)", text="I'll compute the secret in the kernel."
        )
    if len(results) == 1:
        if not re.search(rf"\b{SECRET}\b", results[-1]):
            return Reply(text=OBSERVATION_MISSING)
        return Reply.code(
            f"assert secret == {SECRET}\nprint('confirmed', {SECRET} * 2)",
            text=f"The kernel printed {SECRET}. Let me confirm it.",
        )
    if not re.search(rf"confirmed {CONFIRMED}\b", results[-1]):
        return Reply(text=OBSERVATION_MISSING)
    return Reply(text=f"The secret is {SECRET}; twice the secret, confirmed, is {CONFIRMED}.")


@dataclass
class _Failure:
    status: int
    message: str | None
    retry_after: float | None


@dataclass
class _Page:
    content_type: str
    body: str


@dataclass
class _Cut:
    after_events: int
    error_status: int | None


@dataclass
class _Keepalive:
    interval: float
    after_events: int


@dataclass
class _State:
    failures: list[_Failure | _Page] = field(default_factory=list)
    cuts: list[_Cut] = field(default_factory=list)
    keepalives: list[_Keepalive] = field(default_factory=list)
    delays: list[float] = field(default_factory=list)
    count: int = 0


class FakeLLMServer:
    def __init__(self, policy: Policy = two_step_policy, *, api_key: str | None = None) -> None:
        self.policy = policy
        self.api_key = api_key
        self.send_stream_usage = True
        self.requests: list[RecordedRequest] = []
        self.connections = 0  # TCP connections accepted so far
        self.accepted: list[tuple[float, int]] = []  # (perf_counter, client port) of each
        self._lock = threading.Lock()
        self._state = _State()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------ lifecycle

    def start(self) -> FakeLLMServer:
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        httpd.daemon_threads = True
        httpd.fake = self  # type: ignore[attr-defined]
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, args=(0.02,), name="fake-llm", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.base_url}/v1"

    # ------------------------------------------------------------ fault injection

    def fail_next(
        self,
        n: int = 1,
        status: int = 500,
        message: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        with self._lock:
            self._state.failures.extend(_Failure(status, message, retry_after) for _ in range(n))

    def page_next(self, content_type: str = "text/html; charset=utf-8", body: str = "") -> None:
        with self._lock:
            self._state.failures.append(_Page(content_type, body or WEB_PAGE))

    def cut_next_stream(self, after_events: int = 2, error_status: int | None = None) -> None:
        with self._lock:
            self._state.cuts.append(_Cut(after_events, error_status))

    def keepalive_next(self, interval: float = 0.1, after_events: int = 1) -> None:
        with self._lock:
            self._state.keepalives.append(_Keepalive(interval, after_events))

    def delay_next(self, seconds: float) -> None:
        with self._lock:
            self._state.delays.append(seconds)

    # ------------------------------------------------------------ used by the handler

    def _admit(
        self, recorded: RecordedRequest
    ) -> tuple[int, float, _Failure | _Page | None, _Cut | _Keepalive | None]:
        with self._lock:
            self.requests.append(recorded)
            self._state.count += 1
            delay = self._state.delays.pop(0) if self._state.delays else 0.0
            failure = self._state.failures.pop(0) if self._state.failures else None
            cut: _Cut | _Keepalive | None = None
            if recorded.stream and self._state.keepalives:
                cut = self._state.keepalives.pop(0)
            elif recorded.stream and self._state.cuts:
                cut = self._state.cuts.pop(0)
            return self._state.count, delay, failure, cut


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY, as real API servers do: with Nagle, a reply written in several pieces waits for
    # the client's delayed ACK (40 ms on Linux) once a kept-alive connection leaves quick-ACK mode.
    disable_nagle_algorithm = True
    server: ThreadingHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        fake: FakeLLMServer = self.server.fake  # type: ignore[attr-defined]
        with fake._lock:
            fake.connections += 1
            fake.accepted.append((time.perf_counter(), self.client_address[1]))

    def do_POST(self) -> None:
        arrived = time.perf_counter()
        fake: FakeLLMServer = self.server.fake  # type: ignore[attr-defined]
        path = self.path.split("?", 1)[0]
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b"{}"
        vendor = {"/v1/messages": "anthropic", "/v1/chat/completions": "openai"}.get(path)
        if vendor is None:
            self._json(404, {"error": {"type": "not_found_error", "message": f"no route {path}"}})
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self._error(vendor, 400, "request body is not JSON")
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        recorded = RecordedRequest(vendor, path, headers, body, arrived=arrived)
        number, delay, failure, cut = fake._admit(recorded)
        try:
            if delay:
                time.sleep(delay)
            if isinstance(failure, _Page):
                self._page(failure)
                return
            if failure is not None:
                self._error(vendor, failure.status, failure.message, failure.retry_after)
                return
            if fake.api_key is not None and recorded.api_key != fake.api_key:
                self._error(vendor, 401, f"Incorrect API key provided: {recorded.api_key}")
                return
            try:
                reply = fake.policy(recorded)
            except Exception as exc:
                self._error(vendor, 500, f"fake policy failed: {exc!r}")
                return
            usage = _usage(body, reply)
            model = str(body.get("model", "fake-model"))
            if vendor == "anthropic":
                if recorded.stream:
                    self._sse(_anthropic_events(number, model, reply, usage), vendor, cut)
                else:
                    self._json(200, _anthropic_message(number, model, reply, usage))
            elif recorded.stream:
                options = body.get("stream_options") or {}
                send_usage = bool(options.get("include_usage")) and fake.send_stream_usage
                chunks = _openai_chunks(number, model, reply, usage if send_usage else None)
                self._sse(chunks, vendor, cut)
            else:
                self._json(200, _openai_completion(number, model, reply, usage))
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (e.g. its timeout fired)
        finally:
            recorded.finished = time.perf_counter()

    # ------------------------------------------------------------ writing

    def _json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None):
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", "req_fake")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _page(self, page: _Page) -> None:
        data = page.body.encode()
        self.send_response(200)
        self.send_header("content-type", page.content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(
        self, vendor: str, status: int, message: str | None, retry_after: float | None = None
    ) -> None:
        message = message or f"fake server error {status}"
        headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
        self._json(status, _error_body(vendor, status, message), headers)

    def _sse(self, events: list[str], vendor: str, cut: _Cut | _Keepalive | None) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        if isinstance(cut, _Keepalive):
            for event in events[: cut.after_events]:
                self._chunk(event)
            while True:  # until the client hangs up (BrokenPipeError ends the handler)
                time.sleep(cut.interval)
                self._chunk(": keepalive\n\n")
        for i, event in enumerate(events):
            if cut is not None and i == cut.after_events:
                if cut.error_status is None:
                    self._drop()
                    return
                body = _error_body(vendor, cut.error_status, "stream interrupted by fake server")
                if vendor == "anthropic":
                    self._chunk(f"event: error\ndata: {json.dumps(body)}\n\n")
                else:
                    self._chunk(f"data: {json.dumps(body)}\n\n")
                break
            self._chunk(event)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _chunk(self, text: str) -> None:
        data = text.encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _drop(self) -> None:
        self.wfile.flush()
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)


# ---------------------------------------------------------------- payloads


def _error_body(vendor: str, status: int, message: str) -> dict[str, Any]:
    if vendor == "anthropic":
        kind = _ANTHROPIC_ERROR_TYPES.get(status, "api_error" if status >= 500 else "error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    kind = _OPENAI_ERROR_TYPES.get(status, "server_error" if status >= 500 else "error")
    code = "invalid_api_key" if status == 401 else None
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _usage(body: dict[str, Any], reply: Reply) -> dict[str, int]:
    return {
        "input": len(json.dumps(body.get("messages", []))) // 4,
        "output": (len(reply.text) + sum(len(c) for c in reply.calls)) // 4,
    }


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _split3(text: str) -> list[str]:
    """Split into (up to) three parts, so JSON arrives across several deltas."""
    step = max(1, -(-len(text) // 3))
    return _pieces(text, step) or [""]


def _anthropic_input(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments)
    except ValueError:
        return {"code": arguments}
    return value if isinstance(value, dict) else {"code": arguments}


def _anthropic_usage(usage: dict[str, int], output: int) -> dict[str, int]:
    return {
        "input_tokens": usage["input"],
        "output_tokens": output,
        "cache_creation_input_tokens": FAKE_CACHE_WRITE_TOKENS,
        "cache_read_input_tokens": FAKE_CACHE_READ_TOKENS,
    }


def _anthropic_message(
    number: int, model: str, reply: Reply, usage: dict[str, int]
) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    for j, arguments in enumerate(reply.calls):
        content.append(
            {
                "type": "tool_use",
                "id": f"toolu_fake{number:04d}_{j}",
                "name": "python",
                "input": _anthropic_input(arguments),
            }
        )
    return {
        "id": f"msg_fake{number:04d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if reply.calls else "end_turn",
        "stop_sequence": None,
        "usage": _anthropic_usage(usage, usage["output"]),
    }


def _sse_event(name: str, payload: dict[str, Any]) -> str:
    return f"event: {name}\ndata: {json.dumps(payload)}\n\n"


def _anthropic_events(number: int, model: str, reply: Reply, usage: dict[str, int]) -> list[str]:
    message = _anthropic_message(number, model, reply, usage)
    start = {**message, "content": [], "stop_reason": None, "usage": _anthropic_usage(usage, 1)}
    events = [
        _sse_event("message_start", {"type": "message_start", "message": start}),
        _sse_event("ping", {"type": "ping"}),
    ]
    index = 0
    if reply.text:
        block = {"type": "text", "text": ""}
        events.append(_content_start(index, block))
        for piece in _pieces(reply.text, 8):
            delta = {"type": "text_delta", "text": piece}
            events.append(_content_delta(index, delta))
        events.append(_content_stop(index))
        index += 1
    for j, arguments in enumerate(reply.calls):
        block = {"type": "tool_use", "id": f"toolu_fake{number:04d}_{j}", "name": "python"}
        events.append(_content_start(index, {**block, "input": {}}))
        for piece in _split3(arguments):
            delta = {"type": "input_json_delta", "partial_json": piece}
            events.append(_content_delta(index, delta))
        events.append(_content_stop(index))
        index += 1
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    events.append(
        _sse_event(
            "message_delta",
            {"type": "message_delta", "delta": delta, "usage": {"output_tokens": usage["output"]}},
        )
    )
    events.append(_sse_event("message_stop", {"type": "message_stop"}))
    return events


def _content_start(index: int, block: dict[str, Any]) -> str:
    payload = {"type": "content_block_start", "index": index, "content_block": block}
    return _sse_event("content_block_start", payload)


def _content_delta(index: int, delta: dict[str, Any]) -> str:
    payload = {"type": "content_block_delta", "index": index, "delta": delta}
    return _sse_event("content_block_delta", payload)


def _content_stop(index: int) -> str:
    return _sse_event("content_block_stop", {"type": "content_block_stop", "index": index})


def _openai_usage(usage: dict[str, int]) -> dict[str, Any]:
    prompt = usage["input"] + FAKE_CACHE_READ_TOKENS
    return {
        "prompt_tokens": prompt,
        "completion_tokens": usage["output"],
        "total_tokens": prompt + usage["output"],
        "prompt_tokens_details": {"cached_tokens": FAKE_CACHE_READ_TOKENS},
    }


def _openai_completion(
    number: int, model: str, reply: Reply, usage: dict[str, int]
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.calls:
        message["tool_calls"] = [
            {
                "id": f"call_fake{number:04d}_{j}",
                "type": "function",
                "function": {"name": "python", "arguments": arguments},
            }
            for j, arguments in enumerate(reply.calls)
        ]
    return {
        "id": f"chatcmpl-fake{number:04d}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if reply.calls else "stop",
            }
        ],
        "usage": _openai_usage(usage),
    }


def _openai_chunks(
    number: int, model: str, reply: Reply, usage: dict[str, int] | None
) -> list[str]:
    head = {
        "id": f"chatcmpl-fake{number:04d}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return f"data: {json.dumps({**head, 'choices': [choice]})}\n\n"

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks.extend(chunk({"content": piece}) for piece in _pieces(reply.text, 8))
    for j, arguments in enumerate(reply.calls):
        first = {
            "index": j,
            "id": f"call_fake{number:04d}_{j}",
            "type": "function",
            "function": {"name": "python", "arguments": ""},
        }
        chunks.append(chunk({"tool_calls": [first]}))
        for piece in _split3(arguments):
            more = {"index": j, "function": {"arguments": piece}}
            chunks.append(chunk({"tool_calls": [more]}))
    chunks.append(chunk({}, "tool_calls" if reply.calls else "stop"))
    if usage is not None:
        final = {**head, "choices": [], "usage": _openai_usage(usage)}
        chunks.append(f"data: {json.dumps(final)}\n\n")
    chunks.append("data: [DONE]\n\n")
    return chunks
