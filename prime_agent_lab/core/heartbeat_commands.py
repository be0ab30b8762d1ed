"""What `/heartbeat` does (core/commands.py declares its forms): the user's one heartbeat of a
session, which the agent can see but never change (docs/autonomy.md).

`/heartbeat every <dur> [--steer|--follow-up] <instruction>` sets it (replacing the one before),
`pause`, `resume`, `stop` (removes it), `status`.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from .caller import TreeRuntime
from .family import FamilyError
from .heartbeat_ops import checked_instruction
from .schedule_grammar import ScheduleError, from_dict, next_run, parse_recurring
from .schedules import ScheduleStoreError, iso, new_job

USAGE = "/heartbeat every <dur> [--steer|--follow-up] <instruction> (dur like 30s, 10m, 2h)"
_SET = re.compile(r"(every\s*[0-9]+\s*[a-z]+)(?:\s+(.*))?", re.IGNORECASE | re.DOTALL | re.ASCII)
_FLAG = re.compile(r"--(steer|follow-up|follow_up)(?:\s+|$)")


def _error(status: int, message: str) -> FamilyError:
    """What the command says to the user (core/commands.py answers it with `status`)."""
    return FamilyError(status, message)


def set_heartbeat(runtime: TreeRuntime, session_id: str, values: dict[str, Any]) -> str:
    """Parse `every <dur> [--steer|--follow-up] <instruction>` and make it the session's user
    heartbeat; the line the chat shows."""
    text = (values.get("schedule") or "").strip()
    flags = {name for name in ("steer", "follow-up") if values.get(name)}
    match = _SET.fullmatch(text)
    if match is None:
        raise _error(400, f"Usage: {USAGE}")
    scheduler = runtime.scheduler
    now = scheduler.clock()
    try:
        schedule = parse_recurring(match[1], now)
    except ScheduleError as exc:
        raise _error(400, f"{exc}. Usage: {USAGE}") from None
    rest = (match[2] or "").strip()
    while flag := _FLAG.match(rest):
        flags.add(flag[1].replace("_", "-"))
        rest = rest[flag.end() :].strip()
    if flags == {"steer", "follow-up"}:
        raise _error(400, "Choose one of --steer and --follow-up.")
    if not rest:
        raise _error(400, f"What should the agent do on each tick? Usage: {USAGE}")
    instruction = checked_instruction(rest)
    mode = "follow_up" if "follow-up" in flags else "steer"
    job = new_job("user", instruction, schedule, now, None, mode)  # type: ignore[arg-type]
    store = scheduler.store(session_id)
    try:
        with store.changing() as schedules:
            replaced = [j for j in schedules.jobs if j["owner"] == "user"]
            schedules.jobs = [j for j in schedules.jobs if j["owner"] != "user"]
            schedules.jobs.append(job)
            gone = {j["id"] for j in replaced}
            schedules.dispatches = [d for d in schedules.dispatches if d["job_id"] not in gone]
    except ScheduleStoreError as exc:
        raise _error(exc.status, exc.message) from None
    scheduler.changed(session_id)
    how = "enters a running turn" if mode == "steer" else "waits for a running turn to end"
    again = " (replacing the one before)" if replaced else ""
    return (
        f"Heartbeat {job['id']} set{again}: {schedule.expression}, {mode.replace('_', '-')} "
        f"(it {how}); next run {job['next_run_at']}. The agent cannot change it."
    )


def change_heartbeat(runtime: TreeRuntime, session_id: str, keyword: str) -> str:
    """`pause`, `resume`, `stop` or `status` of the session's user heartbeat."""
    scheduler = runtime.scheduler
    store = scheduler.store(session_id)
    now = scheduler.clock()
    if keyword == "status":
        current = store.read()
        job = next((j for j in current.jobs if j["owner"] == "user"), None)
        if job is None:
            raise _error(404, f"This session has no heartbeat. Set one: {USAGE}")
        untrusted = " (not signed by you: it does not run until you trust the session)"
        return _status(job) + (untrusted if current.state == "untrusted" else "")
    try:
        with store.changing() as schedules:
            job = next((j for j in schedules.jobs if j["owner"] == "user"), None)
            if job is None:
                raise _error(404, f"This session has no heartbeat. Set one: {USAGE}")
            if keyword == "stop":
                schedules.jobs.remove(job)
                schedules.dispatches = [d for d in schedules.dispatches if d["job_id"] != job["id"]]
                said = f"Heartbeat {job['id']} stopped and removed."
            elif job["status"] == ("paused" if keyword == "pause" else "active"):
                # Nothing changes (nothing is written): resuming an active heartbeat keeps its
                # next run where it is.
                raise _Unchanged(
                    f"Heartbeat {job['id']} is already {job['status']}; next run "
                    f"{job.get('next_run_at') or 'none'}."
                )
            elif keyword == "pause":
                job["status"] = "paused"
                said = f"Heartbeat {job['id']} paused; /heartbeat resume starts it again."
            else:
                following = _next_run(job, now)
                job["status"] = "active"
                job["next_run_at"] = iso(following)
                said = f"Heartbeat {job['id']} resumed; next run {job['next_run_at']}."
            job["updated_at"] = iso(now)
    except _Unchanged as unchanged:
        return str(unchanged)
    except ScheduleStoreError as exc:
        raise _error(exc.status, exc.message) from None
    scheduler.changed(session_id)
    return said


class _Unchanged(Exception):
    """The heartbeat is already as asked: the answer, and the file is left as it is."""


def _next_run(job: dict[str, Any], now: datetime) -> datetime:
    """When a resumed heartbeat runs next; 409 when its stored schedule no longer runs."""
    try:
        following = next_run(from_dict(job["schedule"], now), now)
    except ScheduleError as exc:
        raise _error(409, f"Heartbeat {job['id']} cannot resume: {exc}. Set a new one.") from None
    if following is None:
        raise _error(409, f"Heartbeat {job['id']} never runs again. Set a new one.")
    return following


def _status(job: dict[str, Any]) -> str:
    parts = [
        f"Heartbeat {job['id']}: {job['schedule'].get('expression')}, "
        f"{job['delivery_mode'].replace('_', '-')}, {job['status']}",
        f"next run {job.get('next_run_at') or 'none'}",
        f"{job.get('run_count', 0)} tick(s)",
    ]
    if job.get("last_run_at"):
        parts.append(f"last {job['last_run_at']}")
    if job.get("last_skipped_at"):
        parts.append(f"last skipped {job['last_skipped_at']}")
    if job.get("last_error"):
        parts.append(f"last error: {job['last_error']}")
    return "; ".join(parts) + f'. It says: "{job["instruction"][:200]}"'
