"""The process is stopping: end the running turns as `shutdown` and snapshot every resident agent,
within a total time bound, so a shutdown never hangs on a kernel.

Per agent, in parallel: a running turn is stopped first (its cell interrupted, its `turn_end`
written with the cause); then the agent's kernel variables are snapshotted if time is left. A stop
that does not finish in its share of the time (a cell that ignores the interrupt) has its turn
cancelled, which records the turn as stopped, and gets no snapshot: its kernel is still busy.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from .agent import Agent
from .runtime import AgentRuntime, kernel_arrived
from .stop_cause import StopCause

log = logging.getLogger(__name__)

STOP_SHARE = 0.6  # of the time: for stopping turns; the rest is for the snapshots after them
CANCEL_WAIT = 0.5  # seconds a cancelled turn gets to record its end


@dataclass
class ShutdownReport:
    stopped: list[str] = field(default_factory=list)  # session ids whose turn was stopped
    snapshotted: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # session id -> why no snapshot
    seconds: float = 0.0

    def summary(self) -> str:
        parts = [
            f"{len(self.stopped)} running turn(s) stopped",
            f"{len(self.snapshotted)} kernel snapshot(s) taken",
        ]
        parts += [f"no snapshot of {sid}: {why}" for sid, why in self.skipped.items()]
        return f"{'; '.join(parts)} in {self.seconds:.2f} s"


async def stop_and_snapshot(
    runtime: AgentRuntime, cause: StopCause, seconds: float
) -> ShutdownReport:
    """Stop every running turn with `cause`, then snapshot every resident agent's kernel, all
    within `seconds`. No queued message starts a turn from here on. What is still going at the
    end is left to the shutdown that follows (its snapshot is then missing, and said so)."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    deadline = started + seconds
    stop_deadline = started + seconds * STOP_SHARE
    report = ShutdownReport()
    runtime.mailbox.close()  # a stopped turn must not let a waiting message start the next one
    agents = list(runtime.agents.values())
    work = {
        asyncio.ensure_future(_finish(runtime, agent, cause, stop_deadline, report)): agent
        for agent in agents
    }
    if work:
        _, late = await asyncio.wait(work, timeout=max(0.0, deadline - loop.time()))
        for task in late:
            task.cancel()
            report.skipped.setdefault(work[task].session_id, f"not done within {seconds:g} s")
    report.seconds = loop.time() - started
    return report


async def _finish(
    runtime: AgentRuntime,
    agent: Agent,
    cause: StopCause,
    stop_deadline: float,
    report: ShutdownReport,
) -> None:
    loop = asyncio.get_running_loop()
    if agent.running:
        stopping = asyncio.ensure_future(agent.stop(cause))
        await asyncio.wait({stopping}, timeout=max(0.0, stop_deadline - loop.time()))
        report.stopped.append(agent.session_id)
        if not stopping.done():
            turn = agent.turn_task
            if turn is not None:
                turn.cancel()
            await asyncio.wait({stopping}, timeout=CANCEL_WAIT)
            report.skipped[agent.session_id] = "its cell did not stop in time"
            return
    if not kernel_arrived(agent):
        return  # nothing ever ran there
    try:
        await runtime.save_snapshot(agent.session_id, "shutdown")
    except Exception as exc:
        report.skipped[agent.session_id] = f"{type(exc).__name__}: {exc}"
        return
    report.snapshotted.append(agent.session_id)
