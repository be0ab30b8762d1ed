"""Compaction: when the model's context nears its window, a summary replaces the old prefix.

Checked before each model call (`Compactor.before_model_call`). A compaction is a side call on
the agent's own provider over the entries being dropped (and the previous summary); it appends a
`compaction` entry, and the context builder (`SessionLog.context_messages`) then gives the model
the summary plus the entries from `first_kept_entry_id` to the leaf. Nothing is deleted: the full
record stays in the log and in the kernel's `history`. Design note: docs/compaction.md.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from .agent_view import AgentView
from .entry_schema import compaction_text
from .entry_types import summarised, turn_boundary
from .installed_providers import context_window
from .kernel_gc import KernelGC, read_namespace
from .messages import Message, ModelRequest, ModelResponse
from .ports import ProviderError
from .tokens import (
    context_tokens,
    entries_tokens,
    entry_tokens,
    estimate_tokens,
    reported_context,
)

log = logging.getLogger(__name__)

CUT_TYPES = frozenset({"user_message", "assistant_message", "agent_message"})
"""Where the kept part may begin. Never at a tool result, so a call and its result stay together:
an assistant message is kept or dropped with all its results."""

SUMMARY_MAX_TOKENS = 4_096

SUMMARY_SYSTEM = """You write the working memory of an agent whose conversation is being \
compacted. The agent works in a Python notebook kernel; its variables persist. Summarise the \
conversation you are given so that the agent can continue the task from your summary alone. \
Use exactly these sections, in Markdown:

## Goal
## Constraints
## Progress
(Done / In progress / Blocked)
## Key decisions
## Next steps
## Critical context
(exact values, names, paths, errors and numbers the agent will need)
## Kernel state
(which variables exist in the kernel and what they hold; the agent can inspect them in code)

