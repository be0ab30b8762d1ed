"""The timer of one runtime: fires the scheduled jobs (heartbeats, schedules) of every session.

One asyncio task sleeps until the earliest next run across the loaded schedules files (not a
poll per heartbeat); any change re-arms it. When it wakes it claims what is due (each session's
store advances the job and records an open dispatch first), then delivers each claimed tick as a
journaled message in the target's mailbox (core/mailbox.py `deliver_tick`: steer or follow-up,
an agent that is not loaded is brought back), and only then closes the dispatch. A job whose
previous tick is still open or still waiting in the mailbox is skipped (coalesced).

Files changed by another process (`prime-agent-lab schedule add` while a server runs) are seen
at the next wake: every store write touches `.schedules-changed` in the sessions root, and the
timer wakes at least every `WATCH_SECONDS` to stat that one file; only when it changed does it
look at each session's `schedules.json` (its mtime) again. Idle cost: one stat per wake.

A root agent comes back only when its notebook is opened (its kernel is the user's), so its due
jobs wait, unclaimed, until it is loaded; then the missed ticks fire once. Sub-agents are
brought back by their tick. Only files this user signed fire (core/schedules.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from .entry_types import TICK_FIELDS
from .schedules import (
    CHANGED_STAMP,
    SCHEDULES_FILE,
    Claim,
    ScheduleStore,
    Skip,
    iso,
)
from .sessions import is_session_id

log = logging.getLogger(__name__)

WATCH_SECONDS = 5.0
RETRY_SECONDS = 30.0  # a store that cannot be written (a full disk) is tried again after this
PAUSE_AFTER_CLAIM_ENV = "PRIME_AGENT_LAB_TEST_PAUSE_AFTER_CLAIM"
"""Tests only: seconds to wait between claiming a tick and delivering it (a crash window)."""


def utc_now() -> datetime:
    return datetime.now(UTC)


class Scheduler:
    def __init__(
        self,
        runtime: Any,
        clock: Callable[[], datetime] = utc_now,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        watch_seconds: float = WATCH_SECONDS,
    ) -> None:
        self._runtime = runtime
        self.clock = clock
        self.sleep = sleep
        self.watch_seconds = watch_seconds
        self._stores: dict[str, ScheduleStore] = {}
        self._earliest: dict[str, datetime] = {}  # trusted stores with an active job
        self._pinned: set[str] = set()  # sessions with an active job
        self._mtimes: dict[str, int | None] = {}
        # ticks journaled whose dispatch could not be closed (a full disk): closed at next wake
        self._unrecorded: dict[str, dict[str, str]] = {}
        self._stamp: int | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self.wakes = 0  # how often the timer woke (the bench reads it)
        self.pause_after_claim = float(os.environ.get(PAUSE_AFTER_CLAIM_ENV) or 0)

    # ------------------------------------------------------------ the stores

    def store(self, session_id: str) -> ScheduleStore:
        store = self._stores.get(session_id)
        if store is None:
            directory = self._runtime.repository.directory(session_id)
            store = self._stores[session_id] = ScheduleStore(directory, self._runtime.signer)
        return store

    def load(self) -> int:
        """At runtime start: every session's schedules file is read; a dispatch a crash left
        open is marked interrupted (never replayed). How many sessions have active jobs."""
        root = self._runtime.repository.root
        self._stamp = _mtime(root / CHANGED_STAMP)
        for session_id in self._sessions_with_schedules():
            try:
                for dispatch in self.store(session_id).recover(self.clock()):
                    log.warning(
                        "scheduled job %s of %s was interrupted before its tick was delivered; "
                        "it is not replayed",
                        dispatch["job_id"],
                        session_id,
                    )
            except OSError as exc:
                log.warning("the schedules of %s cannot be recovered: %s", session_id, exc)
            self.refresh(session_id)
        return len(self._pinned)

    def _sessions_with_schedules(self) -> list[str]:
        root = self._runtime.repository.root
        try:
            entries = list(os.scandir(root))
        except OSError:
            return []
        return [
            e.name
            for e in entries
            if is_session_id(e.name)
            and not e.is_symlink()  # a linked session folder is never followed
            and os.path.lexists(os.path.join(e.path, SCHEDULES_FILE))
        ]

    def refresh(self, session_id: str) -> None:
        """Read `session_id`'s file again (after a change): its earliest run, whether it pins."""
        store = self.store(session_id)
        self._mtimes[session_id] = store.mtime()
        schedules = store.read()
        deleted = self._runtime.family.is_deleted(session_id)
        active = schedules.state == "trusted" and bool(schedules.active()) and not deleted
        earliest = schedules.earliest() if active else None
        if earliest is not None:
            self._earliest[session_id] = earliest
        else:
            self._earliest.pop(session_id, None)
        if active:
            self._pinned.add(session_id)
        else:
            self._pinned.discard(session_id)

    def changed(self, session_id: str) -> None:
        """A job of `session_id` changed in this process: re-read it and re-arm the timer."""
        self.refresh(session_id)
        self.wake()

    def pinned(self, session_id: str) -> bool:
        """The lifecycle's pin: an agent with an active job is not evicted."""
        return session_id in self._pinned

    @property
    def active_sessions(self) -> int:
        """How many sessions have an active job (pinned agents)."""
        return len(self._pinned)

    def untrusted(self, session_id: str) -> str | None:
        """What an unsigned (or foreign-signed) schedules file of the session would run."""
        schedules = self.store(session_id).read()
        if schedules.state != "untrusted":
            return None
        jobs = [j for j in schedules.jobs if j["status"] in ("active", "paused")]
        first = f'; the first says "{jobs[0]["instruction"][:80]}"' if jobs else ""
        return f"{len(jobs)} scheduled job(s) (they start turns on their own{first})"

    def trust(self, session_id: str) -> bool:
        """The user trusts the session: sign its schedules file as it is; it fires from now."""
        store = self.store(session_id)
        signed = store.sign()
        if signed:
            store.recover(self.clock())  # a dispatch it brought open is not replayed either
            self.changed(session_id)
        return signed

    # ------------------------------------------------------------ the timer

    def arm(self) -> None:
        """Start the timer (needs the running event loop)."""
        if self._closed or (self._task is not None and not self._task.done()):
            return
        self._wake = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.ensure_future(self._run())

    def wake(self) -> None:
        """Re-arm the timer now (from the event loop, or from a thread: trusting a session
        signs its files off the loop)."""
        if self._wake is None or self._loop is None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            self._wake.set()
        elif not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._wake.set)

    def agent_started(self, session_id: str) -> None:
        """A root agent came back: its jobs that waited for it may fire now."""
        if session_id in self._earliest:
            self.wake()

    async def _run(self) -> None:
        assert self._wake is not None
        while not self._closed:
            self._wake.clear()
            try:
                await self.tick()
            except Exception:
                log.exception("the scheduler's tick failed")
            sleeper = asyncio.ensure_future(self.sleep(self._delay()))
            waker = asyncio.ensure_future(self._wake.wait())
            try:
                await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (sleeper, waker):
                    task.cancel()
            self.wakes += 1
            try:
                await asyncio.to_thread(self._look_for_changes)
            except Exception:
                log.exception("looking for changed schedules failed")

    def _delay(self) -> float:
        now = self.clock()
        due = [
            (when - now).total_seconds()
            for sid, when in self._earliest.items()
            if self._reachable(sid)
        ]
        return max(0.0, min([self.watch_seconds, *due]))

    def _look_for_changes(self) -> None:
        stamp = _mtime(self._runtime.repository.root / CHANGED_STAMP)
        if stamp == self._stamp:
            return
        self._stamp = stamp
        for session_id in self._sessions_with_schedules():
            if self.store(session_id).mtime() != self._mtimes.get(session_id):
                self.refresh(session_id)

    def _reachable(self, session_id: str) -> bool:
        """Loaded, or a sub-agent the mailbox brings back from disk."""
        if session_id in self._runtime.agents:
            return True
        member = self._runtime.family.member(session_id)
        return (
            member is not None
            and member.parent_session_id is not None
            and not self._runtime.family.is_deleted(session_id)
        )

    async def tick(self) -> int:
        """Claim and deliver every tick due now. How many were delivered."""
        now = self.clock()
        delivered = 0
        for session_id, earliest in list(self._earliest.items()):
            if earliest > now or not self._reachable(session_id):
                continue
            delivered += await self._fire(session_id, now)
        return delivered

    async def _fire(self, session_id: str, now: datetime) -> int:
        store = self.store(session_id)
        mailbox = self._runtime.mailbox

        def waiting(job: dict[str, Any]) -> bool:
            last = job.get("last_message_id")
            return isinstance(last, str) and mailbox.waiting(session_id, last)

        try:
            for dispatch_id, message_id in list(self._unrecorded.get(session_id, {}).items()):
                await asyncio.to_thread(store.delivered, dispatch_id, message_id, now)
                del self._unrecorded[session_id][dispatch_id]
            results = await asyncio.to_thread(store.claim_due, now, waiting)
        except OSError as exc:  # nothing was claimed; not again at once (no busy loop)
            log.warning("the due jobs of %s cannot be claimed: %s", session_id, exc)
            self._earliest[session_id] = now + timedelta(seconds=RETRY_SECONDS)
            return 0
        delivered = 0
        for result in results:
            if isinstance(result, Skip):
                self._emit(session_id, "skipped", result.job)
            elif isinstance(result, Claim):
                delivered += await self._deliver(session_id, store, result)
        self.refresh(session_id)
        return delivered

    async def _deliver(self, session_id: str, store: ScheduleStore, claim: Claim) -> int:
        job, dispatch = claim.job, claim.dispatch
        self._emit(session_id, "claimed", job, dispatch=dispatch, coalesced=claim.coalesced)
        if self.pause_after_claim:
            await asyncio.sleep(self.pause_after_claim)
        origin = dict(
            zip(
                TICK_FIELDS,
                (
                    job["id"],
                    job["label"],
                    job["owner"],
                    str(job["schedule"].get("kind", "")),
                    dispatch["scheduled_for"],
                ),
                strict=True,
            )
        )
        try:
            message_id = self._runtime.mailbox.deliver_tick(
                session_id, job["instruction"], job["delivery_mode"], origin
            )
        except Exception as exc:  # not journaled: the tick is lost, said so, never replayed
            log.warning("a tick of %s for %s was not delivered: %s", job["id"], session_id, exc)
            await asyncio.to_thread(store.close_dispatch, dispatch["id"], str(exc), self.clock())
            self._emit(session_id, "interrupted", job, dispatch=dispatch, error=str(exc))
            return 0
        self._emit(session_id, "delivered", job, dispatch=dispatch, message_id=message_id)
        try:
            await asyncio.to_thread(store.delivered, dispatch["id"], message_id, self.clock())
        except OSError as exc:  # journaled all the same: the mailbox delivers it once
            log.warning("the tick %s of %s is not recorded yet: %s", message_id, job["id"], exc)
            self._unrecorded.setdefault(session_id, {})[dispatch["id"]] = message_id
        return 1

    def _emit(
        self,
        session_id: str,
        phase: str,
        job: dict[str, Any],
        dispatch: dict[str, Any] | None = None,
        **extra: Any,
    ) -> None:
        agent = self._runtime.agents.get(session_id)
        if agent is None:
            return
        fields: dict[str, Any] = {
            "phase": phase,
            "schedule_id": job["id"],
            "label": job["label"],
            "owner": job["owner"],
            "delivery_mode": job["delivery_mode"],
            "next_run_at": job.get("next_run_at"),
            "run_count": int(job.get("run_count", 0)),
        }
        if dispatch is not None:
            fields["scheduled_for"] = dispatch["scheduled_for"]
        if phase == "skipped":
            fields["skipped_at"] = job.get("last_skipped_at") or iso(self.clock())
        agent.events.emit("heartbeat", **fields, **extra)

    async def close(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def _mtime(path: os.PathLike[str] | str) -> int | None:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None
