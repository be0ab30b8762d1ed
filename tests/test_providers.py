"""Model providers against a local fake LLM server, through the real vendor SDKs."""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pydantic
import pytest

from prime_agent_lab.core.messages import (
    PYTHON_TOOL,
    ImagePart,
    Message,
    ModelRequest,
    ModelResponse,
    ToolCall,
)
from prime_agent_lab.core.ports import ModelProvider, ProviderError, ResponseDone, TextDelta
from prime_agent_lab.providers import default_model, make_provider, provider_names
from prime_agent_lab.providers.errors import parse_retry_after
from prime_agent_lab.providers.fenced import python_blocks
from prime_agent_lab.providers.scripted import DEFAULT_SCRIPT, EXHAUSTED_TEXT, exhausted_text

from .fake_llm_server import (
    CONFIRMED,
    FAKE_CACHE_READ_TOKENS,
    FAKE_CACHE_WRITE_TOKENS,
    OBSERVATION_MISSING,
    SECRET,
    FakeLLMServer,
    RecordedRequest,
    Reply,
)

VENDORS = ["anthropic", "openai"]
BOTH_MODES = [
    pytest.param(vendor, stream, id=f"{vendor}-{'stream' if stream else 'json'}")
    for vendor in VENDORS
    for stream in (True, False)
]
KEY = "sk-test-0123456789abcdef"
KEY_ENV = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}


@pytest.fixture
def server() -> Any:
    with FakeLLMServer() as fake:
        yield fake


@pytest.fixture
def providers(jp_asyncio_loop: Any) -> Iterator[Callable[..., ModelProvider]]:
    """Makes SDK-based providers for the fake server and closes them after the test.

    Async tests run on pytest-jupyter's loop (see conftest), so this fixture is synchronous.
    """
    made: list[Any] = []

    def make(vendor: str, base_url: str, **kwargs: Any) -> ModelProvider:
        kwargs.setdefault("api_key", KEY)
        if vendor == "openai":
            base_url += "/v1"
        provider = make_provider(vendor, None, base_url=base_url, **kwargs)
        made.append(provider)
        return provider

    yield make
    for provider in made:
        jp_asyncio_loop.run_until_complete(provider.aclose())


def request(*messages: Message, **kwargs: Any) -> ModelRequest:
    history = list(messages) or [Message(role="user", text="Find the secret.")]
    return ModelRequest(system="You are a test.", messages=history, tools=[PYTHON_TOOL], **kwargs)


async def collect(provider: ModelProvider, req: ModelRequest) -> tuple[list[str], ModelResponse]:
    deltas: list[str] = []
    done: list[ModelResponse] = []
    async for event in provider.stream(req):
        assert not done, "nothing may follow ResponseDone"
        if isinstance(event, TextDelta):
            deltas.append(event.text)
        else:
            assert isinstance(event, ResponseDone)
            done.append(event.response)
    assert len(done) == 1
    return deltas, done[0]


async def failure(provider: ModelProvider, req: ModelRequest | None = None) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        await collect(provider, req or request())
    return caught.value


def code_args(code: str) -> str:
    return json.dumps({"code": code})


# ---------------------------------------------------------------- replies


@pytest.mark.parametrize(("vendor", "stream"), BOTH_MODES)
async def test_text_and_tool_calls_are_assembled(server, providers, vendor, stream):
    text = "Two cells: first the data, then the count."
    server.policy = lambda _: Reply(text, (code_args("x = 41"), code_args("print(x + 1)")))
    provider = providers(vendor, server.base_url, stream=stream)

    deltas, response = await collect(provider, request())

    assert "".join(deltas) == response.text == text
    assert len(deltas) > 1 if stream else len(deltas) == 1
    assert [call.name for call in response.tool_calls] == ["python", "python"]
    assert [json.loads(c.arguments)["code"] for c in response.tool_calls] == [
        "x = 41",
        "print(x + 1)",
    ]
    assert len({call.id for call in response.tool_calls}) == 2
    assert response.stop_reason == "tool_use"
    assert response.model == default_model(vendor)
    assert server.requests[-1].stream is stream


