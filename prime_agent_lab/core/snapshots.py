"""Kernel snapshots from the host's side: when to take them, when to restore, what to tell.

The kernel side (`prime_agent_kernel.snapshot`) does the pickling; the host runs it as a silent
execution on the agent's own kernel client (never a cell, never while a cell runs: the
executor's lock and the kernel's own queue serialize it) and reads what it wrote into
`<session_dir>/kernel-state/`. See docs/snapshots.md.

- Taken after a turn ends (debounced; the kernel writes nothing when no cell ran since its last
  snapshot), before an eviction, and on request (`AgentRuntime.save_snapshot`).
- Restored into a kernel that holds no user variables: when an agent starts on a session that
  has a snapshot (server restart, CLI `--continue`/`--resume`, a sub-agent reopened from disk or
  back from eviction), after the kernel died, and after the harness restarted it. Never after a
  restart by someone else (the Kernel menu): the notice says how to restore by hand.
- The model is told what came back and what did not: between turns as a notice folded into its
  next message, in a turn as part of the observation of the cell whose kernel died.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .agent_view import AgentView
from .jsonfile import MAX_MANIFEST_BYTES, UnreadableFile, read_json_object
from .pending_kernel import PendingKernel
from .ports import KernelPort, KernelRestart
from .text import preview

if TYPE_CHECKING:
    from .events import Event

log = logging.getLogger(__name__)

STATE_DIRECTORY = "kernel-state"
MANIFEST = "manifest.json"
PREVIOUS_MANIFEST = "manifest.previous.json"
RESTORE_REPORT = "restore-report.json"
DEFAULT_SNAPSHOT_VARIABLE_CAP = 16 * 2**20
DEFAULT_SNAPSHOT_TOTAL_CAP = 256 * 2**20
DEFAULT_SNAPSHOT_DEBOUNCE = 1.5  # seconds after a turn ends
SNAPSHOT_TIMEOUT = 600.0  # a snapshot waits behind a cell the user runs; it never interrupts it
NAMES_SHOWN = 30

RESTORED = "kernel_state_restored"
NOT_RESTORED = "kernel_state_not_restored"
RESTORE_AFTER_NOTICE: dict[str, str] = {"kernel_died": "died", "kernel_restarted": "agent"}
"""Between-turn kernel notices after which the snapshot is restored (`kernel_restarted`: the
harness restarted the kernel for a cell that ignored an interrupt)."""


class SnapshotFailed(RuntimeError):
    """A snapshot or restore could not run; the message says why."""


class SilentRunner(Protocol):
    async def run_silently(self, code: str, timeout: float) -> dict[str, Any]: ...


@dataclass(frozen=True)
class SnapshotSettings:
    variable_cap: int = DEFAULT_SNAPSHOT_VARIABLE_CAP
    total_cap: int = DEFAULT_SNAPSHOT_TOTAL_CAP
    debounce: float = DEFAULT_SNAPSHOT_DEBOUNCE


def state_directory(session_dir: Path) -> Path:
    return session_dir / STATE_DIRECTORY


def read_manifest(session_dir: Path) -> dict[str, Any] | None:
    """The latest snapshot's manifest, or None (none taken, or unreadable)."""
    return _read_json(state_directory(session_dir) / MANIFEST)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return read_json_object(path, MAX_MANIFEST_BYTES)
    except UnreadableFile as exc:
        if not exc.missing:
            log.warning("%s", exc)
        return None


def save_code(directory: Path, variable_cap: int, total_cap: int) -> str:
    return (
        "import prime_agent_kernel.snapshot as _prime_agent_snapshot\n"
        f"_prime_agent_snapshot.save({str(directory)!r}, {variable_cap!r}, {total_cap!r})\n"
        "del _prime_agent_snapshot\n"
    )


def restore_code(directory: Path) -> str:
    return (
        "import prime_agent_kernel.snapshot as _prime_agent_snapshot\n"
        f"_prime_agent_snapshot.restore({str(directory)!r}, only_if_fresh=True)\n"
        "del _prime_agent_snapshot\n"
    )


def manual_restore_call(directory: Path, previous: bool = False) -> str:
    extra = ", previous=True" if previous else ""
    return (
        f"import prime_agent_kernel; prime_agent_kernel.restore_snapshot({str(directory)!r}{extra})"
    )


