"""Which model an agent runs on, for both hosts: the configured provider and model for roots and
by default, and the `subagent_models` a sub-agent may ask for (`rlm(..., model=...)`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..core.installed_providers import provider_problem
from ..core.locked import MODELS_LOCKED, models_locked
from ..core.ports import ModelProvider
from ..core.runtime import choose_model
from ..core.settings import SettingError, Settings
from ..providers import make_provider


class ProviderUnavailable(ValueError):
    """A provider that cannot be made as configured (an unknown name, an unreadable script):
    its message is a sentence for the user."""


class ModelChoice:
    def __init__(
        self,
        settings: Callable[[], Settings],
        keys: Mapping[str, str],
        default: Callable[[], ModelProvider] | None = None,
    ) -> None:
        """`settings`: the host's settings as they are now; `keys`: provider keys held outside
        the environment (core/held_keys.py); `default`: how the default provider is made (the
        configured one when None)."""
        self._settings = settings
        self._keys = keys
        self._default = default
        self._resolved: tuple[str, str] | None = None  # the default's, once learnt

    def make(self, provider: str, model: str | None) -> ModelProvider:
        """A provider `provider` on `model` (None: its default), configured by the settings."""
        settings = self._settings()
        try:
            return make_provider(
                provider,
                model,
                held_keys=self._keys,
                script_path=settings.script_path,
                stream=settings.stream,
                timeout=settings.request_timeout,
                fenced_code=settings.fenced_code_fallback,
                step_delay=settings.step_delay,
            )
        except ValueError as exc:
            raise ProviderUnavailable(str(exc)) from None

    def configured(self) -> ModelProvider:
        """The provider and model the settings name (the provider's default model if none)."""
        settings = self._settings()
        for entry in settings.subagent_models:  # offered in the picker: each must be usable
            wrong = provider_problem(entry)
            if wrong is not None:
                raise SettingError(f"{settings.spell('subagent_models')} {wrong}")
        provider = self.make(settings.provider, settings.model)
        if not settings.model:
            self._resolved = (provider.name, provider.model)
        return provider

    def _default_model(self) -> tuple[str, str]:
        """(provider, model) of the default provider as made, not as the settings spell it: a
        script of your own names the model after its file (providers/builtin.py), and sessions
        record that name, which must come back to the same provider."""
        if self._resolved is None:
            made = self.default()
            self._resolved = (made.name, made.model)
        return self._resolved

    def default_changed(self) -> None:
        """The default provider is made differently from now on: learn its model again."""
        self._resolved = None

    def default(self) -> ModelProvider:
        return self._default() if self._default is not None else self.configured()

    def models(self) -> list[str]:
        """The models agents may run on, as `provider/model`, the default first."""
        default = "/".join(self._default_model())
        return [default, *(m for m in self._settings().subagent_models if m != default)]

    def provider(self, model: str | None) -> ModelProvider:
        """A provider for `model` (`provider/model`, a bare model name, or None: the default);
        ValueError naming the models there are when it is not one of them (and that the
        administrator locked them, when so)."""
        if model is None:
            return self.default()
        try:
            name, chosen = choose_model(model, self.models())
        except ValueError as exc:
            if models_locked(self._settings()):
                raise ValueError(f"{exc}; {MODELS_LOCKED}") from None
            raise
        if (name, chosen) == self._default_model():
            return self.default()
        return self.make(name, chosen)

    def resumed(self, provider: str, model: str) -> ModelProvider:
        """The provider a session continues on: its last model (the last one chosen) while it
        is still offered (`models()`), else the default (the agent records the change)."""
        if (provider, model) != self._default_model() and f"{provider}/{model}" in self.models():
            return self.make(provider, model)
        return self.default()