@pytest.mark.parametrize(("vendor", "stream"), BOTH_MODES)
async def test_answers_are_read_as_plain_json_without_building_sdk_models(
    server, providers, vendor, stream, monkeypatch
):
    """The SDKs would build a pydantic model per streamed event (most of a step's cost): by
    `construct` for a model type, through a pydantic TypeAdapter for a union of event types."""
    sdk = importlib.import_module(vendor)
    built: list[str] = []
    construct = sdk.BaseModel.construct.__func__
    validate_python = pydantic.TypeAdapter.validate_python

    def counting_construct(cls: type, *args: Any, **kwargs: Any) -> Any:
        built.append(cls.__name__)
        return construct(cls, *args, **kwargs)

    def counting_validate(adapter: Any, *args: Any, **kwargs: Any) -> Any:
        built.append(repr(adapter))
        return validate_python(adapter, *args, **kwargs)

    monkeypatch.setattr(sdk.BaseModel, "construct", classmethod(counting_construct))
    monkeypatch.setattr(pydantic.TypeAdapter, "validate_python", counting_validate)
    text = "Counting to three."
    server.policy = lambda _: Reply(text, (code_args("x = 1"),))
    provider = providers(vendor, server.base_url, stream=stream)

    deltas, response = await collect(provider, request())

    assert "".join(deltas) == response.text == text
    assert [json.loads(c.arguments)["code"] for c in response.tool_calls] == ["x = 1"]
    assert response.usage.cache_read_tokens == FAKE_CACHE_READ_TOKENS
    assert built == []


@pytest.mark.parametrize(("vendor", "stream"), BOTH_MODES)
async def test_consecutive_calls_reuse_one_kept_alive_connection(server, providers, vendor, stream):
    server.policy = lambda _: Reply.code("x = 1")
    provider = providers(vendor, server.base_url, stream=stream)
    for _ in range(3):
        _, response = await collect(provider, request())
        assert len(response.tool_calls) == 1
    # Seen once in a loaded CI run (2 connections): the timeline says which call reconnected,
    # and after how long (the SDK's pool drops a connection idle for 5 s).
    timeline = [("connect", at, port) for at, port in server.accepted] + [
        ("request", r.arrived, r.finished) for r in server.requests
    ]
    assert server.connections == 1, sorted(timeline, key=lambda event: event[1])


@pytest.mark.parametrize(("vendor", "stream"), BOTH_MODES)
async def test_final_text_without_tool_calls_ends_the_turn(server, providers, vendor, stream):
    server.policy = lambda _: Reply("All done.")
    _, response = await collect(providers(vendor, server.base_url, stream=stream), request())
    assert response.text == "All done."
    assert response.tool_calls == []
    assert response.stop_reason == "end_turn"


@pytest.mark.parametrize(("vendor", "stream"), BOTH_MODES)
async def test_usage_is_parsed_including_cache_tokens(server, providers, vendor, stream):
    server.policy = lambda _: Reply("12345678", (code_args("1"),))
    _, response = await collect(providers(vendor, server.base_url, stream=stream), request())
    sent_messages = server.requests[-1].body["messages"]
    assert response.usage.input_tokens == len(json.dumps(sent_messages)) // 4
    assert response.usage.output_tokens == (8 + len(code_args("1"))) // 4
    assert response.usage.cache_read_tokens == FAKE_CACHE_READ_TOKENS
    expected_write = FAKE_CACHE_WRITE_TOKENS if vendor == "anthropic" else 0
    assert response.usage.cache_write_tokens == expected_write


async def test_openai_stream_without_usage_is_tolerated(server, providers):
    server.send_stream_usage = False
    _, response = await collect(providers("openai", server.base_url), request())
    assert response.tool_calls
    assert response.usage.as_dict() == dict.fromkeys(response.usage.as_dict(), 0)
    assert server.requests[-1].body["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize(
    ("vendor", "stream"),
    [("anthropic", True), ("openai", True), ("openai", False)],
)
async def test_malformed_tool_arguments_are_passed_through_raw(server, providers, vendor, stream):
    # (A non-streamed Anthropic reply cannot carry malformed JSON: `input` is an object there.)
    raw = '{"code": "print(1)'
    server.policy = lambda _: Reply("", (raw,))
    _, response = await collect(providers(vendor, server.base_url, stream=stream), request())
    assert [call.arguments for call in response.tool_calls] == [raw]


@pytest.mark.parametrize("vendor", VENDORS)
async def test_fenced_python_block_becomes_a_tool_call(server, providers, vendor):
    text = "Let me check.\n\n```python\nimport math\nprint(math.pi)\n```\n"
    server.policy = lambda _: Reply(text)
    _, response = await collect(providers(vendor, server.base_url, fenced_code=True), request())
    assert response.text == text
    [call] = response.tool_calls
    assert call.name == "python"
    assert json.loads(call.arguments) == {"code": "import math\nprint(math.pi)"}
    assert call.id.startswith("toolu_fenced_" if vendor == "anthropic" else "call_fenced_")
    assert response.stop_reason == "tool_use"