async def _runner(kernel: KernelPort) -> SilentRunner:
    if isinstance(kernel, PendingKernel):
        kernel = await kernel.ready()
    if not hasattr(kernel, "run_silently"):
        raise SnapshotFailed("this agent has no kernel yet")
    return kernel  # type: ignore[return-value]


async def _run(kernel: KernelPort, code: str) -> None:
    reply = await (await _runner(kernel)).run_silently(code, SNAPSHOT_TIMEOUT)
    if reply.get("status") != "ok":
        raise SnapshotFailed(f"{reply.get('ename', 'error')}: {reply.get('evalue', '')}")


async def take_snapshot(
    kernel: KernelPort, session_dir: Path, settings: SnapshotSettings
) -> dict[str, Any]:
    """Snapshot the kernel's variables; the manifest (`unchanged`: nothing ran since the last)."""
    directory = state_directory(session_dir)
    before = read_manifest(session_dir)
    await _run(kernel, save_code(directory, settings.variable_cap, settings.total_cap))
    manifest = read_manifest(session_dir)
    if manifest is None:
        raise SnapshotFailed(f"the kernel wrote no manifest into {directory}")
    if before is not None and before.get("time") == manifest.get("time"):
        manifest["unchanged"] = True
    return manifest


async def restore_snapshot(kernel: KernelPort, session_dir: Path) -> dict[str, Any]:
    """Restore the latest snapshot into a kernel without user variables; the kernel's report."""
    directory = state_directory(session_dir)
    with contextlib.suppress(FileNotFoundError):
        (directory / RESTORE_REPORT).unlink()
    await _run(kernel, restore_code(directory))
    report = _read_json(directory / RESTORE_REPORT)
    if report is None:
        raise SnapshotFailed(f"the kernel wrote no restore report into {directory}")
    return report


def _names(items: list[str]) -> str:
    shown = ", ".join(items[:NAMES_SHOWN])
    more = len(items) - NAMES_SHOWN
    return f"{shown} and {more} more" if more > 0 else shown


def _reasons(entries: list[dict[str, Any]]) -> str:
    return _names([f"{e.get('name')} ({preview(str(e.get('reason', '')), 120)})" for e in entries])


def describe_restore(report: dict[str, Any], directory: Path) -> tuple[str, str]:
    """(notice kind, text) for a restore report."""
    refused = report.get("refused")
    if refused == "no snapshot":
        text = "The kernel snapshot is missing or unreadable: this is a clean start."
        if report.get("unreadable"):
            why = preview(str(report["unreadable"]), 300)
            text = f"The kernel snapshot cannot be read ({why}): this is a clean start."
        if _read_json(directory / PREVIOUS_MANIFEST) is not None:
            text += (
                " The snapshot before it is readable; to bring it back, run "
                f"`{manual_restore_call(directory, previous=True)}`."
            )
        return NOT_RESTORED, text
    if refused and str(refused).startswith("the kernel already holds"):
        return NOT_RESTORED, (
            f"A kernel snapshot ({report.get('snapshot_time') or 'earlier'}) exists but was not "
            f"restored: {refused}. To bring it back (names the kernel holds are kept), run "
            f"`{manual_restore_call(directory)}`."
        )
    if refused:
        return NOT_RESTORED, f"The kernel snapshot was not restored ({refused}): a clean start."
    restored = [str(e.get("name")) for e in report.get("restored", [])]
    restored += [f"{e.get('name')} (import {e.get('module')})" for e in report.get("imports", [])]
    parts = [
        "Kernel variables restored from the snapshot of "
        f"{report.get('snapshot_time')}: {_names(restored) or 'none'}."
    ]
    if report.get("failed"):
        parts.append(f"Could not be restored: {_reasons(report['failed'])}.")
    if report.get("skipped_at_save"):
        parts.append(f"Not in the snapshot: {_reasons(report['skipped_at_save'])}.")
    if report.get("kept"):
        parts.append(f"Kept as the kernel had them: {_names(report['kept'])}.")
    kind = RESTORED if restored or not report.get("failed") else NOT_RESTORED
    return kind, " ".join(parts)


def describe_failure(exc: BaseException) -> tuple[str, str]:
    return NOT_RESTORED, (
        f"The kernel snapshot could not be restored ({preview(str(exc), 300)}): this is a clean "
        "start."
    )


