"""One session's scheduled jobs on disk: `schedules.json` in the session directory.

The file holds the jobs (heartbeats and schedules of that session's agent) and their dispatches
(one per claimed tick). It is written whole (a temporary file renamed over it) under an advisory
lock beside it, since the server and the `prime-agent-lab schedule` command may write it at once,
and it is signed with this user's secret like queued mail (core/trust.py): a file that is unsigned
or signed by someone else (a colleague's folder, a git clone) is `untrusted` and never fires, nor
is it written over, until the user trusts the session (`sign`). A file that cannot be read as
this product writes it is `broken`: it never fires and is not written over either (nothing lost).

A due tick is claimed before it is delivered (`claim_due`): the job's next time is advanced from
the claim time (ticks missed meanwhile coalesce into this one) and an `open` dispatch is recorded.
The caller delivers, then `delivered` closes the dispatch. After a crash, `recover` marks every
dispatch still open `interrupted`: it is never replayed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from .jsonfile import MiB, UnreadableFile, read_json_object
from .schedule_grammar import Schedule, ScheduleError, from_dict, next_run
from .text import has_control, printable, shorten
from .trust import Signer
from .whole_writes import replace_whole

SCHEDULES_FILE = "schedules.json"
LOCK_FILE = ".schedules.lock"
CHANGED_STAMP = ".schedules-changed"  # in the sessions root: a running server looks at it
SIGNED_FOR = "schedules"  # the signature purpose (core/trust.py)
MAX_SCHEDULES_BYTES = 4 * MiB
VERSION = 1
KEEP_CLOSED_DISPATCHES = 20  # per job: the recent history, not every tick forever
INTERRUPTED = "Interrupted before the tick was delivered"
MAX_LABEL_CHARS = 80

Owner = Literal["user", "agent", "cli"]
OWNERS: tuple[Owner, ...] = ("user", "agent", "cli")
JobStatus = Literal["active", "paused", "completed", "cancelled"]
STATUSES: tuple[JobStatus, ...] = ("active", "paused", "completed", "cancelled")
DeliveryMode = Literal["steer", "follow_up"]
DELIVERY_MODES: tuple[DeliveryMode, ...] = ("steer", "follow_up")
StoreState = Literal["missing", "trusted", "untrusted", "broken"]


class ScheduleStoreError(Exception):
    """A change the store refuses; nothing was written. `status` as an HTTP status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds")


def parse_iso(text: object) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.astimezone()


@dataclass
class Schedules:
    """What one file holds, and whether it may fire."""

    state: StoreState
    jobs: list[dict[str, Any]] = field(default_factory=list)
    dispatches: list[dict[str, Any]] = field(default_factory=list)
    reason: str = ""  # why a file is broken

    def job(self, job_id: str) -> dict[str, Any] | None:
        return next((j for j in self.jobs if j.get("id") == job_id), None)

    def open_dispatch(self, job_id: str) -> dict[str, Any] | None:
        return next(
            (d for d in self.dispatches if d["job_id"] == job_id and d["state"] == "open"), None
        )

    def active(self) -> list[dict[str, Any]]:
        return [j for j in self.jobs if j["status"] == "active"]

    def earliest(self) -> datetime | None:
        """The earliest next run of an active job."""
        times = [parse_iso(j.get("next_run_at")) for j in self.active()]
        return min((t for t in times if t is not None), default=None)


@dataclass(frozen=True)
class Claim:
    """A tick claimed for delivery: its job as claimed and its open dispatch."""

    job: dict[str, Any]
    dispatch: dict[str, Any]
    coalesced: int  # ticks missed before this one, folded into it


@dataclass(frozen=True)
class Skip:
    """A due tick not claimed: the job's previous tick is still open or not yet taken."""

    job: dict[str, Any]


