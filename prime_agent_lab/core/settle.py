"""Waiting until an agent's sub-agents are settled: the one wait of the goal and autonomous
continuers (docs/autonomy.md).

Settled means none of the agent's sub-agents (at any depth) runs a turn, no message is under way
to be delivered, and then no user's cell runs in the agent's kernel. The wait is inside the turn,
so Stop (or a budget's stop) cancels it. A message that comes for the turn while a sub-agent
still works is not held back: the wait answers False and the loop takes the message first (a
child asking its parent and waiting for the answer must not wait for the parent's
continuation); the continuer waits again after the model's next answer.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from .ports import IdleWaiter

if TYPE_CHECKING:
    from .agent import Agent
    from .caller import TreeRuntime

log = logging.getLogger(__name__)

MESSAGE_POLL_SECONDS = 0.1
"""How often a waiting continuation looks for a message that came for the turn."""


def descendants(runtime: TreeRuntime, session_id: str, deleted: bool = False) -> list[str]:
    """The sessions below `session_id` at any depth (`deleted`: deleted ones too)."""
    out: list[str] = []
    for child in runtime.family.children(session_id, deleted=deleted):
        out += [child.session_id, *descendants(runtime, child.session_id, deleted)]
    return out


async def settled(runtime: TreeRuntime, agent: Agent) -> bool:
    """True once the agent's sub-agents are settled (none runs a turn, no message is being
    delivered) and then no user's cell runs in its kernel. False when, while a sub-agent still
    works, a message waits to enter the turn (news from it, a question): the loop takes it
    first, and the continuer is asked again after the model's next answer, so the two never
    wait for each other. Stop cancels the wait."""
    while working := _working(runtime, agent):
        if not await _until_done(runtime, agent, working):
            return False
    kernel = agent.kernel
    if isinstance(kernel, IdleWaiter):
        try:
            await kernel.wait_idle()
        except Exception as exc:  # a kernel that cannot be asked: its next cell says why
            log.warning("waiting for kernel %s failed: %s", kernel.kernel_id, exc)
        if _working(runtime, agent):  # the user's cell started one meanwhile
            return await settled(runtime, agent)
    return True


def _working(runtime: TreeRuntime, agent: Agent) -> list[asyncio.Future[Any]]:
    """The turns of the agent's sub-agents (at any depth) and the deliveries under way."""
    working: list[asyncio.Future[Any]] = []
    for sid in descendants(runtime, agent.session_id):
        child = runtime.agents.get(sid)
        if child is not None and child.running and child.turn_task is not None:
            working.append(child.turn_task)
    return working + runtime.mailbox.deliveries()


async def _until_done(
    runtime: TreeRuntime, agent: Agent, futures: list[asyncio.Future[Any]]
) -> bool:
    """Until every one of `futures` is done (True), or, while one is not, a message waits to
    enter the turn (False)."""
    pending = set(futures)
    while pending:
        if runtime.mailbox.entering_turn(agent.session_id):
            return False
        _, pending = await asyncio.wait(pending, timeout=MESSAGE_POLL_SECONDS)
    for _ in range(3):  # turn_ended hooks run as done-callbacks: let them start turns
        await asyncio.sleep(0)
    return True