def _generation(kernel: KernelPort) -> object:
    """The kernel process behind a port (None: unknown)."""
    if isinstance(kernel, PendingKernel):
        arrived = kernel.kernel
        return _generation(arrived) if arrived is not None else None
    return getattr(kernel, "generation", None)


class SnapshotKeeper:
    """Per runtime: debounced snapshots after turns, restores that are due, and what the
    agent is told about them."""

    def __init__(
        self,
        session_dir: Callable[[str], Path],
        settings: Callable[[], SnapshotSettings],
        spawn: Callable[[Any], None],
    ) -> None:
        self._session_dir = session_dir
        self._settings = settings
        self._spawn = spawn
        self._due: dict[str, str] = {}  # session id -> why a restore is due
        self._restoring: dict[str, asyncio.Future[None]] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._saving: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._restored_in: dict[str, object] = {}  # session id -> kernel process restored into

    def directory(self, session_id: str) -> Path:
        return state_directory(self._session_dir(session_id))

    def has_snapshot(self, session_id: str) -> bool:
        return (self.directory(session_id) / MANIFEST).exists()

    # ------------------------------------------------------------ agents

    def agent_started(self, agent: AgentView) -> None:
        """An agent on a session: a snapshot of it comes back into its (fresh) kernel."""
        if (self.directory(agent.session_id) / MANIFEST).exists():
            self._due[agent.session_id] = "start"
        agent.events.add_listener(lambda event: self._on_event(agent, event))

    def agent_gone(self, session_id: str) -> None:
        timer = self._timers.pop(session_id, None)
        if timer is not None:
            timer.cancel()
        self._due.pop(session_id, None)

    def kernel_switched(self, agent: AgentView) -> None:
        """The agent moved to another kernel (the notebook got a new one): its snapshot comes
        back if that kernel holds no user variables yet."""
        if (self.directory(agent.session_id) / MANIFEST).exists():
            self._due[agent.session_id] = "switch"

    def close(self) -> None:
        """No debounced snapshot fires after shutdown (the kernels are going away)."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

    def kernel_bound(self, agent: AgentView) -> None:
        """The agent has its kernel: a restore that is due starts now, so the variables are back
        as soon as the notebook is open, before anyone asks the agent."""
        if agent.session_id in self._due and not agent.running:
            self._start_restore(agent)

    def _on_event(self, agent: AgentView, event: Event) -> None:
        kind = event["type"]
        if kind == "turn_started":
            timer = self._timers.pop(agent.session_id, None)
            if timer is not None:  # that turn's end takes the snapshot
                timer.cancel()
        elif kind == "turn_ended":
            self._schedule_save(agent)
        elif kind == "notice" and event.get("turn") is None:
            self._between_turns_restart(agent, str(event.get("kind", "")))

    def _between_turns_restart(self, agent: AgentView, notice: str) -> None:
        """A restart no agent cell reported (the host saw it happen between turns)."""
        why = RESTORE_AFTER_NOTICE.get(notice)
        if why is not None:
            self._due[agent.session_id] = why
            if not agent.running:  # in a turn: the cell whose kernel died restores it, or the
                self._start_restore(agent)  # next turn does
        elif notice == "kernel_restarted_externally":
            directory = self.directory(agent.session_id)
            if (directory / MANIFEST).exists():
                agent.notice(NOT_RESTORED, self._restart_hint(directory))

    @staticmethod
    def _restart_hint(directory: Path) -> str:
        return (
            "A kernel snapshot from before the restart exists; it is not restored over a restart "
            f"someone chose. To bring it back, run `{manual_restore_call(directory)}` (after the "
            "next snapshot, add `previous=True`)."
        )

    # ------------------------------------------------------------ restore

    async def before_turn(self, agent: AgentView) -> None:
        """Agent hook: a restore that is due (or under way) finishes before the turn's message,
        so what it says reaches the model with that message."""
        if agent.session_id in self._due:
            self._start_restore(agent)
        task = self._restoring.get(agent.session_id)
        if task is not None:
            await asyncio.shield(task)

    async def before_cell(self, agent: AgentView) -> tuple[str, str] | None:
        """Agent hook: the kernel died while the model was thinking (a restart noticed in a
        turn): the snapshot comes back before the turn's next cell, which tells the model."""
        if agent.session_id not in self._due:
            return None
        task = self._restoring.get(agent.session_id)
        if task is not None:
            await asyncio.shield(task)
            return None
        self._due.pop(agent.session_id, None)
        if self._restored_into_this_process(agent):
            return None
        return await self._restore_told(agent)  # the cell's note tells it

    async def after_restart(
        self, agent: AgentView, restarted: KernelRestart
    ) -> tuple[str, str] | None:
        """Agent hook: the kernel restarted under an agent cell. The snapshot comes back after
        a death or the harness's own restart; (kind, text) for the cell's observation."""
        directory = self.directory(agent.session_id)
        if not (directory / MANIFEST).exists():
            return None
        if restarted == "external":
            return NOT_RESTORED, self._restart_hint(directory)
        self._due.pop(agent.session_id, None)
        return await self._restore(agent)

    def _start_restore(self, agent: AgentView) -> None:
        if self._due.pop(agent.session_id, None) is None:
            return
        if self._restored_into_this_process(agent):
            return  # a late restart notice
        current = self._restoring.get(agent.session_id)
        if current is not None and not current.done():
            return
        task = asyncio.ensure_future(self._restore_between_turns(agent))
        self._restoring[agent.session_id] = task
        task.add_done_callback(lambda _: self._restoring.pop(agent.session_id, None))

    async def _restore_between_turns(self, agent: AgentView) -> None:
        agent.notice(*await self._restore_told(agent))

    def _restored_into_this_process(self, agent: AgentView) -> bool:
        """Whether the kernel process running now got the snapshot already."""
        generation = _generation(agent.kernel)
        return generation is not None and self._restored_in.get(agent.session_id) == generation

    async def _restore_told(self, agent: AgentView) -> tuple[str, str]:
        """Restore, and tell the kernel port the agent hears of it from what this returns, so
        its next cell does not also say the variables are gone."""
        came_back = await self._restore(agent)
        reported = getattr(agent.kernel, "restart_reported", None)
        if reported is not None:
            reported()
        return came_back

    async def _restore(self, agent: AgentView) -> tuple[str, str]:
        session_dir = self._session_dir(agent.session_id)
        try:
            report = await restore_snapshot(agent.kernel, session_dir)
            self._restored_in[agent.session_id] = _generation(agent.kernel)
        except Exception as exc:
            log.warning("restoring the snapshot of %s failed", agent.session_id, exc_info=True)
            return describe_failure(exc)
        return describe_restore(report, state_directory(session_dir))

    # ------------------------------------------------------------ save

    def _schedule_save(self, agent: AgentView) -> None:
        timer = self._timers.pop(agent.session_id, None)
        if timer is not None:
            timer.cancel()
        loop = asyncio.get_running_loop()
        self._timers[agent.session_id] = loop.call_later(
            self._settings().debounce, self._save_after_turn, agent
        )

    def _save_after_turn(self, agent: AgentView) -> None:
        self._timers.pop(agent.session_id, None)
        if not agent.running:
            self._spawn(self._save_quietly(agent))

    async def _save_quietly(self, agent: AgentView) -> None:
        try:
            await self.save(agent)
        except Exception as exc:
            log.warning("the kernel snapshot of %s failed: %s", agent.session_id, exc)

    async def save(self, agent: AgentView) -> dict[str, Any]:
        """Snapshot now (one at a time per agent: a second caller shares the running one)."""
        running = self._saving.get(agent.session_id)
        if running is not None and not running.done():
            return await asyncio.shield(running)
        session_dir = self._session_dir(agent.session_id)
        if agent.session_id in self._due:  # the kernel does not hold the snapshot's state yet
            return {**(read_manifest(session_dir) or {}), "unchanged": True}
        restoring = self._restoring.get(agent.session_id)
        if restoring is not None:  # never save over a snapshot that is still coming back
            await asyncio.shield(restoring)
        task = asyncio.ensure_future(take_snapshot(agent.kernel, session_dir, self._settings()))
        self._saving[agent.session_id] = task
        try:
            return await asyncio.shield(task)
        finally:
            if self._saving.get(agent.session_id) is task:
                del self._saving[agent.session_id]

    def pending_save(self, session_id: str) -> bool:
        """A snapshot is scheduled or running (tests and eviction wait for it)."""
        running = self._saving.get(session_id)
        return session_id in self._timers or (running is not None and not running.done())
