"""Who answered one model call and what it cost: recorded on each `assistant_message` and shown in
its footer (docs/pairing.md, "Model and cost"). Its own module, below the agent loop and the ops
that switch models, so the loop does not import them."""

from __future__ import annotations

from typing import Any

from .installed_providers import installed
from .token_counts import priceable
from .wire import AnswerCost


def answer_cost(provider: str, model: str, usage: dict[str, Any]) -> AnswerCost:
    """Who answered one model call and its cost in US dollars at the provider's declared list
    price (None when it declares none for the model)."""
    return {"provider": provider, "model": model, "cost": answer_price(provider, model, usage)}


def answer_price(provider: str, model: str, usage: dict[str, Any]) -> float | None:
    """One model call's cost in US dollars, None when the provider declares no price for it or
    a priced figure of its usage is not a token count (core/token_counts.py)."""
    price = installed().price(provider, model)
    return price.of(usage) if price and priceable(usage) else None
