"""Heartbeats and schedules on their own (docs/autonomy.md): the grammar, and one session's
signed store: claim before deliver, coalescing, skips, recovery without replay, trust."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from prime_agent_lab.core.schedule_grammar import (
    ScheduleError,
    next_run,
    parse,
    parse_recurring,
)
from prime_agent_lab.core.schedules import (
    INTERRUPTED,
    SCHEDULES_FILE,
    Claim,
    ScheduleStore,
    ScheduleStoreError,
    Skip,
    new_job,
)
from prime_agent_lab.core.trust import Signer

NOW = datetime(2026, 3, 2, 12, 7, 30, tzinfo=UTC)  # a Monday


# ---------------------------------------------------------------- the grammar


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Local time is UTC (cron runs in local time)."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize(
    ("text", "expression", "first"),
    [
        ("every 5m", "every 5m", NOW + timedelta(minutes=5)),
        ("every5m", "every 5m", NOW + timedelta(minutes=5)),
        ("every 10 s", "every 10s", NOW + timedelta(seconds=10)),
        ("Every 2h", "every 2h", NOW + timedelta(hours=2)),
        ("in 90m", "in 90m", NOW + timedelta(minutes=90)),
        ("in 2d", "in 2d", NOW + timedelta(days=2)),
        (
            "at 2026-03-02T13:00+00:00",
            "at 2026-03-02T13:00+00:00",
            NOW.replace(hour=13, minute=0, second=0),
        ),
        ("*/15 * * * *", "*/15 * * * *", NOW.replace(minute=15, second=0)),
        ("0 9 * * tue-fri", "0 9 * * tue-fri", datetime(2026, 3, 3, 9, tzinfo=UTC)),
        ("0 0 29 feb *", "0 0 29 feb *", datetime(2028, 2, 29, tzinfo=UTC)),
        ("30 8 1,15 * 7", "30 8 1,15 * 7", datetime(2026, 3, 8, 8, 30, tzinfo=UTC)),  # a Sunday
        ("0-10/5 12 * * *", "0-10/5 12 * * *", datetime(2026, 3, 2, 12, 10, tzinfo=UTC)),
    ],
)
def test_the_grammar_reads_every_in_at_and_cron_and_gives_the_next_run(
    text: str, expression: str, first: datetime, utc: None
) -> None:
    schedule = parse(text, NOW)
    assert schedule.expression == expression
    assert next_run(schedule, NOW) == first


def test_a_one_shot_runs_once_and_a_naive_time_is_local() -> None:
    once = parse("in 5m", NOW)
    assert next_run(once, NOW) == NOW + timedelta(minutes=5)
    assert next_run(once, NOW + timedelta(minutes=5)) is None
    local = parse("at 2030-01-01T09:00", NOW)
    assert local.at == datetime(2030, 1, 1, 9).astimezone()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("every 5s", "at most every 10 seconds"),
        ("every 5d", "N s|m|h"),
        ("every often", "N s|m|h"),
        ("in 30s", "N m|h|d"),
        ("in 0m", "more than 0"),
        ("at tomorrow", "ISO time"),
        ("61 * * * *", "between 0 and 59, not 61"),
        ("5-1 * * * *", "runs backwards"),
        ("*/0 * * * *", "at least 1"),
        ("* * * foo *", "'foo' is not a valid month"),
        ("* * *", "is not a schedule"),
        ("", "a schedule is text"),
        (42, "a schedule is text"),
    ],
)
def test_bad_schedules_are_refused_saying_what_is_wrong(text: Any, says: str) -> None:
    with pytest.raises(ScheduleError, match=says.replace("|", r"\|")):
        parse(text, NOW)


def test_a_heartbeat_refuses_the_one_shot_kinds() -> None:
    assert parse_recurring("*/5 * * * *", NOW).kind == "cron"
    for text in ("in 5m", "at 2030-01-01T09:00"):
        with pytest.raises(ScheduleError, match="a heartbeat repeats"):
            parse_recurring(text, NOW)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("every 99999999999999999999h", "at most 366 days"),
        ("every 8785h", "at most 366 days"),
        ("in 99999999999d", "at most 10 years"),
        ("in 3654d", "at most 10 years"),
        ("at 2037-01-01T00:00Z", "at most 10 years"),
        ("at 9999-12-31T23:59-01:00", "at most 10 years"),
        pytest.param("every " + "9" * 5000 + "s", "at most 200 characters", id="5000 digits"),
        pytest.param("*/" + "9" * 5000 + " * * * *", "at most 200 characters", id="cron digits"),
    ],
)
def test_huge_durations_and_far_times_are_refused_stating_the_maximum(text: str, says: str) -> None:
    with pytest.raises(ScheduleError, match=says):
        parse(text, NOW)
    assert next_run(parse("every 8784h", NOW), NOW) == NOW + timedelta(days=366)
    assert next_run(parse("in 3653d", NOW), NOW) == NOW + timedelta(days=3653)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("at 1999-01-01T00:00Z", "is in the past"),
        ("at 2026-03-02T12:07:30+00:00", "is in the past"),  # now is not after now
        ("at 0001-01-01T00:00", "is in the past"),
        ("0 0 31 2 *", "never matches"),
        ("0 0 30 feb *", "never matches"),
    ],
)
def test_a_schedule_that_can_never_fire_is_refused(text: str, says: str, utc: None) -> None:
    with pytest.raises(ScheduleError, match=says):
        parse(text, NOW)


@pytest.mark.parametrize(
    "text",
    ["every \u0661\u0660s", "in \u0665m", "\u0661 * * * *", "*/\u00b2 * * * *", "0 \uff19 * * *"],
)
def test_only_ascii_digits_are_numbers(text: str) -> None:
    with pytest.raises(ScheduleError):
        parse(text, NOW)


# ---------------------------------------------------------------- the store


@pytest.fixture
def signer(tmp_path: Path) -> Signer:
    return Signer.load(tmp_path / "secret")


@pytest.fixture
def store(tmp_path: Path, signer: Signer) -> ScheduleStore:
    directory = tmp_path / "sessions" / "20260101-000000-abcdef"
    directory.mkdir(parents=True)
    return ScheduleStore(directory, signer)


def every(seconds: int, owner: Any = "agent") -> dict[str, Any]:
    return new_job(owner, "check the log", parse(f"every {seconds}s", NOW), NOW)


def never_waiting(job: dict[str, Any]) -> bool:
    return False


def test_missed_ticks_coalesce_into_one_claim_rescheduled_from_the_claim(
    store: ScheduleStore,
) -> None:
    job = store.add(every(10))
    late = NOW + timedelta(seconds=75)  # due at +10; +20 ... +70 were missed too

    (claim,) = store.claim_due(late, never_waiting)

    assert isinstance(claim, Claim) and claim.coalesced == 6
    assert claim.dispatch["state"] == "open"
    assert claim.dispatch["scheduled_for"] == "2026-03-02T12:07:40.000+00:00"
    stored = store.read().job(job["id"])
    assert stored is not None
    assert stored["run_count"] == 1
    assert stored["next_run_at"] == "2026-03-02T12:08:55.000+00:00"  # late + 10 s
    assert store.claim_due(late + timedelta(seconds=5), never_waiting) == []


def test_the_claim_is_on_disk_before_delivery_and_delivery_closes_it(
    store: ScheduleStore,
) -> None:
    job = store.add(every(10))
    (claim,) = store.claim_due(NOW + timedelta(seconds=10), never_waiting)
    on_disk = json.loads(store.path.read_text())
    assert [d["state"] for d in on_disk["dispatches"]] == ["open"]
    assert on_disk["jobs"][0]["last_run_at"] == "2026-03-02T12:07:40.000+00:00"

    store.delivered(claim.dispatch["id"], "tick_1", NOW + timedelta(seconds=11))

    schedules = store.read()
    assert [(d["state"], d["message_id"]) for d in schedules.dispatches] == [
        ("delivered", "tick_1")
    ]
    assert schedules.job(job["id"])["last_message_id"] == "tick_1"  # type: ignore[index]


def test_a_tick_due_while_the_previous_is_open_or_untaken_is_skipped_from_the_skip_time(
    store: ScheduleStore,
) -> None:
    job = store.add(every(10))
    (first,) = store.claim_due(NOW + timedelta(seconds=10), never_waiting)
    skip_at = NOW + timedelta(seconds=21)

    (skipped,) = store.claim_due(skip_at, never_waiting)  # the first is still open

    assert isinstance(skipped, Skip)
    stored = store.read().job(job["id"])
    assert stored is not None
    assert stored["last_skipped_at"] == "2026-03-02T12:07:51.000+00:00"
    assert stored["next_run_at"] == "2026-03-02T12:08:01.000+00:00"
    assert stored["run_count"] == 1
    store.delivered(first.dispatch["id"], "tick_1", skip_at)
    # delivered but its message still waits for the agent: skipped again
    (again,) = store.claim_due(skip_at + timedelta(seconds=10), lambda j: True)
    assert isinstance(again, Skip)
    (claim,) = store.claim_due(skip_at + timedelta(seconds=20), never_waiting)
    assert isinstance(claim, Claim) and claim.job["run_count"] == 2


def test_recovery_marks_an_open_dispatch_interrupted_and_never_replays_it(
    store: ScheduleStore,
) -> None:
    heartbeat = store.add(every(10))
    once = store.add(new_job("cli", "say hi", parse("in 5m", NOW), NOW))
    late = NOW + timedelta(minutes=6)
    claims = store.claim_due(late, never_waiting)
    assert {c.job["id"] for c in claims} == {heartbeat["id"], once["id"]}

    interrupted = store.recover(late + timedelta(seconds=1))  # the process died before delivery

    assert len(interrupted) == 2
    schedules = store.read()
    assert {d["state"] for d in schedules.dispatches} == {"interrupted"}
    recurring, one_shot = schedules.job(heartbeat["id"]), schedules.job(once["id"])
    assert recurring is not None and one_shot is not None
    assert recurring["last_error"] == one_shot["last_error"] == INTERRUPTED
    assert (recurring["status"], one_shot["status"]) == ("active", "completed")
    assert store.recover(late + timedelta(seconds=2)) == []
    # the recurring job goes on from its next time; nothing of the lost tick comes back
    (claim,) = store.claim_due(late + timedelta(seconds=10), never_waiting)
    assert claim.job["id"] == heartbeat["id"] and claim.coalesced == 0


def test_a_file_signed_by_someone_else_never_fires_and_is_not_written_over(
    store: ScheduleStore, tmp_path: Path
) -> None:
    theirs = ScheduleStore(store.directory, Signer.load(tmp_path / "their-secret"))
    theirs.add(every(10))
    before = store.path.read_bytes()

    assert store.read().state == "untrusted"
    assert store.claim_due(NOW + timedelta(hours=1), never_waiting) == []
    with pytest.raises(ScheduleStoreError, match="Trust the session first"):
        store.add(every(10))
    assert store.path.read_bytes() == before

    assert store.sign()  # the user trusts the session
    assert store.read().state == "trusted"
    assert len(store.claim_due(NOW + timedelta(hours=1), never_waiting)) == 1


@pytest.mark.parametrize(
    "content",
    [b"{not json", b"[]", b'{"version": 1, "jobs": [{"id": 3}]}', b'{"version": 9, "jobs": []}'],
)
def test_a_damaged_file_is_broken_never_fires_and_is_left_as_it_is(
    store: ScheduleStore, content: bytes
) -> None:
    store.path.write_bytes(content)
    schedules = store.read()
    assert schedules.state == "broken" and schedules.reason
    assert store.claim_due(NOW, never_waiting) == []
    with pytest.raises(ScheduleStoreError, match="left as it is"):
        store.add(every(10))
    assert (store.directory / SCHEDULES_FILE).read_bytes() == content
