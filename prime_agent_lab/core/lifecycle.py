"""Agent lifecycle: `running`, `idle`, `inactive`, and idle eviction.

A sub-agent that sits idle for the `evict_after_minutes` setting (0: never) with nothing
holding it is evicted: its kernel variables are snapshotted, its kernel is shut down (the
process is gone) and it leaves memory; it is `inactive` in listings. Addressing it (a message,
opening its notebook) opens it from disk again through `AgentRuntime.ensure_loaded`, and its
snapshot comes back into the new kernel before the message starts its turn.

Held (never evicted): a running turn, a running descendant, a message being delivered to it, a
client attached (the host's `has_client`: a chat websocket or a notebook tab on its kernel), or
a pin: a predicate the runtime consults (heartbeats pin their agent once they exist).
Roots are not evicted: a root's kernel is its notebook's, which belongs to the user.
See docs/lifecycle.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from .agent_view import AgentView

log = logging.getLogger(__name__)

Pin = Callable[[str], bool]
"""Session id -> whether something (an active heartbeat, ...) keeps that agent loaded."""

MIN_SWEEP = 0.05  # seconds
MAX_SWEEP = 60.0


def sweep_interval(evict_after: float) -> float:
    """A third of the idle time, between MIN_SWEEP and MAX_SWEEP."""
    return min(max(evict_after / 3, MIN_SWEEP), MAX_SWEEP)


class EvictingRuntime(Protocol):
    """What eviction needs of the runtime (core/runtime.py), which owns the lifecycle."""

    agents: dict[str, Any]
    settings: Any
    family: Any
    environment: Any
    mailbox: Any

    def descendants(self, session_id: str) -> list[str]: ...

    def loading_lock(self, session_id: str) -> asyncio.Lock: ...

    def detach(self, agent: Any) -> None: ...

    def child_left_memory(self, child: Any) -> None: ...

    async def save_snapshot(self, session_id: str, reason: str) -> dict[str, Any]: ...

    async def release_agent_kernel(self, agent: Any) -> None: ...


class Lifecycle:
    def __init__(self, runtime: EvictingRuntime) -> None:
        self._runtime = runtime
        self._last_activity: dict[str, float] = {}
        self._pins: list[Pin] = []
        self._sweeper: asyncio.Task[None] | None = None
        self.evicted: set[str] = set()  # session ids evicted since this runtime started
        self.evictions = 0

    # ------------------------------------------------------------ tracking

    def agent_started(self, agent: AgentView) -> None:
        self.evicted.discard(agent.session_id)
        self._touch(agent.session_id)
        agent.events.add_listener(lambda event: self._touch(agent.session_id))
        self._ensure_sweeper()

    def _touch(self, session_id: str) -> None:
        self._last_activity[session_id] = time.monotonic()

    def addressed(self, session_id: str) -> None:
        """Someone turned to the agent (a tab attached to it): its idle time starts over, and an
        eviction that is under way keeps it (`evict` looks again under the loading lock)."""
        self._touch(session_id)

    def add_pin(self, pin: Pin) -> Callable[[], None]:
        """Keep agents for which `pin(session_id)` is true loaded; returns the remover."""
        self._pins.append(pin)
        return lambda: self._pins.remove(pin) if pin in self._pins else None

    def status(self, session_id: str) -> str:
        agent = self._runtime.agents.get(session_id)
        if agent is None:
            return "inactive"
        return "running" if agent.running else "idle"

    # ------------------------------------------------------------ eviction

    def _ensure_sweeper(self) -> None:
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.ensure_future(self._sweep_forever())

    async def _sweep_forever(self) -> None:
        while True:
            evict_after = 60.0 * self._runtime.settings.evict_after_minutes
            # disabled (0): look again at the longest interval, the setting may change
            await asyncio.sleep(sweep_interval(evict_after) if evict_after > 0 else MAX_SWEEP)
            try:
                await self.sweep()
            except Exception:
                log.exception("the eviction sweep failed")

    async def sweep(self) -> list[str]:
        """Evict every agent that may be evicted now; their session ids."""
        evicted = []
        for agent in list(self._runtime.agents.values()):
            if self.evictable(agent) and await self.evict(agent):
                evicted.append(agent.session_id)
        return evicted

    def evictable(self, agent: AgentView) -> bool:
        runtime = self._runtime
        evict_after = 60.0 * runtime.settings.evict_after_minutes
        session_id = agent.session_id
        member = runtime.family.member(session_id)
        if evict_after <= 0 or member is None or member.parent_session_id is None:
            return False
        idle_for = time.monotonic() - self._last_activity.get(session_id, time.monotonic())
        return (
            idle_for >= evict_after
            and not agent.running
            and not self.held(agent)
            and runtime.agents.get(session_id) is agent
        )

    def held(self, agent: AgentView) -> bool:
        """Something keeps the agent loaded whatever its idle time."""
        runtime = self._runtime
        session_id = agent.session_id
        if any(pin(session_id) for pin in list(self._pins)):
            return True
        if runtime.environment.has_client(session_id, agent.kernel.kernel_id):
            return True
        if runtime.mailbox.pending(session_id):
            return True
        for descendant in runtime.descendants(session_id):
            loaded = runtime.agents.get(descendant)
            if loaded is not None and loaded.running:
                return True
        return False

    async def evict(self, agent: AgentView) -> bool:
        """Snapshot, stop the kernel, leave memory. False (and nothing changed) when the
        snapshot fails or the agent was addressed meanwhile."""
        runtime = self._runtime
        try:
            await runtime.save_snapshot(agent.session_id, "eviction")
        except Exception as exc:
            log.warning("not evicting %s: its snapshot failed: %s", agent.session_id, exc)
            self._touch(agent.session_id)  # try again after another idle period
            return False
        async with runtime.loading_lock(agent.session_id):  # a message waits for the kernel
            if not self.evictable(agent):  # addressed, running or held while it was saved
                return False
            # Marked before it leaves memory, so nobody sees it gone and not yet `inactive`.
            self.evicted.add(agent.session_id)
            runtime.detach(agent)
            await runtime.release_agent_kernel(agent)
        self.evictions += 1
        self._last_activity.pop(agent.session_id, None)
        runtime.child_left_memory(agent)
        log.info("evicted idle agent %s", agent.session_id)
        return True

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