@pytest.mark.parametrize(("vendor", "stream"), BOTH_MODES)
async def test_code_in_a_final_answer_is_not_run_by_default(server, providers, vendor, stream):
    text = "Done. To reproduce it yourself:\n\n```python\nprint('hi')\n```\n"
    server.policy = lambda _: Reply(text)
    _, response = await collect(providers(vendor, server.base_url, stream=stream), request())
    assert (response.text, response.tool_calls, response.stop_reason) == (text, [], "end_turn")


async def test_scripted_final_answer_with_example_code_is_not_run_by_default(tmp_path):
    text = "Here is how:\n\n```python\nprint('hi')\n```\n"
    path = write_script(tmp_path, [{"text": text}])
    _, response = await collect(make_provider("scripted", None, script_path=path), request())
    assert (response.tool_calls, response.stop_reason) == ([], "end_turn")
    fenced = make_provider("scripted", None, script_path=path, fenced_code=True)
    _, response = await collect(fenced, request())
    assert [json.loads(c.arguments) for c in response.tool_calls] == [{"code": "print('hi')"}]


# SSE events up to and including the first text delta, per vendor
FIRST_TEXT_EVENTS = {"anthropic": 4, "openai": 2}


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_stream_of_keepalives_is_cut_off_at_the_whole_call_deadline(
    server, providers, vendor
):
    """Each read succeeds (a keepalive every 0.05 s, well under the 1 s read timeout), so only a
    deadline for the whole call can end it. The answer had started: retrying would not help."""
    server.policy = lambda _: Reply("a long answer that never ends")
    server.keepalive_next(interval=0.05, after_events=FIRST_TEXT_EVENTS[vendor])
    provider = providers(vendor, server.base_url, timeout=1.0)
    started = time.monotonic()
    deltas: list[str] = []
    with pytest.raises(ProviderError) as caught:
        async for event in provider.stream(request()):
            deltas.append(getattr(event, "text", ""))
    elapsed = time.monotonic() - started
    assert deltas  # the text before the keepalives was streamed
    assert (caught.value.kind, caught.value.retryable) == ("timeout", False)
    assert "did not finish its answer within 1 s" in str(caught.value)
    assert elapsed >= 1.0  # without the deadline the call never ends (the test's timeout)


@pytest.mark.parametrize("vendor", VENDORS)
async def test_keepalives_before_any_answer_are_a_retryable_timeout(server, providers, vendor):
    server.keepalive_next(interval=0.05, after_events=1)
    error = await failure(providers(vendor, server.base_url, timeout=1.0))
    assert (error.kind, error.retryable) == ("timeout", True)
    assert "did not start answering within 1 s" in str(error)


def test_fenced_blocks_only_closed_python_fences_count():
    text = (
        "```bash\nls\n```\n"
        "```python\nx = 1\n```\n"
        "  ```py\n  y = 2\n  ```\n"
        "```python\n\n```\n"
        "```python\nunclosed = True\n"
    )
    assert python_blocks(text) == ["x = 1", "y = 2"]


async def test_two_step_policy_plays_through_with_both_vendors(server, providers):
    for vendor in VENDORS:
        provider = providers(vendor, server.base_url)
        history = [Message(role="user", text="Find the secret.")]
        outputs = [f"{SECRET}\n", f"confirmed {CONFIRMED}\n"]
        for output in [*outputs, None]:
            _, response = await collect(provider, request(*history))
            if output is None:
                break
            [call] = response.tool_calls
            history += [
                Message(role="assistant", text=response.text, tool_calls=(call,)),
                Message(role="tool", text=output, tool_call_id=call.id),
            ]
        assert str(CONFIRMED) in response.text
        assert not response.tool_calls


async def test_two_step_policy_says_when_the_observation_is_missing(server, providers):
    call = ToolCall(id="c1", name="python", arguments=code_args("print(secret)"))
    history = [
        Message(role="user", text="Find the secret."),
        Message(role="assistant", tool_calls=(call,)),
        Message(role="tool", text="NameError: name 'secret' is not defined", tool_call_id="c1"),
    ]
    _, response = await collect(providers("openai", server.base_url), request(*history))
    assert response.text == OBSERVATION_MISSING


# ---------------------------------------------------------------- request wire shape

PNG = ImagePart(media_type="image/png", data_base64="iVBORw0KGgo=")


def tool_history() -> list[Message]:
    good = ToolCall(id="call_a", name="python", arguments=code_args("print(6 * 7)"))
    bad = ToolCall(id="call_b", name="python", arguments="print('not json')")
    return [
        Message(role="user", text="Compute and plot."),
        Message(role="assistant", text="Running two cells.", tool_calls=(good, bad)),
        Message(role="tool", text="42", tool_call_id="call_a"),
        Message(role="tool", text="<Figure>", tool_call_id="call_b", images=(PNG,)),
    ]