Be concrete and brief. Never invent progress. Answer with the summary only."""


class CompactionError(Exception):
    """A compaction could not be made (nothing to drop, the model failed)."""


@dataclass(frozen=True)
class CompactionRequest:
    instructions: str | None = None


@dataclass(frozen=True)
class ContextSize:
    tokens: int
    window: int

    @property
    def percent(self) -> float:
        return round(100.0 * self.tokens / self.window, 1) if self.window else 0.0


class Compactor:
    """One agent's compaction: its token count, its schedule, and the compaction itself."""

    def __init__(self, agent: AgentView) -> None:
        self.agent = agent
        self.scheduled: CompactionRequest | None = None
        self.running = False
        self.gc = KernelGC(agent)

    # ------------------------------------------------------------ accounting

    def window(self) -> int:
        provider = self.agent.provider
        return context_window(provider.model, self.agent.config.context_window, provider.name)

    def size(self) -> ContextSize:
        """The context the next model call will send: the size the provider reported for the
        latest call plus an estimate of what was appended since (estimates only, before the
        first call after a compaction)."""
        session = self.agent.session
        tail: list[dict[str, Any]] = []
        cursor = session.leaf_id
        while cursor is not None:
            entry = session.by_id[cursor]
            if entry["type"] == "compaction":
                break
            if entry["type"] == "assistant_message":
                reported = reported_context(entry.get("usage"))
                if reported is not None:
                    tail.reverse()
                    in_turn = session.in_turn_after(entry["id"])
                    return ContextSize(reported + entries_tokens(tail, in_turn), self.window())
            tail.append(entry)
            cursor = entry.get("parent_id")
        return ContextSize(self._estimate(), self.window())

    def _estimate(self) -> int:
        session = self.agent.session
        compaction, kept = session.context_entries()
        system = estimate_tokens(self.agent.system_prompt)
        summary = entry_tokens(compaction) if compaction is not None else 0
        in_turn = session.in_turn_before(kept[0]) if kept else False
        return system + summary + entries_tokens(kept, in_turn)

    def status(self) -> dict[str, Any]:
        size = self.size()
        return {
            "tokens": size.tokens,
            "context_window": size.window,
            "percent": size.percent,
            "scheduled": self.scheduled is not None,
            "threshold": self.threshold(size.window),
            "compactions": sum(1 for e in self.agent.session.path() if e["type"] == "compaction"),
            "kernel_gc": self.gc.state,
        }

    def threshold(self, window: int) -> int:
        return window - reserve_tokens(self.agent.config.compaction_reserve_tokens, window)

    def keep_recent(self) -> int:
        return reserve_tokens(self.agent.config.compaction_keep_recent_tokens, self.window())

    # ------------------------------------------------------------ scheduling

    def schedule(self, instructions: str | None) -> dict[str, Any]:
        """`compact.run`: compact before the next model call of the running turn."""
        if not self.agent.running:
            return {"scheduled": False, "reason": "no active turn; compaction runs within a turn"}
        if instructions is not None and not isinstance(instructions, str):
            raise ValueError("instructions must be a string or None")
        session = self.agent.session
        _, kept = session.context_entries()
        in_turn = session.in_turn_before(kept[0]) if kept else False
        if _cut_index(kept, self.keep_recent(), in_turn) is None:
            return {"scheduled": False, "reason": "session is too short to compact"}
        replaced = self.scheduled is not None
        self.scheduled = CompactionRequest(instructions or None)
        note = "compaction runs before the next model call; the turn then goes on"
        if replaced:
            note = "already scheduled; the instructions were replaced"
        return {"scheduled": True, "note": note}

    # ------------------------------------------------------------ the loop's point

    async def before_model_call(self, turn: int) -> None:
        """Compact when one is scheduled or the context passed the window minus the reserve.

        If the summary call fails, the turn goes on uncompacted while the context still fits
        the window; otherwise it ends with a clear error. Nothing is written on failure.
        """
        await self._apply_cleanup(turn)
        config = self.agent.config
        request = self.scheduled
        size = self.size()
        automatic = config.compaction_enabled and size.tokens > self.threshold(size.window)
        if request is None and not automatic:
            return
        self.scheduled = None
        trigger = "requested" if request is not None else "threshold"
        try:
            await self.compact(turn, request.instructions if request else None, trigger, size)
        except (CompactionError, ProviderError) as exc:
            if size.tokens <= size.window:
                self.agent.notice(
                    "compaction_failed",
                    f"Compaction failed ({exc}); the turn goes on uncompacted "
                    f"({size.tokens:,} of {size.window:,} tokens).",
                    turn=turn,
                )
                return
            raise ProviderError(
                f"the context ({size.tokens:,} tokens) no longer fits the model's window "
                f"({size.window:,}) and compaction failed: {exc}. Nothing was lost; "
                "try again or start a new session",
                kind=getattr(exc, "kind", "compaction"),
            ) from exc

    async def compact(
        self, turn: int, instructions: str | None, trigger: str, size: ContextSize
    ) -> dict[str, Any]:
        session = self.agent.session
        previous, kept = session.context_entries()
        in_turn = session.in_turn_before(kept[0]) if kept else False
        cut = _cut_index(kept, self.keep_recent(), in_turn)
        if cut is None:
            raise CompactionError("session is too short to compact")
        dropped, first_kept = kept[:cut], kept[cut]
        names = await self._kernel_names()
        prompt = summary_prompt(
            dropped, previous.get("summary") if previous else None, instructions, names, in_turn
        )
        self.running = True
        try:
            response = await self._summarise(turn, prompt)
        finally:
            self.running = False
        summary = response.text.strip()
        if not summary:
            raise CompactionError("the model returned an empty summary")
        tokens_after = (
            estimate_tokens(self.agent.system_prompt)
            + entry_tokens({"type": "compaction", "summary": summary})
            + sum(context_tokens(kept, in_turn)[cut:])
        )
        entry = session.append(
            "compaction",
            turn=turn,
            summary=summary,
            first_kept_entry_id=first_kept["id"],
            tokens_before=size.tokens,
            tokens_after=tokens_after,
            instructions=instructions,
            trigger=trigger,
            dropped_entries=len(dropped),
            usage=response.usage.as_dict(),
        )
        self.agent.events.emit(
            "notice", turn=turn, kind="compacted", text=compaction_text(entry, tokens_after)
        )
        self.gc.start(turn, names, summary)
        return entry

    async def _apply_cleanup(self, turn: int) -> None:
        try:
            await self.gc.apply_ready(turn)
        except Exception:  # a clean-up never costs the turn
            log.exception("the kernel clean-up of session %s failed", self.agent.session_id)

    async def _kernel_names(self) -> list[dict[str, Any]] | None:
        try:
            return await read_namespace(self.agent.kernel, timeout=10.0)
        except Exception:  # the summary still helps without the names
            log.warning("reading the kernel's names for a compaction failed", exc_info=True)
            return None

    async def _summarise(self, turn: int, prompt: str) -> ModelResponse:
        request = ModelRequest(
            system=SUMMARY_SYSTEM,
            messages=[Message(role="user", text=prompt)],
            tools=[],
            max_tokens=max(self.agent.config.max_tokens, SUMMARY_MAX_TOKENS),
            accepts_images=False,
            purpose="summary",
        )
        return await self.agent.side_call(turn, request)


