"""Provider keys held by the host process outside its environment.

The server and the CLI move the key variables (`kernel_env_strip`; by default those every installed
provider declares) out of their environment as they start (adapters/withhold_keys.py), so no process
started later inherits them. The values live here; providers get them in their options
(`ProviderOptions.held_keys`) and read their own, and redaction still knows them
(`core/redaction.py`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping


class HeldKeys(Mapping[str, str]):
    """Variable name -> value. Its repr names the variables only, so a log line or a traceback
    that shows the holder never shows a key."""

    def __init__(self, values: Mapping[str, str] | None = None) -> None:
        self._values = {name: value for name, value in (values or {}).items() if value}

    def __getitem__(self, name: str) -> str:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"HeldKeys({sorted(self._values)})"
