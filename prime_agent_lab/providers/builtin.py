"""The built-in providers as they declare themselves (`ProviderPlugin`, core/ports.py).

Each is registered by an entry point of the group `prime_agent_lab.providers` in pyproject.toml,
as a provider another package installs would be. This module stays cheap to import: a vendor SDK
is imported only when its provider is made (importing `anthropic` alone takes seconds).
"""

from __future__ import annotations

from pathlib import Path

from ..core.ports import ErrorMapping, ModelProvider, Price, ProviderOptions, ProviderPlugin

ANTHROPIC_API_KEY = "ANTHROPIC_API_KEY"
ANTHROPIC_AUTH_TOKEN = "ANTHROPIC_AUTH_TOKEN"
OPENAI_API_KEY = "OPENAI_API_KEY"

# Error types inside a 200 stream, as an HTTP status. One table for both APIs: a server
# compatible with one of them (a proxy, a gateway) may answer in the other's dialect.
STREAM_ERROR_STATUSES = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "rate_limit_exceeded": 429,
    "insufficient_quota": 429,
    "api_error": 500,
    "server_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}

ANTHROPIC_ERRORS = ErrorMapping(
    vendor="Anthropic API",
    key_variable=ANTHROPIC_API_KEY,
    base_url_variable="ANTHROPIC_BASE_URL",
    stream_error_statuses=STREAM_ERROR_STATUSES,
)
OPENAI_ERRORS = ErrorMapping(
    vendor="OpenAI-compatible API",
    key_variable=OPENAI_API_KEY,
    base_url_variable="OPENAI_BASE_URL",
    stream_error_statuses=STREAM_ERROR_STATUSES,
)
SCRIPTED_ERRORS = ErrorMapping(vendor="Scripted provider")


def _make_anthropic(model: str, options: ProviderOptions) -> ModelProvider:
    from .anthropic import AnthropicProvider

    held = options.held_keys
    # The SDK's own order: the API key, else the bearer token (it takes one of the two).
    api_key = options.api_key or held.get(ANTHROPIC_API_KEY)
    return AnthropicProvider(
        model,
        name=ANTHROPIC.name,
        errors=ANTHROPIC_ERRORS,
        stream=options.stream,
        timeout=options.timeout,
        api_key=api_key,
        auth_token=None if api_key else held.get(ANTHROPIC_AUTH_TOKEN),
        base_url=options.base_url,
        fenced_code=options.fenced_code,
    )


def _make_openai(model: str, options: ProviderOptions) -> ModelProvider:
    from .openai import OpenAIProvider

    return OpenAIProvider(
        model,
        name=OPENAI.name,
        errors=OPENAI_ERRORS,
        stream=options.stream,
        timeout=options.timeout,
        api_key=options.api_key or options.held_keys.get(OPENAI_API_KEY),
        base_url=options.base_url,
        fenced_code=options.fenced_code,
    )


def _make_scripted(model: str, options: ProviderOptions) -> ModelProvider:
    from .scripted import DEFAULT_SCRIPT, ScriptedProvider

    custom = options.script_path and Path(options.script_path).resolve() != DEFAULT_SCRIPT
    if custom and model == SCRIPTED.default_model:
        model = Path(options.script_path).name  # labelled by its file: it is not the demo
    return ScriptedProvider(
        model,
        name=SCRIPTED.name,
        errors=SCRIPTED_ERRORS,
        script_path=options.script_path,
        stream=options.stream,
        fenced_code=options.fenced_code,
        step_delay=options.step_delay,
    )


ANTHROPIC = ProviderPlugin(
    name="anthropic",
    make=_make_anthropic,
    default_model="claude-sonnet-4-5",
    key_variables=(ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN),
    context_windows={
        "claude-": 200_000,
        "claude-sonnet-4": 200_000,
        "claude-opus-4": 200_000,
        "claude-3": 200_000,
    },
    # US dollars per million tokens: input, output, cache read, cache write (list prices, 2025)
    prices={
        "claude-opus-4": Price(15.0, 75.0, 1.5, 18.75),
        "claude-opus-4-5": Price(5.0, 25.0, 0.5, 6.25),
        "claude-sonnet-4": Price(3.0, 15.0, 0.3, 3.75),
        "claude-3-7-sonnet": Price(3.0, 15.0, 0.3, 3.75),
        "claude-3-5-sonnet": Price(3.0, 15.0, 0.3, 3.75),
        "claude-haiku-4-5": Price(1.0, 5.0, 0.1, 1.25),
        "claude-3-5-haiku": Price(0.8, 4.0, 0.08, 1.0),
    },
    errors=ANTHROPIC_ERRORS,
    summary="Messages API through the official SDK; ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL",
)

OPENAI = ProviderPlugin(
    name="openai",
    make=_make_openai,
    default_model="gpt-4.1",
    key_variables=(OPENAI_API_KEY,),
    context_windows={
        "gpt-4.1": 1_047_576,
        "gpt-4o": 128_000,
        "gpt-4-turbo": 128_000,
        "gpt-4": 8_192,
        "gpt-5": 400_000,
        "o1": 200_000,
        "o3": 200_000,
        "o4": 200_000,
    },
    prices={  # OpenAI bills no cache writes
        "gpt-4.1": Price(2.0, 8.0, 0.5, 0.0),
        "gpt-4.1-mini": Price(0.4, 1.6, 0.1, 0.0),
        "gpt-4.1-nano": Price(0.1, 0.4, 0.025, 0.0),
        "gpt-4o": Price(2.5, 10.0, 1.25, 0.0),
        "gpt-4o-mini": Price(0.15, 0.6, 0.075, 0.0),
        "gpt-5": Price(1.25, 10.0, 0.125, 0.0),
        "gpt-5-mini": Price(0.25, 2.0, 0.025, 0.0),
        "gpt-5-nano": Price(0.05, 0.4, 0.005, 0.0),
    },
    errors=OPENAI_ERRORS,
    summary=(
        "Chat Completions through the official SDK, also for Ollama, vLLM and other compatible "
        "servers; OPENAI_API_KEY, OPENAI_BASE_URL"
    ),
)

SCRIPTED = ProviderPlugin(
    name="scripted",
    make=_make_scripted,
    default_model="demo",
    prices={"": Price(0.0, 0.0, 0.0, 0.0)},  # a script plays: nothing is billed
    errors=SCRIPTED_ERRORS,
    summary="replays a script file (docs/providers.md); no key, no network",
)
