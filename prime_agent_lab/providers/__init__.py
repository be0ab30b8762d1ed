"""Model providers: the adapters behind the `ModelProvider` port.

`make_provider` is the only entry point the rest of the package needs. Vendor SDKs are imported
only when their provider is made (importing `anthropic` alone takes seconds).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.ports import ModelProvider

PROVIDER_NAMES = ("anthropic", "openai", "scripted")

DEFAULT_MODELS = {
    "anthropic": "claude-sonnet-4-5",
    "openai": "gpt-4.1",
    "scripted": "demo",
}


def make_provider(
    name: str,
    model: str | None,
    *,
    script_path: str | None = None,
    stream: bool = True,
    timeout: float = 600.0,
    api_key: str | None = None,
    auth_token: str | None = None,
    base_url: str | None = None,
    fenced_code: bool = False,
    step_delay: float = 0.0,
) -> ModelProvider:
    """Build the provider called `name` ("anthropic", "openai" or "scripted").

    `model` None or empty picks the provider's default model. `api_key`/`base_url` override the
    vendor's environment variables (ANTHROPIC_* / OPENAI_*); `auth_token` (Anthropic only, a
    bearer token) is the alternative to `api_key`. A host that withheld the key variables passes
    them here (`held_credentials`). `script_path` is for "scripted" only;
    without it the bundled demo script plays. `timeout` bounds each read and the whole model call.
    `fenced_code` turns a ```python block in an answer without tool calls into a cell (for models
    without tool calling; off by default). `step_delay` paces the scripted provider. Raises
    ValueError for an unknown name or a bad script; a missing API key is reported by the first
    call, as a ProviderError of kind "auth".
    """
    key = name.strip().lower()
    if key not in PROVIDER_NAMES:
        valid = ", ".join(PROVIDER_NAMES)
        raise ValueError(f"Unknown model provider {name!r}; valid names: {valid}")
    chosen = model or DEFAULT_MODELS[key]
    if key == "scripted":
        from .scripted import ScriptedProvider

        return ScriptedProvider(
            chosen,
            script_path=script_path,
            stream=stream,
            fenced_code=fenced_code,
            step_delay=step_delay,
        )
    options: dict[str, Any] = {
        "stream": stream,
        "timeout": timeout,
        "api_key": api_key,
        "base_url": base_url,
        "fenced_code": fenced_code,
    }
    # Import only the SDK in use: each costs 0.4 to 1.2 s at start-up.
    if key == "anthropic":
        from .anthropic import AnthropicProvider

        return AnthropicProvider(chosen, auth_token=auth_token, **options)
    from .openai import OpenAIProvider

    return OpenAIProvider(chosen, **options)


def held_credentials(name: str, keys: Mapping[str, str]) -> dict[str, str]:
    """`make_provider` arguments for provider `name` from key variables the host holds outside
    its environment (core/held_keys.py): `api_key` from ANTHROPIC_API_KEY or OPENAI_API_KEY,
    else `auth_token` from ANTHROPIC_AUTH_TOKEN (the SDK's own order; it takes one of the two).
    Empty when none is held: the SDK then looks in the environment and its config as usual."""
    vendor = name.strip().lower()
    if vendor == "anthropic":
        if keys.get("ANTHROPIC_API_KEY"):
            return {"api_key": keys["ANTHROPIC_API_KEY"]}
        if keys.get("ANTHROPIC_AUTH_TOKEN"):
            return {"auth_token": keys["ANTHROPIC_AUTH_TOKEN"]}
    elif vendor == "openai" and keys.get("OPENAI_API_KEY"):
        return {"api_key": keys["OPENAI_API_KEY"]}
    return {}


__all__ = ["DEFAULT_MODELS", "PROVIDER_NAMES", "held_credentials", "make_provider"]