async def test_anthropic_request_has_tool_results_in_one_user_message(server, providers):
    await collect(providers("anthropic", server.base_url), request(*tool_history()))
    sent: RecordedRequest = server.requests[-1]
    body = sent.body
    assert sent.path == "/v1/messages"
    assert body["system"][0]["text"] == "You are a test."
    assert body["tools"] == [
        {
            "name": "python",
            "description": PYTHON_TOOL.description,
            "input_schema": PYTHON_TOOL.parameters,
        }
    ]
    assert body["max_tokens"] == 4096
    user, assistant, results = body["messages"]
    assert user == {"role": "user", "content": [{"type": "text", "text": "Compute and plot."}]}
    assert assistant["role"] == "assistant"
    text, good, bad = assistant["content"]
    assert text == {"type": "text", "text": "Running two cells."}
    assert good == {
        "type": "tool_use",
        "id": "call_a",
        "name": "python",
        "input": {"code": "print(6 * 7)"},
    }
    # Arguments that are not a JSON object are resent as {"code": raw} to keep history valid.
    assert (bad["id"], bad["input"]) == ("call_b", {"code": "print('not json')"})
    assert results["role"] == "user"
    first, second = results["content"]
    assert first == {
        "type": "tool_result",
        "tool_use_id": "call_a",
        "content": [{"type": "text", "text": "42"}],
    }
    assert second["tool_use_id"] == "call_b"
    assert second["content"] == [
        {"type": "text", "text": "<Figure>"},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": PNG.data_base64},
        },
    ]
    assert second["cache_control"] == {"type": "ephemeral"}
    assert sent.api_key == KEY


async def test_openai_request_has_tool_messages_then_images(server, providers):
    await collect(providers("openai", server.base_url), request(*tool_history()))
    sent: RecordedRequest = server.requests[-1]
    body = sent.body
    assert sent.path == "/v1/chat/completions"
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "python",
                "description": PYTHON_TOOL.description,
                "parameters": PYTHON_TOOL.parameters,
            },
        }
    ]
    assert body["max_tokens"] == 4096  # a non-OpenAI host gets the widely supported name
    system, user, assistant, result_a, result_b, images = body["messages"]
    assert system == {"role": "system", "content": "You are a test."}
    assert user == {"role": "user", "content": "Compute and plot."}
    assert assistant["content"] == "Running two cells."
    assert [c["function"]["arguments"] for c in assistant["tool_calls"]] == [
        code_args("print(6 * 7)"),
        code_args("print('not json')"),
    ]
    assert result_a == {"role": "tool", "tool_call_id": "call_a", "content": "42"}
    assert result_b == {"role": "tool", "tool_call_id": "call_b", "content": "<Figure>"}
    assert images["role"] == "user"
    urls = [p["image_url"]["url"] for p in images["content"] if p["type"] == "image_url"]
    assert urls == [f"data:image/png;base64,{PNG.data_base64}"]


@pytest.mark.parametrize("vendor", VENDORS)
async def test_images_are_left_out_when_the_request_says_so(server, providers, vendor):
    await collect(
        providers(vendor, server.base_url), request(*tool_history(), accepts_images=False)
    )
    assert "base64" not in json.dumps(server.requests[-1].body["messages"])


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(("vendor", "stream"), BOTH_MODES)
@pytest.mark.parametrize("status", [500, 503, 529])
async def test_server_errors_are_retryable_and_not_retried_by_the_sdk(
    server, providers, vendor, stream, status
):
    server.fail_next(status=status, message="upstream exploded")
    error = await failure(providers(vendor, server.base_url, stream=stream))
    assert (error.kind, error.status, error.retryable) == ("server", status, True)
    assert "upstream exploded" in str(error)
    assert len(server.requests) == 1  # the loop owns retries


@pytest.mark.parametrize("vendor", VENDORS)
async def test_rate_limit_is_retryable_with_retry_after(server, providers, vendor):
    server.fail_next(status=429, message="slow down", retry_after=7)
    error = await failure(providers(vendor, server.base_url))
    assert (error.kind, error.status, error.retryable) == ("rate_limit", 429, True)
    assert error.retry_after == 7.0
    assert len(server.requests) == 1


@pytest.mark.parametrize(("vendor", "stream"), BOTH_MODES)
async def test_rejected_key_is_an_auth_error_that_hides_the_key(server, providers, vendor, stream):
    server.api_key = "the-right-key"
    wrong = "sk-wrong-but-secret-987654321"
    error = await failure(providers(vendor, server.base_url, stream=stream, api_key=wrong))
    assert (error.kind, error.status, error.retryable) == ("auth", 401, False)
    assert KEY_ENV[vendor] in str(error)
    assert "Incorrect API key" in str(error)  # the server's own words, with the key redacted
    assert wrong not in str(error)
    assert wrong not in repr(error.args)


