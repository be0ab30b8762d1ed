"""Auto-refine: a cheap review call decides whether a refinement is worth planning.

It is due every `every` assistant messages (model calls) and after a compaction, and runs when
the turn that made it due ends (so it reads the whole turn and never competes with the turn's
own model calls), at most once per cooldown, for root agents only. It listens to the agent's
events (`assistant_message`, the `compacted` notice, `turn_ended`), so neither the loop nor
compaction knows about it. An approved review schedules a refinement with trigger `auto:turns`
or `auto:compaction` and instructions that prefer no edits without clear evidence.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..compaction import render_entries
from ..events import Event
from ..messages import Message, ModelRequest
from ..ports import ProviderError
from .refine_plan import first_json, render_history, render_state, section
from .refiner import Refiner
from .store import HarnessError

log = logging.getLogger(__name__)

REVIEW_MAX_TOKENS = 1_024
REVIEW_CONVERSATION_CHARS = 40_000

REVIEW_SYSTEM = """You review whether an agent's continual harness (prompt notes, memories, \
skills, sub-agent specs) should be refined now, from its recent trajectory. Refining is worth \
it only when the trajectory shows clear evidence: a fact the agent had to rediscover, a mistake \
it repeated, a procedure it wrote more than once, a user correction. Answer with JSON only:
{"should_refine": true | false, "rationale": "<one or two sentences>",
 "instructions": "<what the refinement should look at; only when should_refine>"}"""

AUTO_INSTRUCTIONS = (
    "This refinement was triggered automatically ({why}). Edit local entries only where the "
    "trajectory gives clear evidence; prefer an empty edits list otherwise."
)


@dataclass(frozen=True)
class AutoRefineSettings:
    every: int  # assistant messages between reviews; 0: off
    after_compaction: bool
    cooldown_seconds: float


@dataclass(frozen=True)
class Review:
    should_refine: bool
    rationale: str
    instructions: str | None = None


class AutoRefiner:
    """The review gate of one root agent."""

    def __init__(
        self,
        refiner: Refiner,
        settings: Callable[[], AutoRefineSettings],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.refiner = refiner
        self.agent = refiner.agent
        self.settings = settings
        self.clock = clock
        self.messages = 0  # assistant messages since the last review
        self.due: tuple[str, str] | None = None  # (trigger, why), reviewed when the turn ends
        self.last_review: float | None = None
        self.reviewing = False
        self.reviews = 0
        self._task: asyncio.Task[None] | None = None
        self.agent.events.add_listener(self._on_event)

    def _on_event(self, event: Event) -> None:
        settings = self.settings()
        if event["type"] == "assistant_message":
            self.messages += 1
            if settings.every > 0 and self.messages >= settings.every and self.due is None:
                self.due = ("turns", f"{self.messages} assistant turns since the last review")
        elif _is_compaction(event) and settings.after_compaction and settings.every > 0:
            self.due = ("compaction", "the context was just compacted")
        elif event["type"] == "turn_ended" and self.due is not None:
            trigger, why = self.due
            self.due = None
            self._review(trigger, why)

    def _review(self, trigger: str, why: str) -> None:
        settings = self.settings()
        now = self.clock()
        if self.reviewing or settings.every <= 0:
            return
        if self.last_review is not None and now - self.last_review < settings.cooldown_seconds:
            return
        self.reviewing = True
        self.last_review = now
        self.messages = 0
        self._task = asyncio.ensure_future(self._run(trigger, why))

    async def _run(self, trigger: str, why: str) -> None:
        try:
            review = await self.review(why)
        except Exception as exc:  # a failed review waits out the cooldown like a declined one
            log.warning("the auto-refine review of %s failed: %s", self.agent.session_id, exc)
            review = Review(False, f"the review failed: {exc}")
        finally:
            self.reviewing = False
            self.reviews += 1
        self.agent.session.append(
            "refine_review",
            trigger=f"auto:{trigger}",
            should_refine=review.should_refine,
            rationale=review.rationale,
        )
        if review.should_refine:
            instructions = AUTO_INSTRUCTIONS.format(why=why)
            if review.instructions:
                instructions += f"\nThe review suggests: {review.instructions}"
            self.refiner.schedule(instructions, global_=False, trigger=f"auto:{trigger}")

    async def review(self, why: str) -> Review:
        prompt = await asyncio.to_thread(self._prompt, why)
        request = ModelRequest(
            system=REVIEW_SYSTEM,
            messages=[Message(role="user", text=prompt)],
            tools=[],
            max_tokens=REVIEW_MAX_TOKENS,
            accepts_images=False,
            purpose="refine_review",
        )
        turn = self.agent.current_turn or self.agent.session.turns()
        try:
            response = await self.agent.side_call(turn, request)
        except ProviderError as exc:
            return Review(False, f"the review call failed ({exc.kind}): {exc}")
        return parse_review(response.text)

    def _prompt(self, why: str) -> str:
        harness = self.refiner.harness
        try:
            state = render_state(entry.to_dict() for entry in harness.list())
        except HarnessError as exc:
            state = f"(unreadable: {exc})"
        conversation = render_entries(self.agent.session.path())[-REVIEW_CONVERSATION_CHARS:]
        return "\n\n".join(
            [
                section("trigger", why),
                section("current_harness_state", state),
                section("refinement_history", render_history(self.refiner.history())),
                section("conversation", conversation or "(no conversation yet)"),
                "Should the harness be refined now? Answer with the JSON object only.",
            ]
        )

    async def finish(self) -> None:
        """Let a review under way decide (it may ask for a refinement)."""
        if self._task is not None and not self._task.done():
            await asyncio.wait({self._task})

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()


def _is_compaction(event: Event) -> bool:
    return event["type"] == "notice" and event.get("kind") == "compacted"


def parse_review(text: str) -> Review:
    """Tolerant: bare, fenced or embedded JSON; `should_refine` or `shouldRefine`. Anything
    unreadable declines."""
    value = first_json(text)
    if not isinstance(value, dict):
        return Review(False, f"the review reply is not a JSON object: {text[:200]!r}")
    decision = value.get("should_refine", value.get("shouldRefine", False))
    rationale = value.get("rationale", "")
    instructions = value.get("instructions")
    return Review(
        decision is True,
        rationale if isinstance(rationale, str) else json.dumps(rationale),
        instructions if isinstance(instructions, str) and instructions.strip() else None,
    )


def settings_of(runtime_settings: Any) -> AutoRefineSettings:
    """The auto-refine part of the settings (core/settings.py)."""
    return AutoRefineSettings(
        every=runtime_settings.auto_refine_every,
        after_compaction=runtime_settings.auto_refine_after_compaction,
        cooldown_seconds=60.0 * runtime_settings.auto_refine_cooldown_minutes,
    )
