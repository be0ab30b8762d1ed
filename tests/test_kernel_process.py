"""The record that tells a gateway kernel's processes apart (adapters/kernel_process.py): one new
generation per restart, whichever of its signals (the process token, the new kernel's iopub
`starting`, the gateway's `restarting`) arrives first and in whatever order the rest follow."""

from __future__ import annotations

from prime_agent_lab.adapters.kernel_process import KernelProcess, token_of


def started(token: str = "t1", session: str = "s1") -> KernelProcess:
    process = KernelProcess()
    process.seen(token, session)  # the setup's read
    return process


def test_the_first_token_and_the_first_starting_change_nothing() -> None:
    process = KernelProcess()
    first = process.current
    process.replaced(session="s1")  # the kernel's own `starting`, before any read
    process.seen("t1", "s1")
    assert process.current is first and process.told


def test_a_new_token_is_a_new_process_told_once_and_its_late_statuses_change_nothing() -> None:
    process = started()
    process.seen("t2", "s2")
    new = process.current
    assert not process.told and not process.died
    process.told = True  # the executor told the fleet
    process.replaced(session="s2")  # that process's own `starting`, late
    process.restarting()  # the gateway's, late
    process.seen("t2", "s2")
    assert process.current is new and process.told


def test_restarting_then_starting_then_the_token_is_one_death() -> None:
    process = started()
    process.restarting()
    dead = process.current
    process.replaced(session="s2")
    process.seen("t2", "s2")
    assert process.current is dead and process.died and not process.told


def test_starting_then_restarting_is_one_death() -> None:
    process = started()
    process.replaced(session="s2")
    new = process.current
    process.restarting()
    process.seen("t2", "s2")
    assert process.current is new and process.died


def test_a_late_restarting_makes_an_untold_change_a_death() -> None:
    process = started()
    process.seen("t2", "s2")
    process.restarting()
    assert process.died and not process.told


def test_the_executors_own_restart_is_a_new_process_already_told() -> None:
    process = started()
    process.replaced(told=True)
    new = process.current
    process.seen("t2", "s2")
    assert process.current is new and process.told


def test_a_second_restart_after_the_first_was_matched_is_another_process() -> None:
    process = started()
    process.seen("t2", "s2")
    process.restarting()  # matched to t2
    second = process.current
    process.restarting()  # a new death
    assert process.current is not second and process.died


def test_the_token_is_read_from_a_replys_user_expressions() -> None:
    ok = {"status": "ok", "data": {"text/plain": "'abc'"}}
    assert token_of({"user_expressions": {"prime_agent_process_token": ok}}) == "'abc'"
    failed = {"status": "error", "ename": "ModuleNotFoundError"}
    assert token_of({"user_expressions": {"prime_agent_process_token": failed}}) is None
    assert token_of({}) is None
