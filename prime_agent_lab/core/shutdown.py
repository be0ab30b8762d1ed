"""The process is stopping: end the running turns and snapshot every resident agent, within a
total time bound when one is given (the server's, so a shutdown never hangs on a kernel).

Per agent, in parallel: a running turn is stopped first (its cell interrupted, its `turn_end`
written with the cause); then the agent's kernel variables are snapshotted if time is left. A stop
that does not finish in its share of the time (a cell that ignores the interrupt) has its turn
cancelled, which records the turn as stopped, and gets no snapshot: its kernel is still busy.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from .agent import Agent
from .pending_kernel import kernel_arrived
from .snapshots import SnapshotsUnavailable
from .stop_cause import StopCause

log = logging.getLogger(__name__)

STOP_SHARE = 0.6  # of the time: for stopping turns; the rest is for the snapshots after them
CANCEL_WAIT = 0.5  # seconds a cancelled turn gets to record its end


@dataclass
class ShutdownReport:
    stopped: list[str] = field(default_factory=list)  # session ids whose turn was stopped
    snapshotted: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # session id -> why no snapshot
    failed: dict[str, str] = field(default_factory=dict)  # session id -> the snapshot's error
    seconds: float = 0.0

    def summary(self) -> str:
        parts = [
            f"{len(self.stopped)} running turn(s) stopped",
            f"{len(self.snapshotted)} kernel snapshot(s) taken",
        ]
        parts += [f"no snapshot of {sid}: {why}" for sid, why in self.skipped.items()]
        return f"{'; '.join(parts)} in {self.seconds:.2f} s"

    def failures(self) -> list[str]:
        """One line per snapshot that failed."""
        return [f"the kernel snapshot of {s} was not saved: {e}" for s, e in self.failed.items()]


Save = Callable[[str], Awaitable[object]]
"""Snapshots the kernel of an agent (by session id)."""


async def stop_and_snapshot(
    agents: list[Agent], save: Save, cause: StopCause, seconds: float | None
) -> ShutdownReport:
    """Stop every running turn of `agents` with `cause`, then snapshot each one's kernel, all
    within `seconds` (None: however long it takes). What is still going at the end is left to
    the shutdown that follows (its snapshot is then missing, and said so)."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    deadline = None if seconds is None else started + seconds
    stop_deadline = None if seconds is None else started + seconds * STOP_SHARE
    report = ShutdownReport()
    work = {
        asyncio.ensure_future(_finish(save, agent, cause, stop_deadline, report)): agent
        for agent in agents
    }
    if work:
        _, late = await asyncio.wait(work, timeout=_left(deadline))
        for task in late:
            task.cancel()
            report.skipped.setdefault(work[task].session_id, f"not done within {seconds:g} s")
    report.seconds = loop.time() - started
    return report


def _left(deadline: float | None) -> float | None:
    if deadline is None:
        return None
    return max(0.0, deadline - asyncio.get_running_loop().time())


async def _finish(
    save: Save,
    agent: Agent,
    cause: StopCause,
    stop_deadline: float | None,
    report: ShutdownReport,
) -> None:
    if agent.running:
        stopping = asyncio.ensure_future(agent.stop(cause))
        await asyncio.wait({stopping}, timeout=_left(stop_deadline))
        report.stopped.append(agent.session_id)
        if not stopping.done():
            turn = agent.turn_task
            if turn is not None:
                turn.cancel()
            await asyncio.wait({stopping}, timeout=CANCEL_WAIT)
            report.skipped[agent.session_id] = "its cell did not stop in time"
            return
    if not kernel_arrived(agent.kernel):
        return  # nothing ever ran there
    try:
        await save(agent.session_id)
    except SnapshotsUnavailable as exc:  # the user was told so when its first cell ran
        report.skipped[agent.session_id] = str(exc)
        return
    except Exception as exc:
        report.skipped[agent.session_id] = f"{type(exc).__name__}: {exc}"
        report.failed[agent.session_id] = str(exc)
        return
    report.snapshotted.append(agent.session_id)
