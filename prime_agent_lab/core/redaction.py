"""Keep provider API keys out of notebooks, session logs and the model's context.

A key can still reach a cell (a file, a kernel started with a key on purpose), so a cell could
print one. Every output of an agent cell passes through a `Redactor` before it is written anywhere.
The keys are the values of the key variables every installed provider declares
(core/installed_providers.py).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from typing import Any

from .installed_providers import installed

MIN_SECRET_LENGTH = 8
REPLACEMENT = "[redacted]"

_withheld: set[str] = set()
_withheld_version = 0  # bumped when `_withheld` grows: a live `Redactor` then re-reads it


def redact_withheld(values: Iterable[str]) -> None:
    """Secrets this process holds but no kernel may see: the keys it moved out of its
    environment (adapters/withhold_keys.py), the MCP servers' secrets (core/mcp/config.py).
    Redacted by every `Redactor.from_environ()`, the ones made before this call included."""
    global _withheld_version
    new = {value for value in values if value} - _withheld
    if new:
        _withheld.update(new)
        _withheld_version += 1


class RedactingLogFilter(logging.Filter):
    """Redacts the withheld secrets from a logger's records: the HTTP client and the MCP SDK
    log a server's whole URL, query and userinfo included."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = Redactor.from_environ().text(message)
        if redacted != message:
            record.msg, record.args = redacted, ()
        return True


def redact_logs_of(*names: str) -> None:
    """Add a `RedactingLogFilter` to each logger of `names` (once)."""
    for name in names:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactingLogFilter) for f in logger.filters):
            logger.addFilter(RedactingLogFilter())


def kernel_environment(
    strip: Iterable[str] | None = None, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment for a kernel the agent starts itself: this process's, without the
    variables `strip` (None: the providers' key variables). The host took them out of its
    environment at start already (adapters/withhold_keys.py); this also drops one set since."""
    source = os.environ if environ is None else environ
    dropped = set(installed().key_variables() if strip is None else strip)
    return {name: value for name, value in source.items() if name not in dropped}


class Redactor:
    def __init__(self, secrets: Iterable[str], *, live: bool = False) -> None:
        """`live`: the withheld secrets too, as they are at each use (`redact_withheld`)."""
        self._fixed = {s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH}
        self._live = live
        self._version = -1
        self._sorted: list[str] = []

    @property
    def _secrets(self) -> list[str]:
        version = _withheld_version if self._live else 0
        if self._version != version:
            self._version = version
            live = {s for s in _withheld if len(s) >= MIN_SECRET_LENGTH} if self._live else set()
            self._sorted = sorted(self._fixed | live, key=len, reverse=True)
        return self._sorted

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Redactor:
        """The values of the providers' key variables in `environ` (default: this process's
        environment, and the secrets it withheld, now and later)."""
        source = os.environ if environ is None else environ
        variables = installed().key_variables()
        return cls((source.get(name, "") for name in variables), live=environ is None)

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def text(self, value: str) -> str:
        for secret in self._secrets:
            if secret in value:
                value = value.replace(secret, REPLACEMENT)
        return value

    def held_tail(self, text: str) -> int:
        """Length of the longest end of `text` that is the beginning of a secret."""
        longest = 0
        for secret in self._secrets:
            for size in range(min(len(secret) - 1, len(text)), longest, -1):
                if text.endswith(secret[:size]):
                    longest = size
                    break
        return longest

    def found_in(self, data: bytes) -> bool:
        """Whether `data` (a pickled variable, say) holds one of the secrets as it is: UTF-8 (as
        pickle stores a `str`), or UTF-32 / UTF-16 little-endian (a numpy string array)."""
        return any(
            secret.encode(encoding) in data
            for secret in self._secrets
            for encoding in ("utf-8", "utf-32-le", "utf-16-le")
        )

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


class StreamRedactor:
    """Redacts stream text that arrives in pieces, so a key split across two writes is caught.

    The tail of each stream that could be the start of a key is held back until the next piece
    (or `flush`); everything else passes through at once, so live output is not delayed.
    """

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self._pending: dict[str, str] = {}

    def feed(self, name: str, text: str) -> str:
        if not self._redactor:
            return text
        text = self._redactor.text(self._pending.pop(name, "") + text)
        hold = self._redactor.held_tail(text)
        if hold:
            self._pending[name] = text[-hold:]
            text = text[:-hold]
        return text

    def flush(self) -> list[tuple[str, str]]:
        pending = [(name, text) for name, text in self._pending.items() if text]
        self._pending.clear()
        return pending
