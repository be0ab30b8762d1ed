"""Keep provider API keys out of notebooks, session logs and the model's context.

Agent cells run in a kernel that inherits the server's environment, so a cell could print a key.
Every output of an agent cell passes through a `Redactor` before it is written anywhere.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

SECRET_ENV_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY")
MIN_SECRET_LENGTH = 8
REPLACEMENT = "[redacted]"


class Redactor:
    def __init__(self, secrets: Iterable[str]) -> None:
        unique = {s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH}
        self._secrets = sorted(unique, key=len, reverse=True)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Redactor:
        source = os.environ if environ is None else environ
        return cls(source.get(name, "") for name in SECRET_ENV_VARS)

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def text(self, value: str) -> str:
        for secret in self._secrets:
            if secret in value:
                value = value.replace(secret, REPLACEMENT)
        return value

    def output(self, output: dict[str, Any]) -> dict[str, Any]:
        """A copy of an nbformat output with every string in it redacted."""
        return self._walk(output) if self._secrets else output

    def _walk(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self._walk(v) for v in value]
        if isinstance(value, dict):
            return {k: self._walk(v) for k, v in value.items()}
        return value
