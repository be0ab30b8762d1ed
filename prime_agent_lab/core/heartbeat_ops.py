"""Bridge operations behind the kernel's `rlm_heartbeat`: the calling agent's own heartbeats
(create, list, update, delete) in its session's schedules file (core/schedules.py).

The agent sees the user's heartbeat (`/heartbeat`) and the terminal's schedules
(`prime-agent-lab schedule`) read-only and can never change or delete them; trying says whose
they are. The checks of a heartbeat's fields live here once; `/heartbeat` uses them too.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from prime_agent_kernel.operations import (
    CREATE_HEARTBEAT,
    DELETE_HEARTBEAT,
    LIST_HEARTBEATS,
    UPDATE_HEARTBEAT,
)

from .caller import CallerContext, Register
from .family import FamilyError
from .schedule_grammar import ScheduleError, from_dict, next_run, parse_recurring
from .schedules import DELIVERY_MODES, ScheduleStoreError, iso, new_job
from .schedules import checked_label as checked_store_label
from .text import json_type, shorten

MAX_INSTRUCTION_CHARS = 10_000
MAX_AGENT_HEARTBEATS = 20
WHOSE = {"user": "the user's", "agent": "yours", "cli": "set from the terminal"}


def checked_instruction(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise FamilyError(400, f"instruction must be non-empty text, not {json_type(value)}")
    if len(value) > MAX_INSTRUCTION_CHARS:
        raise FamilyError(
            413,
            f"the instruction has {len(value):,} characters; the limit is "
            f"{MAX_INSTRUCTION_CHARS:,}. Put long content in a file and name it.",
        )
    return value.strip()


def checked_label(value: object) -> str | None:
    try:
        return checked_store_label(value)
    except ScheduleStoreError as exc:
        raise store_error(exc) from None


def checked_mode(value: object) -> str:
    if value not in DELIVERY_MODES:
        raise FamilyError(
            400, f'delivery_mode must be "steer" or "follow_up", not {shorten(value, 40)}'
        )
    return str(value)


def checked_interval(value: object, now: datetime) -> Any:
    try:
        return parse_recurring(value, now)
    except ScheduleError as exc:
        raise FamilyError(400, str(exc)) from None


def job_view(job: dict[str, Any], viewer: str) -> dict[str, Any]:
    """A job as `viewer` (`agent`, `user`) sees it: `editable` only when it is theirs."""
    return {
        "id": job["id"],
        "owner": job["owner"],
        "whose": WHOSE.get(job["owner"], job["owner"]) if viewer == "agent" else job["owner"],
        "editable": job["owner"] == viewer,
        "status": job["status"],
        "label": job["label"],
        "instruction": job["instruction"],
        "interval": job["schedule"].get("expression"),
        "delivery_mode": job["delivery_mode"],
        "next_run_at": job.get("next_run_at"),
        "last_run_at": job.get("last_run_at"),
        "last_skipped_at": job.get("last_skipped_at"),
        "last_error": job.get("last_error"),
        "run_count": job.get("run_count", 0),
    }


def refuse_foreign(job: dict[str, Any], action: str) -> None:
    """The agent may change only its own heartbeats."""
    if job["owner"] != "agent":
        whose = "the user's (/heartbeat)" if job["owner"] == "user" else "set from the terminal"
        raise FamilyError(
            403,
            f"heartbeat {job['id']} is {whose}: the agent cannot {action} it. Nothing changed; "
            "ask the user if it should change.",
        )


def store_error(exc: ScheduleStoreError) -> FamilyError:
    return FamilyError(exc.status, exc.message)


def register_heartbeat_operations(register: Register) -> None:
    """Offer `rlm_heartbeat.create/list/update/delete` through `register`."""

    async def create(ctx: CallerContext, payload: dict[str, Any]) -> dict[str, Any]:
        scheduler = ctx.runtime.scheduler
        now = scheduler.clock()
        instruction = checked_instruction(payload.get("instruction"))
        interval = payload.get("interval")
        schedule = checked_interval("every 5m" if interval is None else interval, now)
        label = checked_label(payload.get("label"))
        mode = payload.get("delivery_mode")
        mode = checked_mode("steer" if mode is None else mode)
        store = scheduler.store(ctx.agent.session_id)
        job = new_job("agent", instruction, schedule, now, label, mode)  # type: ignore[arg-type]
        try:
            with store.changing() as schedules:
                own = [
                    j
                    for j in schedules.jobs
                    if j["owner"] == "agent" and j["status"] in ("active", "paused")
                ]
                if len(own) >= MAX_AGENT_HEARTBEATS:
                    raise FamilyError(
                        409,
                        f"this agent already has {len(own)} heartbeats (the limit is "
                        f"{MAX_AGENT_HEARTBEATS}); delete one first",
                    )
                schedules.jobs.append(job)
        except ScheduleStoreError as exc:
            raise store_error(exc) from None
        scheduler.changed(ctx.agent.session_id)
        return job_view(job, "agent")

    async def list_(ctx: CallerContext, payload: dict[str, Any]) -> list[dict[str, Any]]:
        include_inactive = payload.get("include_inactive")
        if not isinstance(include_inactive, bool | None):
            raise FamilyError(400, "include_inactive must be True or False")
        schedules = ctx.runtime.scheduler.store(ctx.agent.session_id).read()
        if schedules.state in ("untrusted", "broken"):
            raise FamilyError(
                409,
                f"this session's schedules file is {schedules.state} and does not run "
                f"{'(' + schedules.reason + ')' if schedules.reason else ''}".rstrip(),
            )
        shown = ("active", "paused") if not include_inactive else None
        return [
            job_view(job, "agent")
            for job in schedules.jobs
            if shown is None or job["status"] in shown
        ]

    async def update(ctx: CallerContext, payload: dict[str, Any]) -> dict[str, Any]:
        scheduler = ctx.runtime.scheduler
        now = scheduler.clock()
        job_id = payload.get("id")
        if not isinstance(job_id, str):
            raise FamilyError(400, "id must be a heartbeat's id (a string)")
        changes: dict[str, Any] = {}
        if payload.get("instruction") is not None:
            changes["instruction"] = checked_instruction(payload.get("instruction"))
        if payload.get("label") is not None:
            changes["label"] = checked_label(payload.get("label"))
        if payload.get("delivery_mode") is not None:
            changes["delivery_mode"] = checked_mode(payload.get("delivery_mode"))
        status = payload.get("status")
        if status is not None and status not in ("active", "paused"):
            raise FamilyError(400, f'status must be "active" or "paused", not {shorten(status)}')
        interval = payload.get("interval")
        schedule = checked_interval(interval, now) if interval is not None else None

        def change(job: dict[str, Any]) -> None:
            refuse_foreign(job, "change")
            if job["status"] in ("completed", "cancelled"):
                raise FamilyError(409, f"heartbeat {job_id} is {job['status']}; create a new one")
            resumed = status == "active" and job["status"] != "active"
            job.update(changes)
            if schedule is not None:
                job["schedule"] = schedule.as_dict()
            if status is not None:
                job["status"] = status
            # Setting an active heartbeat active again keeps its next run where it is.
            if schedule is not None or resumed:
                following = next_run(schedule or _schedule(job, now), now)
                job["next_run_at"] = iso(following) if following is not None else None

        try:
            job = scheduler.store(ctx.agent.session_id).update(job_id, change, now)
        except ScheduleStoreError as exc:
            raise store_error(exc) from None
        scheduler.changed(ctx.agent.session_id)
        return job_view(job, "agent")

    async def delete(ctx: CallerContext, payload: dict[str, Any]) -> dict[str, Any]:
        scheduler = ctx.runtime.scheduler
        job_id = payload.get("id")
        if not isinstance(job_id, str):
            raise FamilyError(400, "id must be a heartbeat's id (a string)")
        store = scheduler.store(ctx.agent.session_id)
        try:
            with store.changing() as schedules:
                job = schedules.job(job_id)
                if job is None:
                    raise FamilyError(404, f"no heartbeat {shorten(job_id, 40)} in this session")
                refuse_foreign(job, "delete")
                schedules.jobs.remove(job)
                schedules.dispatches = [d for d in schedules.dispatches if d["job_id"] != job_id]
        except ScheduleStoreError as exc:
            raise store_error(exc) from None
        scheduler.changed(ctx.agent.session_id)
        return {"id": job_id, "deleted": True}

    register(CREATE_HEARTBEAT, create)
    register(LIST_HEARTBEATS, list_)
    register(UPDATE_HEARTBEAT, update)
    register(DELETE_HEARTBEAT, delete)


def _schedule(job: dict[str, Any], now: datetime) -> Any:
    return from_dict(job["schedule"], now)
