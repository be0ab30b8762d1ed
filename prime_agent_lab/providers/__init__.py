"""Model providers: the adapters behind the `ModelProvider` port.

`make_provider` is the only entry point the rest of the package needs. Which providers exist is
not written here: each declares itself (`ProviderPlugin`) and is found through its entry point
(core/installed_providers.py); the built-in ones are in `builtin.py`.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..core.installed_providers import installed
from ..core.ports import ModelProvider, ProviderOptions


def provider_names() -> tuple[str, ...]:
    """The names of the installed providers, sorted."""
    return installed().names


def default_model(name: str) -> str:
    return installed().find(name).default_model


def make_provider(
    name: str,
    model: str | None,
    *,
    script_path: str | None = None,
    stream: bool = True,
    timeout: float = 600.0,
    api_key: str | None = None,
    base_url: str | None = None,
    held_keys: Mapping[str, str] | None = None,
    fenced_code: bool = False,
    step_delay: float = 0.0,
) -> ModelProvider:
    """Build the installed provider called `name` (any case).

    `model` None or empty picks the provider's default model. `api_key`/`base_url` override the
    vendor's environment variables; `held_keys` are the key variables a host took out of its
    environment (core/held_keys.py), which the provider reads its key from. `script_path` and
    `step_delay` are for providers that play something back ("scripted"); `timeout` bounds each
    read and the whole model call; `fenced_code` turns a ```python block in an answer without
    tool calls into a cell (for models without tool calling; off by default). Raises ValueError
    for an unknown name or bad options; a missing API key is reported by the first call, as a
    ProviderError of kind "auth".
    """
    plugin = installed().find(name)
    options = ProviderOptions(
        stream=stream,
        timeout=timeout,
        fenced_code=fenced_code,
        step_delay=step_delay,
        script_path=script_path,
        api_key=api_key,
        base_url=base_url,
        held_keys=held_keys or {},
    )
    return plugin.make(model or plugin.default_model, options)


__all__ = ["default_model", "make_provider", "provider_names"]
