"""How a refusal names a limit the administrator may have locked (`locked_settings`,
docs/jupyterhub.md): the setting as the host spells it, and that it is locked when it is."""

from __future__ import annotations

from .settings import Settings

MODEL_SETTINGS = ("provider", "model", "subagent_models")
"""The settings that make the models offered (the model allow-list, adapters/model_choice.py)."""
MODELS_LOCKED = "the models offered are locked by the administrator"


def limit_name(settings: Settings, name: str) -> str:
    """`c.PrimeAgentLab.max_permission`, with `, locked by the administrator` when it is."""
    spelled = settings.spell(name)
    if name in settings.locked_settings:
        return f"{spelled}, locked by the administrator"
    return spelled


def models_locked(settings: Settings) -> bool:
    """Whether the administrator fixed the models offered."""
    return any(name in settings.locked_settings for name in MODEL_SETTINGS)