@pytest.mark.parametrize("vendor", VENDORS)
async def test_missing_key_is_an_auth_error(server, providers, vendor, monkeypatch, tmp_path):
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path))
    error = await failure(providers(vendor, server.base_url, api_key=None))
    assert (error.kind, error.retryable) == ("auth", False)
    assert KEY_ENV[vendor] in str(error)


@pytest.mark.parametrize("vendor", VENDORS)
@pytest.mark.parametrize("status", [400, 404, 422])
async def test_bad_requests_are_not_retryable_and_carry_the_server_message(
    server, providers, vendor, status
):
    server.fail_next(status=status, message="max_tokens: 999999 > 64000, the maximum")
    error = await failure(providers(vendor, server.base_url))
    assert (error.kind, error.status, error.retryable) == ("bad_request", status, False)
    assert "max_tokens: 999999 > 64000, the maximum" in str(error)


@pytest.mark.parametrize("vendor", VENDORS)
async def test_stream_cut_midway_is_a_retryable_error(server, providers, vendor):
    server.cut_next_stream(after_events=4)
    error = await failure(providers(vendor, server.base_url))
    assert error.kind == "connection"
    assert error.retryable


@pytest.mark.parametrize("vendor", VENDORS)
async def test_error_event_inside_a_stream_is_a_provider_error(server, providers, vendor):
    server.cut_next_stream(after_events=3, error_status=529 if vendor == "anthropic" else 500)
    error = await failure(providers(vendor, server.base_url))
    assert (error.kind, error.retryable) == ("server", True)
    assert "stream interrupted by fake server" in str(error)


BASE_URL_ENV = {"anthropic": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL"}
API_NAME = {"anthropic": "the Anthropic API", "openai": "the OpenAI-compatible API"}
ROUTE = {"anthropic": "/v1/messages", "openai": "/v1/chat/completions"}


@pytest.mark.parametrize(("vendor", "stream"), BOTH_MODES)
@pytest.mark.parametrize("content_type", ["text/html; charset=utf-8", "text/plain"])
async def test_a_web_page_answered_with_200_is_named_as_such_and_not_retried(
    server, providers, vendor, stream, content_type
):
    """A base URL pointing at a web server: any path answers 200 with a page. That is no
    dropped stream to retry but a wrong address, and the error says which and where."""
    server.page_next(content_type=content_type)
    error = await failure(providers(vendor, server.base_url, stream=stream))
    media = content_type.split(";")[0]
    assert str(error) == (
        f"the server at {server.base_url}{ROUTE[vendor]} answered with {media}, not "
        f"{API_NAME[vendor]}: check the base URL ({BASE_URL_ENV[vendor]} or base_url)"
    )
    assert (error.kind, error.retryable) == ("not_api", False)
    assert len(server.requests) == 1
    _, response = await collect(providers(vendor, server.base_url, stream=stream), request())
    assert response.tool_calls  # the next call, answered by the API, works as before


@pytest.mark.parametrize("vendor", VENDORS)
async def test_timeout_is_retryable(server, providers, vendor):
    server.delay_next(1.5)
    error = await failure(providers(vendor, server.base_url, timeout=0.3))
    assert (error.kind, error.retryable) == ("timeout", True)


@pytest.mark.parametrize("vendor", VENDORS)
async def test_unreachable_server_is_a_retryable_connection_error(providers, vendor):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    error = await failure(providers(vendor, f"http://127.0.0.1:{port}"))
    assert (error.kind, error.retryable) == ("connection", True)
    assert f"127.0.0.1:{port}" in str(error)


def test_retry_after_header_forms():
    assert parse_retry_after({"retry-after": "7"}) == 7.0
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


# ---------------------------------------------------------------- factory


def test_unknown_provider_name_is_a_value_error():
    with pytest.raises(ValueError, match="anthropic, openai, scripted"):
        make_provider("gemini", None)


def test_factory_defaults():
    assert provider_names() == ("anthropic", "openai", "scripted")
    provider = make_provider("Scripted", None)
    assert (provider.name, provider.model) == ("scripted", "demo")
    assert make_provider("anthropic", None, api_key=KEY).model == "claude-sonnet-4-5"
    assert make_provider("openai", "", api_key=KEY).model == "gpt-4.1"
    assert make_provider("openai", "qwen2.5-coder", api_key=KEY).model == "qwen2.5-coder"


# ---------------------------------------------------------------- scripted


def write_script(tmp_path: Path, turns: list[dict[str, Any]]) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"turns": turns}))
    return str(path)