class ScheduleStore:
    """The schedules file of one session directory."""

    def __init__(self, directory: Path, signer: Signer) -> None:
        self.directory = directory
        self.path = directory / SCHEDULES_FILE
        self._signer = signer

    # ------------------------------------------------------------ reading

    def read(self) -> Schedules:
        try:
            document = read_json_object(self.path, MAX_SCHEDULES_BYTES)
        except UnreadableFile as exc:
            if exc.missing:
                return Schedules("missing")
            return Schedules("broken", reason=exc.reason)
        try:
            jobs, dispatches = _checked(document)
        except ValueError as exc:
            return Schedules("broken", reason=str(exc))
        trusted = self._signer.verify_object(SIGNED_FOR, document)
        return Schedules("trusted" if trusted else "untrusted", jobs, dispatches)

    def mtime(self) -> int | None:
        try:
            return os.stat(self.path, follow_symlinks=False).st_mtime_ns
        except OSError:
            return None

    # ------------------------------------------------------------ changing

    @contextlib.contextmanager
    def changing(self) -> Iterator[Schedules]:
        """Read, change in place, write back signed: under the lock, only a file this user
        signed (or none yet). The block's exception leaves the file as it was."""
        with self._locked():
            current = self.read()
            if current.state == "broken":
                raise ScheduleStoreError(
                    409,
                    f"{self.path} cannot be read ({current.reason}); it was left as it is. "
                    "Move it aside to schedule again.",
                )
            if current.state == "untrusted":
                raise ScheduleStoreError(
                    403,
                    f"{self.path} was not made by this user (unsigned or signed by someone "
                    "else); its jobs do not run. Trust the session first (docs/trust.md).",
                )
            yield current
            self._write(current)

    def sign(self) -> bool:
        """The user trusts the file as it is now: sign it. False when there is nothing to sign
        (missing, broken or already trusted)."""
        with self._locked():
            current = self.read()
            if current.state != "untrusted":
                return False
            self._write(current)
            return True

    def _write(self, schedules: Schedules) -> None:
        _trim(schedules)
        document = {"version": VERSION, "jobs": schedules.jobs, "dispatches": schedules.dispatches}
        signed = self._signer.sign_object(SIGNED_FOR, document)
        data = json.dumps(signed, ensure_ascii=False, indent=1).encode("utf-8") + b"\n"
        replace_whole(self.path, data)
        schedules.state = "trusted"
        _touch(self.directory.parent / CHANGED_STAMP)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(self.directory / LOCK_FILE, flags, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def add(self, job: dict[str, Any]) -> dict[str, Any]:
        with self.changing() as schedules:
            schedules.jobs.append(job)
        return job

    def update(
        self, job_id: str, change: Callable[[dict[str, Any]], None], now: datetime
    ) -> dict[str, Any]:
        """Apply `change` to one job (ScheduleStoreError 404 when there is none)."""
        with self.changing() as schedules:
            job = schedules.job(job_id)
            if job is None:
                raise ScheduleStoreError(404, f"no scheduled job {job_id!r} in this session")
            change(job)
            job["updated_at"] = iso(now)
        return job

    def remove(self, job_id: str) -> dict[str, Any]:
        with self.changing() as schedules:
            job = schedules.job(job_id)
            if job is None:
                raise ScheduleStoreError(404, f"no scheduled job {job_id!r} in this session")
            schedules.jobs.remove(job)
            schedules.dispatches = [d for d in schedules.dispatches if d["job_id"] != job_id]
        return job

    # ------------------------------------------------------------ ticks

    def claim_due(self, now: datetime, waiting: Callable[[dict[str, Any]], bool]) -> list[Any]:
        """Claim every due tick of an active job, before anything is delivered: its next run is
        advanced from `now` (missed ticks coalesce) and an open dispatch recorded. A job whose
        previous tick is still open, or `waiting` (its message not yet taken), is skipped
        instead, rescheduled from `now`. Claims and skips, in job order."""
        out: list[Claim | Skip] = []
        with self._locked():
            schedules = self.read()
            if schedules.state != "trusted":
                return []
            for job in schedules.active():
                due = parse_iso(job.get("next_run_at"))
                if due is None or due > now:
                    continue
                schedule = _schedule_of(job, now)
                if schedule is None:
                    job["status"], job["last_error"] = "cancelled", "its schedule cannot be read"
                    continue
                following = next_run(schedule, now)
                job["next_run_at"] = iso(following) if following is not None else None
                job["updated_at"] = iso(now)
                if schedules.open_dispatch(job["id"]) is not None or waiting(job):
                    job["last_skipped_at"] = iso(now)
                    if following is None:  # a one-shot: its one tick is the one on its way
                        job["status"] = "completed"
                    out.append(Skip(dict(job)))
                    continue
                dispatch = {
                    "id": f"dsp_{secrets.token_hex(6)}",
                    "job_id": job["id"],
                    "claimed_at": iso(now),
                    "scheduled_for": iso(due),
                    "state": "open",
                }
                schedules.dispatches.append(dispatch)
                job["last_run_at"] = iso(now)
                job["run_count"] = int(job.get("run_count", 0)) + 1
                out.append(Claim(dict(job), dict(dispatch), _missed(schedule, due, now)))
            if out:
                self._write(schedules)
        return out

    def delivered(self, dispatch_id: str, message_id: str, now: datetime) -> None:
        """The claimed tick's message is journaled in the target's mailbox: close its dispatch
        (a one-shot job is then complete)."""

        def deliver(schedules: Schedules, dispatch: dict[str, Any]) -> None:
            dispatch["state"] = "delivered"
            dispatch["message_id"] = message_id
            job = schedules.job(dispatch["job_id"])
            if job is not None:
                job["last_message_id"] = message_id
                job["last_error"] = None
                if job.get("next_run_at") is None and job["status"] == "active":
                    job["status"] = "completed"

        self._close_open_dispatch(dispatch_id, deliver)

    def recover(self, now: datetime) -> list[dict[str, Any]]:
        """At start: every dispatch still open (a crash between claim and delivery) becomes
        `interrupted`, never replayed; its job says so and a one-shot is complete. The
        dispatches interrupted now."""
        with self._locked():
            schedules = self.read()
            if schedules.state != "trusted":
                return []
            interrupted = [d for d in schedules.dispatches if d["state"] == "open"]
            for dispatch in interrupted:
                _interrupt(schedules, dispatch, INTERRUPTED, now)
            if interrupted:
                self._write(schedules)
        return interrupted

    def close_dispatch(self, dispatch_id: str, error: str, now: datetime) -> None:
        """A claimed tick that could not be journaled: interrupted, with why (not replayed)."""
        self._close_open_dispatch(
            dispatch_id, lambda schedules, dispatch: _interrupt(schedules, dispatch, error, now)
        )

    def _close_open_dispatch(
        self, dispatch_id: str, close: Callable[[Schedules, dict[str, Any]], None]
    ) -> None:
        """Apply `close` to the dispatch `dispatch_id` if it is still open, under the lock and
        only in a file this user signed (any other is left as it is)."""
        with self._locked():
            schedules = self.read()
            if schedules.state != "trusted":
                return
            for dispatch in schedules.dispatches:
                if dispatch["id"] == dispatch_id and dispatch["state"] == "open":
                    close(schedules, dispatch)
            self._write(schedules)


def _interrupt(schedules: Schedules, dispatch: dict[str, Any], error: str, now: datetime) -> None:
    dispatch["state"] = "interrupted"
    job = schedules.job(dispatch["job_id"])
    if job is None:
        return
    job["last_error"] = error
    job["updated_at"] = iso(now)
    if job.get("next_run_at") is None and job["status"] == "active":
        job["status"] = "completed"


def new_job(
    owner: Owner,
    instruction: str,
    schedule: Schedule,
    now: datetime,
    label: str | None = None,
    delivery_mode: DeliveryMode = "steer",
) -> dict[str, Any]:
    first = next_run(schedule, now)
    return {
        "id": f"hb_{secrets.token_hex(4)}"
        if not schedule.one_shot
        else f"job_{secrets.token_hex(4)}",
        "owner": owner,
        "status": "active",
        "delivery_mode": delivery_mode,
        "instruction": instruction,
        "label": label or default_label(instruction),
        "schedule": schedule.as_dict(),
        "created_at": iso(now),
        "updated_at": iso(now),
        "next_run_at": iso(first) if first is not None else None,
        "last_run_at": None,
        "last_skipped_at": None,
        "last_error": None,
        "run_count": 0,
    }


def checked_label(value: object) -> str | None:
    """A label as given for a job (None: `new_job` makes one from the instruction). One line of
    at most MAX_LABEL_CHARS characters without control characters: the model reads it in each
    tick's header and the terminal prints it. ScheduleStoreError 400 says why not."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_LABEL_CHARS:
        raise ScheduleStoreError(
            400, f"label must be text of 1 to {MAX_LABEL_CHARS} characters or None"
        )
    if has_control(value):
        raise ScheduleStoreError(
            400,
            f"label {shorten(value, 100)} holds a control character or a line break; a label is "
            "one line of plain text",
        )
    return " ".join(value.split())


def default_label(instruction: str) -> str:
    words = printable(" ".join(instruction.split()))
    return words if len(words) <= 40 else words[:39] + "…"


def _schedule_of(job: dict[str, Any], now: datetime) -> Schedule | None:
    try:
        return from_dict(job.get("schedule"), now)
    except ScheduleError:
        return None


def _missed(schedule: Schedule, due: datetime, now: datetime) -> int:
    """Ticks of an `every` schedule that fell between its due time and `now` (coalesced)."""
    if schedule.kind != "every" or not schedule.interval_s:
        return 0
    return int((now - due).total_seconds() // schedule.interval_s)


def _trim(schedules: Schedules) -> None:
    """Keep open dispatches and the recent closed ones of each job."""
    kept: list[dict[str, Any]] = []
    closed: dict[str, int] = {}
    for dispatch in reversed(schedules.dispatches):
        if dispatch["state"] != "open":
            closed[dispatch["job_id"]] = closed.get(dispatch["job_id"], 0) + 1
            if closed[dispatch["job_id"]] > KEEP_CLOSED_DISPATCHES:
                continue
        kept.append(dispatch)
    schedules.dispatches = kept[::-1]


def _touch(stamp: Path) -> None:
    with contextlib.suppress(OSError):
        stamp.touch()
        os.utime(stamp)


_JOB_TEXT = ("id", "instruction", "label")


def _checked(document: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The jobs and dispatches of a file, or ValueError saying what is wrong with it."""
    jobs, dispatches = document.get("jobs"), document.get("dispatches", [])
    if document.get("version") != VERSION or not isinstance(jobs, list):
        raise ValueError(f"is not a schedules file of version {VERSION}")
    if not isinstance(dispatches, list):
        raise ValueError("holds dispatches that are not a list")
    for job in jobs:
        if not isinstance(job, dict) or not all(isinstance(job.get(k), str) for k in _JOB_TEXT):
            raise ValueError("holds a job without its id, instruction or label")
        if job.get("owner") not in OWNERS or job.get("status") not in STATUSES:
            raise ValueError(f"holds job {job['id'][:40]!r} with an unknown owner or status")
        if job.get("delivery_mode") not in DELIVERY_MODES:
            raise ValueError(f"holds job {job['id'][:40]!r} with an unknown delivery mode")
        if not isinstance(job.get("schedule"), dict) or not isinstance(
            job.get("run_count", 0), int
        ):
            raise ValueError(f"holds job {job['id'][:40]!r} without its schedule")
    for dispatch in dispatches:
        if not isinstance(dispatch, dict) or not all(
            isinstance(dispatch.get(k), str) for k in ("id", "job_id", "state")
        ):
            raise ValueError("holds a dispatch without its id, job or state")
    return jobs, dispatches
