"""When a scheduled job runs: the grammar of heartbeats and schedules, and their next time.

- `every N s|m|h` (also `every 5m`): recurring, at least MIN_INTERVAL seconds apart and at
  most MAX_INTERVAL;
- `in N m|h|d`: once, that long after it was set (at most MAX_AHEAD);
- `at <ISO time>`: once (`2026-03-01T09:00`, `2026-03-01 09:00+01:00`; no offset: local time),
  in the future and at most MAX_AHEAD away;
- a 5-field cron expression `minute hour day-of-month month day-of-week` (`*/15 * * * *`,
  ranges `9-17`, lists `1,15`, steps `0-30/10`, names `mon-fri`, `jan`), in local time; when
  both the day of month and the day of week are restricted, either one matching is enough
  (as cron does).

Numbers are ASCII digits only. A schedule that could never fire is refused: an `at` in the past,
a cron expression with no time in the next 5 years (`0 0 31 2 *`).

Pure: no clock, no files. Times are timezone-aware datetimes; `parse` gets `now` to anchor `in`
and to refuse what could never fire. A heartbeat repeats, so `parse_recurring` refuses the
one-shot kinds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import MINYEAR, UTC, datetime, timedelta
from typing import Any, Literal

ScheduleKind = Literal["every", "in", "at", "cron"]
ONE_SHOT: frozenset[str] = frozenset({"in", "at"})
MIN_INTERVAL = 10.0  # seconds, for `every`
MAX_INTERVAL = 366 * 86400.0  # seconds, for `every`: 366 days
MAX_AHEAD = 3653 * 86400.0  # seconds, for `in` and `at`: 10 years
MAX_SEARCH_DAYS = 366 * 5  # a cron expression that matches no day in 5 years matches none
MAX_EXPRESSION_CHARS = 200

FORMS = (
    "`every N s|m|h` (10 s to 366 days), `in N m|h|d` (up to 10 years), `at <ISO time>` or a "
    "5-field cron expression like `*/15 * * * *`"
)

_UNITS = {
    "s": 1,
    "sec": 1,
    "secs": 1,
    "second": 1,
    "seconds": 1,
    "m": 60,
    "min": 60,
    "mins": 60,
    "minute": 60,
    "minutes": 60,
    "h": 3600,
    "hr": 3600,
    "hrs": 3600,
    "hour": 3600,
    "hours": 3600,
    "d": 86400,
    "day": 86400,
    "days": 86400,
}
_EVERY_UNITS = {"s", "m", "h"}
_IN_UNITS = {"m", "h", "d"}
_DURATION = re.compile(r"([0-9]+)\s*([a-z]+)", re.ASCII)
_NUMBER = re.compile(r"[0-9]+", re.ASCII)

_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]


class ScheduleError(ValueError):
    """Text that is not a schedule; the message says what is wrong and what would be."""


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule. `at`: the one time of a one-shot (`in`, `at`); `interval_s`: the
    period of `every`; `fields`: the allowed values of each cron field."""

    kind: ScheduleKind
    expression: str
    interval_s: float | None = None
    at: datetime | None = None
    fields: tuple[frozenset[int], ...] | None = None
    any_day_of_month: bool = True
    any_day_of_week: bool = True

    @property
    def one_shot(self) -> bool:
        return self.kind in ONE_SHOT

    def as_dict(self) -> dict[str, Any]:
        """What the schedules file stores (`from_dict` reads it back)."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "expression": self.expression,
            "interval_s": self.interval_s,
        }
        if self.at is not None:
            out["at"] = self.at.isoformat()
        return out


def parse(text: object, now: datetime) -> Schedule:
    """The schedule `text` says; `now` (aware) anchors `in`. ScheduleError says why not."""
    if not isinstance(text, str) or not text.strip():
        raise ScheduleError(f"a schedule is text: {FORMS}")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ScheduleError(
            f"a schedule is at most {MAX_EXPRESSION_CHARS} characters, not {len(text):,}: {FORMS}"
        )
    now = _aware(now)
    expression = " ".join(text.split())
    lowered = expression.lower()
    head, _, rest = lowered.partition(" ")
    if head.startswith("every"):
        seconds = _duration(lowered[len("every") :], _EVERY_UNITS, expression)
        if seconds < MIN_INTERVAL:
            raise ScheduleError(
                f"{expression!r} is too often: a heartbeat runs at most every "
                f"{MIN_INTERVAL:g} seconds"
            )
        if seconds > MAX_INTERVAL:
            raise ScheduleError(
                f"{expression[:80]!r} is too long an interval: at most "
                f"{MAX_INTERVAL / 86400:g} days ({MAX_INTERVAL / 3600:g}h)"
            )
        return Schedule("every", f"every {_spell(seconds)}", interval_s=seconds)
    if head == "in":
        seconds = _duration(rest, _IN_UNITS, expression)
        if seconds <= 0:
            raise ScheduleError(f"{expression!r}: the delay must be more than 0")
        _within_reach(seconds, expression)
        return Schedule("in", f"in {_spell(seconds)}", at=now + timedelta(seconds=seconds))
    if head == "at":
        moment = _iso_time(expression[3:].strip(), expression)
        if moment <= now:
            raise _in_the_past(expression, now)
        _within_reach((moment - now).total_seconds(), expression)
        return Schedule("at", expression, at=moment)
    if len(lowered.split(" ")) == 5:
        schedule = _cron(lowered)
        if _next_cron(schedule, now) is None:
            raise ScheduleError(
                f"cron {lowered!r} never matches: no time in the next 5 years (like 31 February)"
            )
        return schedule
    raise ScheduleError(f"{expression[:80]!r} is not a schedule: use {FORMS}")


def parse_recurring(text: object, now: datetime) -> Schedule:
    """A heartbeat's schedule: `every ...` or cron; the one-shot kinds are refused."""
    schedule = parse(text, now)
    if schedule.one_shot:
        raise ScheduleError(
            f"a heartbeat repeats, so {schedule.expression!r} cannot be one: use `every N "
            "s|m|h` or a cron expression (a one-shot `in`/`at` is `prime-agent-lab schedule "
            "add`)"
        )
    return schedule