def after(history: list[Message], response: ModelResponse, output: str = "") -> list[Message]:
    """History after the loop ran `response`'s tool calls, each printing `output`."""
    history = [
        *history,
        Message(role="assistant", text=response.text, tool_calls=tuple(response.tool_calls)),
    ]
    history += [
        Message(role="tool", text=output, tool_call_id=call.id) for call in response.tool_calls
    ]
    return history


async def test_scripted_turns_play_in_order_and_deterministically(tmp_path):
    path = write_script(
        tmp_path,
        [
            {"text": "Step one.", "code": "a = 1"},
            {"text": "Step two.", "tool_calls": [{"code": "b = 2"}, {"code": "print(a + b)"}]},
            {"text": "Done."},
        ],
    )
    provider = make_provider("scripted", None, script_path=path)
    history = [Message(role="user", text="go")]

    _, first = await collect(provider, request(*history))
    _, again = await collect(provider, request(*history))
    assert first == again
    assert first.text == "Step one."
    assert [json.loads(c.arguments) for c in first.tool_calls] == [{"code": "a = 1"}]

    history = after(history, first)
    _, second = await collect(provider, request(*history))
    assert [json.loads(c.arguments)["code"] for c in second.tool_calls] == ["b = 2", "print(a + b)"]
    assert second.stop_reason == "tool_use"

    _, third = await collect(provider, request(*after(history, second, "3")))
    assert (third.text, third.tool_calls, third.stop_reason) == ("Done.", [], "end_turn")
    assert third.usage.input_tokens > 0
    assert third.usage.output_tokens == len("Done.") // 4


async def test_scripted_fills_last_output_templates(tmp_path):
    path = write_script(
        tmp_path,
        [
            {"text": "", "code": "print('x')"},
            {"text": "All: <{last_output}> Last: <{last_output_line}>"},
        ],
    )
    provider = make_provider("scripted", None, script_path=path)
    history = [Message(role="user", text="go")]
    _, first = await collect(provider, request(*history))
    history = after(history, first, "\n  rows: 3\nFOUND: 42  \n\n")
    _, final = await collect(provider, request(*history))
    assert final.text == "All: <rows: 3\nFOUND: 42> Last: <FOUND: 42>"


async def test_scripted_streams_text_in_word_groups(tmp_path):
    text = "one two three four five six seven eight nine ten"
    path = write_script(tmp_path, [{"text": text}])
    deltas, response = await collect(make_provider("scripted", None, script_path=path), request())
    assert len(deltas) > 2
    assert "".join(deltas) == response.text == text
    unstreamed = make_provider("scripted", None, script_path=path, stream=False)
    assert (await collect(unstreamed, request()))[0] == [text]


async def test_scripted_error_steps_fail_then_play_the_next_turn(tmp_path):
    path = write_script(
        tmp_path,
        [
            {"error": {"status": 503, "message": "overloaded"}, "repeat": 2},
            {"error": {"status": 429, "message": "slow", "retry_after": 2}},
            {"text": "Recovered."},
            {"error": {"status": 400, "message": "bad"}},
            {"text": "Never reached without the 400."},
        ],
    )
    provider = make_provider("scripted", None, script_path=path)
    kinds = []
    for _ in range(3):
        error = await failure(provider)
        kinds.append((error.kind, error.status, error.retryable, error.retry_after))
    assert kinds == [
        ("server", 503, True, None),
        ("server", 503, True, None),
        ("rate_limit", 429, True, 2.0),
    ]
    _, response = await collect(provider, request())
    assert response.text == "Recovered."

    history = after([Message(role="user", text="go")], response)
    error = await failure(provider, request(*history))
    assert (error.kind, error.retryable, str(error).endswith("bad")) == ("bad_request", False, True)


async def test_scripted_exhausted_script_answers_without_tool_calls(tmp_path):
    path = write_script(tmp_path, [{"text": "Only step."}])
    provider = make_provider("scripted", None, script_path=path)
    history = after([Message(role="user", text="go")], (await collect(provider, request()))[1])
    _, response = await collect(provider, request(*history, Message(role="user", text="more?")))
    assert (response.text, response.tool_calls) == ("The script script.json has no more steps.", [])
    assert exhausted_text(str(DEFAULT_SCRIPT)) == EXHAUSTED_TEXT  # the demo keeps its words


async def test_scripted_raw_arguments_are_passed_through(tmp_path):
    path = write_script(tmp_path, [{"tool_calls": [{"arguments": '{"code": "1'}]}])
    _, response = await collect(make_provider("scripted", None, script_path=path), request())
    assert [call.arguments for call in response.tool_calls] == ['{"code": "1']


