"""Which harness stores each session sees, and its prompt section, rebuilt only when a store's
revision changed (any writer: the kernel, the host, another session or process)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ..trust import Signer
from .store import Harness, HarnessError, HarnessStore
from .summary import harness_section

ENV_GLOBAL_DIR = "PRIME_AGENT_LAB_HARNESS_DIR"


def default_global_dir() -> Path:
    """`$PRIME_AGENT_LAB_HARNESS_DIR`, else `prime_agent_lab/harness` in the Jupyter data
    directory (`$JUPYTER_DATA_DIR` or `~/.local/share/jupyter`)."""
    explicit = os.environ.get(ENV_GLOBAL_DIR)
    if explicit:
        return Path(explicit).expanduser()
    data = os.environ.get("JUPYTER_DATA_DIR") or "~/.local/share/jupyter"
    return Path(data).expanduser() / "prime_agent_lab" / "harness"


LOCAL_DIR = "harness"  # inside a session's directory


class HarnessKeeper:
    def __init__(
        self,
        session_directory: Callable[[str], Path],
        signer: Signer,
        global_dir: Path | None = None,
    ) -> None:
        self.session_directory = session_directory
        self.signer = signer
        self.global_store = HarnessStore(global_dir or default_global_dir(), "global")
        self._harnesses: dict[str, Harness] = {}
        self._sections: dict[str, tuple[dict[str, int], str]] = {}

    def harness_for(self, session_id: str) -> Harness:
        harness = self._harnesses.get(session_id)
        if harness is None:
            local = HarnessStore(
                self.session_directory(session_id) / LOCAL_DIR, "local", self.signer
            )
            harness = self._harnesses[session_id] = Harness(local, self.global_store)
        return harness

    def section(self, session_id: str) -> tuple[dict[str, int], str]:
        """(harness version, prompt section) as the stores are now."""
        harness = self.harness_for(session_id)
        try:
            version = harness.version()
        except HarnessError as exc:  # a damaged store: the agent works on, and is told
            return {"local": -1, "global": -1}, f"\n# Continual harness\nUnavailable: {exc}\n"
        cached = self._sections.get(session_id)
        if cached is not None and cached[0] == version:
            return cached
        try:
            built = (version, harness_section(harness))
        except HarnessError as exc:
            return version, f"\n# Continual harness\nUnavailable: {exc}\n"
        if -1 not in version.values():  # a damaged store's reason may change at any revision
            self._sections[session_id] = built
        return built

    def forget(self, session_id: str) -> None:
        self._harnesses.pop(session_id, None)
        self._sections.pop(session_id, None)
