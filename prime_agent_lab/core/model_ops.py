"""The models a session may switch to, and the switch itself (what an answer cost:
`core/answer_cost.py`).

The models offered are `rlm.find_models()`'s: the host environment's `models()` (the configured
default first, then `subagent_models`). A switch (`POST .../model`, `/model NAME`) makes the
provider the way a sub-agent's `rlm(..., model=...)` gets its own (`environment.provider`) and
hands it to the agent, which records a `model_change` entry and event at once and uses it from
its next model call (docs/pairing.md, "Model and cost").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .installed_providers import context_window, installed
from .locked import MODELS_LOCKED, models_locked
from .text import json_type
from .wire import ModelInfo, ModelList

if TYPE_CHECKING:
    from .agent import Agent
    from .caller import TreeRuntime


class ModelSwitchError(Exception):
    """A model that cannot be chosen: an HTTP status and a sentence for the user."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def model_info(name: str, context_override: int = 0) -> ModelInfo:
    """One offered model (`provider/model`) with its window and list price when declared."""
    provider, _, model = name.partition("/")
    price = installed().price(provider, model)
    info: ModelInfo = {
        "name": name,
        "provider": provider,
        "model": model,
        "context_window": context_window(model, context_override or None, provider),
    }
    if price is not None:
        info["price"] = {
            "input": price.input,
            "output": price.output,
            "cache_read": price.cache_read,
            "cache_write": price.cache_write,
        }
    return info


def model_list(runtime: TreeRuntime, agent: Agent | None = None) -> ModelList:
    """The models offered and, for `agent`, the one its next model call uses."""
    override = int(getattr(runtime.settings, "context_window", 0) or 0)
    answer: ModelList = {
        "models": [model_info(name, override) for name in runtime.environment.models()]
    }
    if agent is not None:
        chosen = agent.chosen_provider
        answer["current"] = f"{chosen.name}/{chosen.model}"
    return answer


async def switch_model(runtime: TreeRuntime, agent: Agent, requested: object) -> ModelList:
    """Switch `agent` to `requested` (`provider/model` or a bare model name among the offered
    ones) from its next model call; a 400 naming the offered models otherwise (403 when the
    administrator locked them, core/locked.py). Choosing the model it is on already changes
    nothing."""
    from .runtime import choose_model  # the runtime imports the agent, which imports this

    offered = runtime.environment.models()
    if requested is not None and not isinstance(requested, str):
        raise ModelSwitchError(
            400,
            f"model must be a string, not {json_type(requested)}; available: {', '.join(offered)}",
        )
    if not requested or not requested.strip():
        raise ModelSwitchError(400, f"model is required; available: {', '.join(offered)}")
    try:
        provider_name, model = choose_model(requested.strip(), offered)
    except ValueError as exc:
        if models_locked(runtime.settings):
            raise ModelSwitchError(403, f"{exc}; {MODELS_LOCKED}") from None
        raise ModelSwitchError(400, str(exc)) from None
    chosen = agent.chosen_provider
    if (chosen.name, chosen.model) != (provider_name, model):
        try:
            provider = runtime.environment.provider(f"{provider_name}/{model}")
        except ValueError as exc:  # offered but not makeable as configured (a missing key)
            raise ModelSwitchError(409, str(exc)) from None
        await agent.choose_provider(provider)
    return model_list(runtime, agent)