def from_dict(stored: object, now: datetime) -> Schedule:
    """A schedule as the schedules file stores it; ScheduleError for anything else."""
    if not isinstance(stored, dict) or not isinstance(stored.get("expression"), str):
        raise ScheduleError("a stored schedule needs its expression")
    if stored.get("kind") in ONE_SHOT:
        when = stored.get("at")
        if not isinstance(when, str):
            raise ScheduleError("a stored one-shot schedule needs its time (`at`)")
        return Schedule(stored["kind"], stored["expression"], at=_iso_time(when, when))
    schedule = parse(stored["expression"], now)
    if schedule.kind != stored.get("kind"):
        raise ScheduleError(f"the stored kind {stored.get('kind')!r} is not {schedule.kind!r}")
    return schedule


def next_run(schedule: Schedule, after: datetime) -> datetime | None:
    """The first time strictly after `after` (aware) the schedule runs; None once a one-shot's
    time has passed (or a cron expression that matches no date, like 31 February)."""
    after = _aware(after)
    if schedule.kind == "every":
        assert schedule.interval_s is not None
        return after + timedelta(seconds=schedule.interval_s)
    if schedule.one_shot:
        assert schedule.at is not None
        return schedule.at if schedule.at > after else None
    return _next_cron(schedule, after)


# ---------------------------------------------------------------- durations and times


def _duration(text: str, units: set[str], expression: str) -> float:
    allowed = "|".join(sorted(units, key=list(_UNITS).index))
    match = _DURATION.fullmatch(text.strip())
    unit = _UNITS.get(match[2]) if match else None
    if match is None or unit is None or _short(match[2]) not in units:
        raise ScheduleError(f"{expression!r}: write the duration as N {allowed} (like 5m)")
    return float(int(match[1]) * unit)


def _within_reach(seconds: float, expression: str) -> None:
    if seconds > MAX_AHEAD:
        raise _too_far(expression)


def _too_far(expression: str) -> ScheduleError:
    return ScheduleError(
        f"{expression[:80]!r} is too far ahead: a one-shot schedule runs at most 10 years "
        f"({MAX_AHEAD / 86400:g} days) from now"
    )


def _in_the_past(expression: str, now: datetime | None = None) -> ScheduleError:
    it_is = f" (it is now {now.isoformat(timespec='seconds')})" if now is not None else ""
    return ScheduleError(f"{expression[:80]!r} is in the past{it_is}: it would never run")