def reserve_tokens(configured: int, window: int) -> int:
    """A reserve (or the recent part kept) never takes more than a quarter of a small window,
    so a model with a window of 32,000 tokens still works with the defaults."""
    return max(0, min(configured, window // 4))


def _cut_index(
    entries: list[dict[str, Any]], keep_recent: int, in_turn: bool = False
) -> int | None:
    """Where the kept part begins: the latest allowed cut that keeps at least `keep_recent`
    tokens, or the earliest one after it when that would drop no model step. None: no cut
    drops a step (the session is too short). `in_turn`: whether `entries` begin in a turn."""
    steps = [i for i, e in enumerate(entries) if e["type"] == "assistant_message"]
    if not steps:
        return None
    # At least one whole step goes: dropping only the task would leave its work without it.
    allowed = [i for i in range(steps[0] + 1, len(entries)) if entries[i]["type"] in CUT_TYPES]
    if not allowed:
        return None
    tokens = context_tokens(entries, in_turn)
    kept_tokens, reach = 0, 0
    for i in range(len(entries) - 1, -1, -1):
        kept_tokens += tokens[i]
        if kept_tokens >= keep_recent:
            reach = i
            break
    before = [i for i in allowed if i <= reach]
    return before[-1] if before else allowed[0]


def summary_prompt(
    dropped: list[dict[str, Any]],
    previous_summary: str | None,
    instructions: str | None,
    names: list[dict[str, Any]] | None,
    in_turn: bool = False,
) -> str:
    parts: list[str] = []
    if previous_summary:
        parts.append(f"<previous-summary>\n{previous_summary.strip()}\n</previous-summary>")
    parts.append("<conversation>\n" + render_entries(dropped, in_turn) + "\n</conversation>")
    parts.append("<kernel-state>\n" + render_names(names) + "\n</kernel-state>")
    if instructions:
        parts.append(f"<instructions>\n{instructions.strip()}\n</instructions>")
    parts.append(
        "Write the summary of the conversation above"
        + (" (it continues the previous summary)." if previous_summary else ".")
    )
    return "\n\n".join(parts)


def render_entries(entries: list[dict[str, Any]], in_turn: bool = False) -> str:
    """Consecutive entries of a path as plain text (not as messages: the summary call has no
    tools): what the model read of each, as its type declares (`entry_types.summarised`).
    `in_turn`: whether the first is inside a turn."""
    lines: list[str] = []
    for entry in entries:
        lines.extend(summarised(entry, in_turn))
        boundary = turn_boundary(entry)
        if boundary is not None:
            in_turn = boundary
    return "\n".join(lines)


def render_names(names: list[dict[str, Any]] | None) -> str:
    if names is None:
        return "(the kernel's variables could not be read)"
    if not names:
        return "(no variables)"
    return "\n".join(
        f"{n.get('name')}: {n.get('type')} ({n.get('size', 0):,} bytes)" for n in names[:200]
    )