@pytest.mark.parametrize(
    "content",
    ["not json", '{"steps": []}', '{"turns": [{"code": 5}]}', '{"turns": [{"error": {}}]}'],
)
def test_scripted_invalid_script_is_a_value_error(tmp_path, content):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=r"bad\.json"):
        make_provider("scripted", None, script_path=str(path))


async def test_default_demo_script_runs_and_answers_from_the_output():
    """The bundled demo: three cells run in one namespace, then an answer built from the output."""
    turns = json.loads(DEFAULT_SCRIPT.read_text())["turns"]
    assert [bool(t.get("code")) for t in turns] == [True, True, True, False]
    provider = make_provider("scripted", None)
    namespace: dict[str, Any] = {}
    history = [Message(role="user", text="Show me the RLM demo.")]
    outputs = []
    for _ in range(3):
        _, response = await collect(provider, request(*history))
        [call] = response.tool_calls
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            exec(json.loads(call.arguments)["code"], namespace)
        outputs.append(stdout.getvalue())
        history = after(history, response, stdout.getvalue())
    _, final = await collect(provider, request(*history))

    assert len(namespace["log"]) > 250_000
    assert len(outputs[0]) < 1000  # only the size and first lines are printed
    assert len(namespace["hits"]) == 1 and "INCIDENT INC-4471" in outputs[1]
    assert len(namespace["window"]) == 7
    assert "FOUND: INC-4471" in final.text
    assert "EUR 48213.07" in final.text
    assert not final.tool_calls


async def play_demo_walkthrough(provider: ModelProvider, history: list[Message]) -> list[Message]:
    """Play the bundled demo's four steps (outputs faked) and return the grown history."""
    for _ in range(3):
        _, response = await collect(provider, request(*history))
        assert response.tool_calls
        history = after(history, response, "FOUND: INC-4471")
    _, final = await collect(provider, request(*history))
    assert not final.tool_calls and "INC-4471" in final.text
    return [*history, Message(role="assistant", text=final.text)]


async def test_the_demo_answers_a_follow_up_message_pointing_to_its_variables():
    provider = make_provider("scripted", None)
    history = await play_demo_walkthrough(provider, [Message(role="user", text="Show me.")])
    history.append(Message(role="user", text="What was the total amount?"))
    _, answer = await collect(provider, request(*history))
    assert answer.tool_calls == [] and answer.stop_reason == "end_turn"
    assert EXHAUSTED_TEXT not in answer.text
    assert all(f"`{name}`" in answer.text for name in ("log", "hits", "window", "amount"))


async def test_after_a_stop_the_demo_restarts_from_its_first_step():
    provider = make_provider("scripted", None)
    history = [Message(role="user", text="Show me.")]
    _, first = await collect(provider, request(*history))
    history = after(history, first, "(stopped)")
    _, second = await collect(provider, request(*history))
    # Stopped while the second cell ran: its call got a result, the turn ended there.
    history = after(history, second, "(the user stopped the turn)")
    history.append(Message(role="user", text="Try again."))

    _, again = await collect(provider, request(*history))

    [call] = again.tool_calls
    assert json.loads(call.arguments)["code"] == json.loads(first.tool_calls[0].arguments)["code"]
    seen = {c.id for m in history for c in m.tool_calls}
    assert call.id not in seen  # ids stay unique in the conversation
    history = await play_demo_walkthrough(provider, history)
    assert len([m for m in history if m.role == "user"]) == 2


async def test_the_scripted_provider_paces_its_steps_when_asked(tmp_path):
    path = write_script(tmp_path, [{"text": "one two three four five six", "code": "x = 1"}])
    paced = make_provider("scripted", None, script_path=path, step_delay=0.4)
    started = time.monotonic()
    deltas, _ = await collect(paced, request())
    assert time.monotonic() - started >= 0.4 and len(deltas) > 1
    assert make_provider("scripted", None, script_path=path).step_delay == 0  # off unless asked


def test_wire_messages_are_converted_once_per_message_and_equal_a_fresh_conversion() -> None:
    from prime_agent_lab.providers import anthropic as anthropic_provider
    from prime_agent_lab.providers import openai as openai_provider
    from prime_agent_lab.providers.common import WireMemo

    history = tool_history()
    longer = [*history, Message(role="user", text="And now?")]
    for vendor in (openai_provider, anthropic_provider):
        memo = WireMemo()
        if vendor is openai_provider:
            first = vendor.to_wire_messages("sys", history, memo=memo)
            second = vendor.to_wire_messages("sys", longer, memo=memo)
            fresh = vendor.to_wire_messages("sys", longer)
        else:
            first = vendor.to_wire_messages(history, memo=memo)
            second = vendor.to_wire_messages(longer, memo=memo)
            fresh = vendor.to_wire_messages(longer)
        assert second == fresh  # the cache breakpoint moved; nothing stale is carried over
        again = (
            vendor.to_wire_messages("sys", history)
            if vendor is openai_provider
            else vendor.to_wire_messages(history)
        )
        assert first == again  # extending the conversation changed nothing already sent
        assert json.dumps(second).count("cache_control") == json.dumps(fresh).count("cache_control")
        assert second[:2] == fresh[:2] and first[0] is not None


