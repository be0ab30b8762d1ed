"""The loop's settings: output cap, timeouts, retries, model call limits, compaction."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AgentConfig:
    output_cap: int = 20_000
    cell_timeout: float = 600.0
    max_iterations: int = 40
    max_retries: int = 4
    retry_base_delay: float = 1.0
    retry_max_delay: float = 30.0  # cap of the exponential backoff
    max_retry_after: float = 120.0  # longest server-requested Retry-After that is waited for
    max_tokens: int = 4096
    accepts_images: bool = True
    # Compaction (core/compaction.py): before a model call, when the context passes the window
    # minus the reserve, the old prefix is summarised and the most recent tokens kept.
    context_window: int | None = None  # None: the model's window from core/tokens.py
    compaction_enabled: bool = True
    compaction_reserve_tokens: int = 16_384
    compaction_keep_recent_tokens: int = 20_000
