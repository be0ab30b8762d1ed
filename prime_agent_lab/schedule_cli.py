"""`prime-agent-lab schedule`: scheduled jobs of the sessions in the current folder, from the
terminal (docs/autonomy.md).

    prime-agent-lab schedule add analysis.ipynb "in 30m" -- "summarise the results so far"
    prime-agent-lab schedule add 20260301-090000-abc123 "0 9 * * mon-fri" --follow-up -- "..."
    prime-agent-lab schedule list [SESSION]
    prime-agent-lab schedule remove JOB_ID

It writes the session's signed `schedules.json` (owner `cli`). A server running on this folder
sees the change within a few seconds (it watches one stamp file); otherwise the job fires once
a server or a `prime-agent-lab run` of that session is up (the earliest due time passed while
nothing ran fires once).

What it prints from a schedules file (labels, expressions, errors: a file may come from someone
else's folder) goes through `printable`: a control character shows as `\\x1b`, never acts.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from .core.schedule_grammar import ScheduleError, parse
from .core.schedules import (
    SCHEDULES_FILE,
    ScheduleStore,
    ScheduleStoreError,
    checked_label,
    new_job,
)
from .core.sessions import LinkedSession, SessionError, SessionRepository, is_session_id
from .core.text import printable
from .core.trust import Signer


class ScheduleCommandError(Exception):
    """What the command says on stderr, exit status 1."""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    schedule = commands.add_parser(
        "schedule",
        help="schedule a message to an agent of this folder: once, on a cron, or every N",
        description="Scheduled jobs of the sessions in .prime-agent/sessions of the current "
        "folder. A running server picks changes up within seconds.",
    )
    actions = schedule.add_subparsers(dest="action", required=True)
    add = actions.add_parser("add", help="schedule an instruction for a session's agent")
    add.add_argument("target", help="a session id or directory, or a notebook (its newest session)")
    add.add_argument(
        "when",
        help='"in N m|h|d", "at <ISO time>", "every N s|m|h" or a 5-field cron expression',
    )
    add.add_argument(
        "--follow-up",
        action="store_true",
        help="wait until a running turn ends (default: enter it at its next model call)",
    )
    add.add_argument("--label", default=None, help="a short name shown with each tick")
    add.add_argument("instruction", nargs="+", help="what the agent reads (after --)")
    listing = actions.add_parser("list", help="list the scheduled jobs")
    listing.add_argument("target", nargs="?", default=None, help="only this session")
    remove = actions.add_parser("remove", help="remove a scheduled job by its id")
    remove.add_argument("job_id")


def run(args: argparse.Namespace, out: TextIO, cwd: Path | None = None) -> int:
    repository = SessionRepository((cwd or Path.cwd()) / ".prime-agent" / "sessions")
    signer = Signer.load()
    if args.action == "add":
        return _add(args, repository, signer, out)
    if args.action == "list":
        return _list(args, repository, signer, out)
    return _remove(args, repository, signer, out)


def resolve_session(repository: SessionRepository, target: str) -> str:
    """A session id from an id, a session directory, or a notebook path (its newest session)."""
    path = Path(target)
    if path.is_dir() and path.resolve().parent == repository.root.resolve():
        target = path.resolve().name
    if is_session_id(target):
        if repository.directory(target).is_symlink():
            raise ScheduleCommandError(str(LinkedSession(target)))
        if not repository.exists(target):
            raise ScheduleCommandError(f"no session {target} in {repository.root}")
        return target
    try:
        session_id = repository.latest_for_notebook(target)
    except SessionError as exc:
        raise ScheduleCommandError(str(exc)) from None
    if session_id is None:
        raise ScheduleCommandError(
            f"no session of {target!r} in {repository.root} (name a session id, a session "
            "directory or a notebook that has a session; `schedule list` shows them)"
        )
    return session_id


def _add(
    args: argparse.Namespace, repository: SessionRepository, signer: Signer, out: TextIO
) -> int:
    session_id = resolve_session(repository, args.target)
    now = datetime.now(UTC)
    try:
        schedule = parse(args.when, now)
    except ScheduleError as exc:
        raise ScheduleCommandError(str(exc)) from None
    instruction = " ".join(args.instruction).strip()
    if not instruction:
        raise ScheduleCommandError("the instruction is empty")
    mode = "follow_up" if args.follow_up else "steer"
    try:
        job = new_job("cli", instruction, schedule, now, checked_label(args.label), mode)
        ScheduleStore(repository.directory(session_id), signer).add(job)
    except ScheduleStoreError as exc:
        raise ScheduleCommandError(exc.message) from None
    _print(
        out,
        f"{job['id']}: {schedule.expression} for session {session_id}, next run "
        f"{job['next_run_at']} ({mode.replace('_', '-')})",
    )
    return 0


def _sessions(repository: SessionRepository, target: str | None) -> list[str]:
    if target is not None:
        return [resolve_session(repository, target)]
    if not repository.root.is_dir():
        return []
    return sorted(
        d.name
        for d in repository.root.iterdir()
        if is_session_id(d.name) and (d / SCHEDULES_FILE).exists()
    )


def _list(
    args: argparse.Namespace, repository: SessionRepository, signer: Signer, out: TextIO
) -> int:
    rows = 0
    for session_id in _sessions(repository, args.target):
        schedules = ScheduleStore(repository.directory(session_id), signer).read()
        if schedules.state in ("untrusted", "broken"):
            why = f" ({schedules.reason})" if schedules.reason else ""
            _print(out, f"{session_id}: schedules file {schedules.state}{why}; nothing of it runs")
        for job in schedules.jobs:
            rows += 1
            _print(
                out,
                f"{job['id']}  {session_id}  {job['owner']:<5}  {job['status']:<9}  "
                f"{job['schedule'].get('expression')}  next {job.get('next_run_at') or '-'}  "
                f"runs {job.get('run_count', 0)}  {job['label']}"
                + (f"  [{job['last_error']}]" if job.get("last_error") else ""),
            )
    if rows == 0:
        out.write("no scheduled jobs\n")
    return 0


def _remove(
    args: argparse.Namespace, repository: SessionRepository, signer: Signer, out: TextIO
) -> int:
    for session_id in _sessions(repository, None):
        store = ScheduleStore(repository.directory(session_id), signer)
        if store.read().job(args.job_id) is None:
            continue
        try:
            job = store.remove(args.job_id)
        except ScheduleStoreError as exc:
            raise ScheduleCommandError(exc.message) from None
        _print(out, f"removed {job['id']} ({job['owner']}'s) of session {session_id}")
        return 0
    raise ScheduleCommandError(f"no scheduled job {args.job_id!r} here (`schedule list`)")


def _print(out: TextIO, line: str) -> None:
    """One line of output, control characters shown escaped (the text may be someone else's)."""
    out.write(printable(line) + "\n")