def _short(unit: str) -> str:
    return {1: "s", 60: "m", 3600: "h", 86400: "d"}[_UNITS[unit]]


def _spell(seconds: float) -> str:
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.astimezone()


def _iso_time(text: str, expression: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ScheduleError(
            f"{expression[:80]!r}: after `at` comes an ISO time like 2026-03-01T09:00 "
            "(local time) or 2026-03-01T09:00+01:00"
        ) from None
    try:
        aware = _aware(moment)
        aware.astimezone(UTC)  # a time at the edge of the calendar has no UTC equivalent
    except (ValueError, OverflowError, OSError):  # year 1 or 9999: no UTC equivalent
        raise (
            _in_the_past(expression) if moment.year == MINYEAR else _too_far(expression)
        ) from None
    return aware


# ---------------------------------------------------------------- cron

_CRON_FIELDS = (  # name, lowest, highest, names
    ("minute", 0, 59, None),
    ("hour", 0, 23, None),
    ("day of month", 1, 31, None),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 7, _DAYS),
)


def _cron(expression: str) -> Schedule:
    parts = expression.split(" ")
    fields = tuple(
        _cron_field(part, *spec, expression) for part, spec in zip(parts, _CRON_FIELDS, strict=True)
    )
    return Schedule(
        "cron",
        expression,
        fields=(*fields[:4], frozenset(d % 7 for d in fields[4])),  # 7 is Sunday too
        any_day_of_month=parts[2] == "*",
        any_day_of_week=parts[4] == "*",
    )


def _cron_field(
    text: str, name: str, low: int, high: int, names: list[str] | None, expression: str
) -> frozenset[int]:
    values: set[int] = set()
    for item in text.split(","):
        span, _, step_text = item.partition("/")
        step = _cron_number(step_text, name, expression) if step_text else 1
        if step < 1:
            raise ScheduleError(f"cron {expression!r}: the step of the {name} must be at least 1")
        if span == "*":
            first, last = low, high
        elif "-" in span:
            a, _, b = span.partition("-")
            first, last = (
                _cron_value(a, name, names, expression),
                _cron_value(b, name, names, expression),
            )
        else:
            first = _cron_value(span, name, names, expression)
            last = high if step_text else first
        for value in (first, last):
            if not low <= value <= high:
                raise ScheduleError(
                    f"cron {expression!r}: the {name} must be between {low} and {high}, not {value}"
                )
        if first > last:
            raise ScheduleError(f"cron {expression!r}: the {name} range {span} runs backwards")
        values.update(range(first, last + 1, step))
    return frozenset(values)


def _cron_value(text: str, name: str, names: list[str] | None, expression: str) -> int:
    if names is not None and text in names:
        return names.index(text) + (1 if name == "month" else 0)
    return _cron_number(text, name, expression)


def _cron_number(text: str, name: str, expression: str) -> int:
    if not _NUMBER.fullmatch(text):
        raise ScheduleError(
            f"cron {expression!r}: {text!r} is not a valid {name} (numbers, *, ranges a-b, "
            "lists a,b, steps */n; names for months and days)"
        )
    return int(text)


def _next_cron(schedule: Schedule, after: datetime) -> datetime | None:
    """Walks local wall-clock days, then the allowed hours and minutes of a matching day."""
    assert schedule.fields is not None
    minutes, hours, days, months, weekdays = schedule.fields
    local = after.astimezone()
    start = local.replace(second=0, microsecond=0, tzinfo=None) + timedelta(minutes=1)
    day = start.replace(hour=0, minute=0)
    for _ in range(MAX_SEARCH_DAYS):
        if day.month in months and _day_matches(schedule, day, days, weekdays):
            for hour in sorted(hours):
                for minute in sorted(minutes):
                    candidate = day.replace(hour=hour, minute=minute)
                    if candidate >= start:
                        moment = candidate.astimezone()  # local wall time -> aware
                        if moment > after:
                            return moment
        day += timedelta(days=1)
    return None


def _day_matches(
    schedule: Schedule, day: datetime, days: frozenset[int], weekdays: frozenset[int]
) -> bool:
    in_month = day.day in days
    in_week = (day.isoweekday() % 7) in weekdays
    if schedule.any_day_of_month or schedule.any_day_of_week:
        return in_month and in_week
    return in_month or in_week