def test_a_json_body_built_from_cached_entries_equals_plain_encoding() -> None:
    from prime_agent_lab.providers import anthropic as anthropic_provider
    from prime_agent_lab.providers.common import WireMemo

    memo = WireMemo()
    history = tool_history()
    for messages in (history, [*history, Message(role="user", text="Und jetzt? ✓")]):
        params = anthropic_provider.build_params(request(*messages), "m", memo)
        assert json.loads(memo.json_body(params)) == json.loads(json.dumps(params))
    assert json.loads(memo.json_body({"messages": []})) == {"messages": []}


@pytest.mark.parametrize("vendor", VENDORS)
def test_json_bodies_of_a_growing_then_branching_conversation_equal_plain_encoding(vendor) -> None:
    """Each body reuses the previous one's encoded history; none may differ from a fresh one."""
    from prime_agent_lab.providers import anthropic as anthropic_provider
    from prime_agent_lab.providers import openai as openai_provider
    from prime_agent_lab.providers.common import WireMemo

    module = anthropic_provider if vendor == "anthropic" else openai_provider
    memo = WireMemo()
    history = tool_history()
    longer = [*history, Message(role="user", text="more ✓"), Message(role="assistant", text="ok")]
    calls = [[], history[:1], history[:2], history, history, longer, history[:2], longer[:1]]
    for messages in calls:
        params = module.build_params(request(*messages), "m", memo=memo)
        assert json.loads(memo.json_body(params)) == json.loads(json.dumps(params))


async def test_older_sdks_without_raw_content_still_get_the_history(
    server: Any, providers: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prime_agent_lab.providers import anthropic as anthropic_provider
    from prime_agent_lab.providers import openai as openai_provider

    monkeypatch.setattr(openai_provider, "_POST_TAKES_CONTENT", False)
    monkeypatch.setattr(anthropic_provider, "_POST_TAKES_CONTENT", False)
    await test_two_step_policy_plays_through_with_both_vendors(server, providers)


def child_request(name: str, parent: str, task: str) -> ModelRequest:
    """A sub-agent's first call: the system prompt's doctrine names it and its parent."""
    from prime_agent_lab.core.prompts import CHILD_DOCTRINE

    system = "You are a test." + CHILD_DOCTRINE.format(name=name, parent=f"`{parent}`")
    first = Message(role="user", text=f"[task from parent]\n\n{task}")
    return ModelRequest(system=system, messages=[first], tools=[PYTHON_TOOL])


async def test_scripted_children_play_the_script_listed_under_their_name(tmp_path):
    path = tmp_path / "script.json"
    path.write_text(
        json.dumps(
            {
                "turns": [{"text": "root"}],
                "child": {"turns": [{"text": "any child on {task}"}]},
                "children": {
                    "a": {
                        "turns": [{"text": "I am a"}],
                        "children": {"b": {"turns": [{"text": "b under a"}]}},
                    },
                    "b": {"turns": [{"text": "I am b"}]},
                },
            }
        )
    )
    provider = make_provider("scripted", None, script_path=str(path))
    answers = [
        (await collect(provider, child_request(name, parent, "t")))[1].text
        for name, parent in [("a", "agent.ipynb"), ("b", "agent.ipynb"), ("b", "a"), ("c", "a")]
    ]
    assert answers == ["I am a", "I am b", "b under a", "any child on t"]


async def test_a_verbatim_step_plays_its_braces_as_written(tmp_path):
    text, code = "Use {last_output} and {task} as written.", "print('{messages}')"
    path = write_script(tmp_path, [{"text": text, "code": code, "verbatim": True}])
    _, response = await collect(make_provider("scripted", None, script_path=path), request())
    assert response.text == text
    assert json.loads(response.tool_calls[0].arguments) == {"code": code}


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ('{"turns": [], "children": [{"turns": []}]}', '"children" must map a sub-agent name'),
        ('{"turns": [], "children": {"a": {"steps": []}}}', r"\(child a\) must be an object"),
        ('{"turns": [{"text": "x", "verbatim": "yes"}]}', '"verbatim" must be true or false'),
    ],
)
def test_bad_children_or_verbatim_name_the_problem(tmp_path, content, says):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=says):
        make_provider("scripted", None, script_path=str(path))
