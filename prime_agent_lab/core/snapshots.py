"""Kernel snapshots from the host's side: when to take them, when to restore, what to tell.

The kernel side (`prime_agent_kernel.snapshot`) does the pickling; the host runs it as a silent
execution on the agent's own kernel client (never a cell, never while a cell runs: the
executor's lock and the kernel's own queue serialize it) and reads what it wrote into
`<session_dir>/kernel-state/`. See docs/snapshots.md.

- Taken when a turn starts (before its first cell: a restart that cell forces brings back what
  the kernel held before the turn, the user's cells since the last snapshot included), after a
  turn ends (debounced), before an eviction, and on request (`AgentRuntime.save_snapshot`). The
  kernel writes nothing when no cell ran since its last snapshot.
- Restored into a kernel that holds no user variables: when an agent starts on a session that
  has a snapshot (server restart, CLI `--continue`/`--resume`, a sub-agent reopened from disk or
  back from eviction), after the kernel died, and after the harness restarted it. Never after a
  restart by someone else (the Kernel menu): the notice says how to restore by hand.
- The model is told what came back and what did not: between turns as a notice folded into its
  next message, in a turn as part of the observation of the cell whose kernel died.

Size: over 600 lines because the on-disk protocol (manifest, digests, signature, commit and
set-aside) and the keeper that decides when to snapshot and restore share every rule about
which manifest counts; splitting them would state those rules twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .agent_view import AgentView
from .jsonfile import (
    MAX_COPIED_FILE_BYTES,
    MAX_MANIFEST_BYTES,
    BadJson,
    UnreadableFile,
    parse_json_object,
    read_bytes,
    read_json_object,
)
from .pending_kernel import PendingKernel
from .ports import ExecutionResult, KernelCameBack, KernelPort
from .settings import DEFAULTS
from .snapshot_files import (
    MANIFEST,
    PREVIOUS_MANIFEST,
    RESTORE_REPORT,
    SNAPSHOT_TIMEOUT,
    SnapshotFailed,
    state_directory,
)
from .snapshot_transfer import (
    Caps,
    SnapshotTransfers,
    pull_through_bridge,
    push_code,
    shares_disk,
)
from .text import preview
from .trust import Signer
from .trust import sha256 as trust_sha256
from .whole_writes import replace_whole

if TYPE_CHECKING:
    from .events import Event

log = logging.getLogger(__name__)

NEW_MANIFEST = "manifest.new.json"  # what the kernel wrote, before the host commits it
UNTRUSTED_MANIFEST = "manifest.untrusted.json"
"""An untrusted snapshot a newer one of this user's replaced: kept (with its files) until the
user trusts it or a later untrusted one takes its place, so the Trust action still has it."""
FORMAT_VERSION = 2
DEFAULT_SNAPSHOT_VARIABLE_CAP = DEFAULTS.snapshot_variable_cap
DEFAULT_SNAPSHOT_TOTAL_CAP = DEFAULTS.snapshot_total_cap
DEFAULT_SNAPSHOT_DEBOUNCE = DEFAULTS.snapshot_debounce
NAMES_SHOWN = 30
SIGNED_FOR = "snapshot"  # the signature purpose (core/trust.py)
HOLDS_A_KEY = (
    "it holds a provider API key (a `kernel_env_strip` variable's value); keys are not written "
    "into snapshots"
)
_FILE_NAME = re.compile(r"[0-9]{5}-[0-9a-f]{8}\.pkl")

RESTORED = "kernel_state_restored"
NOT_RESTORED = "kernel_state_not_restored"
RESTORE_AFTER_NOTICE: dict[str, str] = {"kernel_died": "died", "kernel_restarted": "agent"}
"""Between-turn kernel notices after which the snapshot is restored (`kernel_restarted`: the
harness restarted the kernel for a cell that ignored an interrupt)."""


class SnapshotsUnavailable(SnapshotFailed):
    """The kernel has no kernel package, which the user and the model were told once already
    (adapters/kernel_package_check.py): no warning for each snapshot it cannot take."""


class SilentRunner(Protocol):
    async def run_silently(self, code: str, timeout: float) -> dict[str, Any]: ...


class SecretScanner(Protocol):
    def found_in(self, data: bytes) -> bool: ...


@dataclass(frozen=True)
class SnapshotSettings:
    variable_cap: int = DEFAULT_SNAPSHOT_VARIABLE_CAP
    total_cap: int = DEFAULT_SNAPSHOT_TOTAL_CAP
    debounce: float = DEFAULT_SNAPSHOT_DEBOUNCE


def _linked(directory: Path) -> bool:
    """The folder is a symbolic link (a colleague's folder may point it anywhere): nothing is
    read, written or removed through it."""
    return directory.is_symlink()


def _read_manifest_file(path: Path) -> tuple[bytes, dict[str, Any]] | str | None:
    """A manifest's exact bytes and value; why it cannot be read; None when there is none."""
    try:
        raw = read_bytes(path, MAX_MANIFEST_BYTES)
        manifest = parse_json_object(raw)
    except UnreadableFile as exc:
        return None if exc.missing else str(exc)
    except BadJson as exc:
        return f"{path} {exc.reason}"
    for key in ("saved", "imports", "skipped"):  # the shape the kernel also checks
        value = manifest.get(key, [])
        if not isinstance(value, list) or not all(isinstance(e, dict) for e in value):
            return f"{path} is damaged: its {key!r} is not a list of objects"
    return raw, manifest


def _read_manifest(path: Path) -> tuple[bytes, dict[str, Any]] | None:
    found = _read_manifest_file(path)
    return found if isinstance(found, tuple) else None


def read_manifest(session_dir: Path) -> dict[str, Any] | None:
    """The latest snapshot's manifest, or None (none taken, or unreadable)."""
    found = _read_manifest(state_directory(session_dir) / MANIFEST)
    return None if found is None else found[1]


@dataclass(frozen=True)
class SnapshotCheck:
    """What a session's snapshot is, for the host's automatic restore.

    `state`: `none` (no readable manifest, and no readable previous one), `trusted` (signed with
    this user's secret), `untrusted` (unsigned or signed with another secret: never restored
    until the user trusts it). `previous`: the latest manifest is unreadable and the usable one
    is the snapshot before it. `digest`: the SHA-256 of the manifest's bytes, which the kernel
    checks again before it loads anything."""

    state: str
    manifest: dict[str, Any] | None = None
    digest: str | None = None
    previous: bool = False
    unreadable: str | None = None  # why the latest manifest cannot be read


def check_snapshot(session_dir: Path, signer: Signer) -> SnapshotCheck:
    directory = state_directory(session_dir)
    if _linked(directory):
        return SnapshotCheck("none", unreadable=f"{directory} is a symbolic link")
    unreadable = None
    for previous, name in ((False, MANIFEST), (True, PREVIOUS_MANIFEST)):
        found = _read_manifest_file(directory / name)
        if not isinstance(found, tuple):
            unreadable = unreadable or found
            continue  # an unreadable latest manifest: the snapshot before it comes back
        raw, manifest = found
        state = "trusted" if _signed(manifest, signer) else "untrusted"
        return SnapshotCheck(state, manifest, trust_sha256(raw), previous, unreadable)
    return SnapshotCheck("none", unreadable=unreadable)


@dataclass(frozen=True)
class KeptSnapshot:
    """A readable manifest of a session, as reverting a turn looks for the one from before it
    (core/turn_review.py): `previous` (`manifest.previous.json`), its digest (what the kernel
    checks again), and whether this user signed it (an unsigned one is never loaded)."""

    manifest: dict[str, Any]
    digest: str
    previous: bool
    trusted: bool


def kept_snapshots(session_dir: Path, signer: Signer) -> list[KeptSnapshot]:
    """The latest and the previous snapshot, those that can be read, latest first."""
    directory = state_directory(session_dir)
    if _linked(directory):
        return []
    kept = []
    for previous, name in ((False, MANIFEST), (True, PREVIOUS_MANIFEST)):
        found = _read_manifest(directory / name)
        if found is not None:
            raw, manifest = found
            kept.append(
                KeptSnapshot(manifest, trust_sha256(raw), previous, _signed(manifest, signer))
            )
    return kept


def untrusted_snapshot(session_dir: Path, signer: Signer) -> dict[str, Any] | None:
    """The snapshot this user has not signed that trusting the session would restore: the
    latest, or the one a newer snapshot of this user's set aside."""
    check = check_snapshot(session_dir, signer)
    if check.state == "untrusted":
        return check.manifest
    directory = state_directory(session_dir)
    aside = None if _linked(directory) else _read_manifest(directory / UNTRUSTED_MANIFEST)
    return aside[1] if aside is not None else None


def describe_snapshot(manifest: dict[str, Any]) -> str:
    """What restoring `manifest` would load, in one line. The names and types are what the
    manifest claims (whoever wrote it chose them); what a pickle does when loaded is not shown
    by any of it, so the line says so."""
    saved = [e for e in manifest.get("saved", []) if isinstance(e, dict)]
    imports = [e for e in manifest.get("imports", []) if isinstance(e, dict)]
    names = [
        f"{_quoted(e.get('name'), 40)} ({_quoted(e.get('type'), 40)}, "
        f"{_quoted(e.get('method'), 10)})"
        for e in saved
    ]
    names += [f"import {_quoted(e.get('module'), 60)}" for e in imports]
    when = _quoted(manifest.get("time") or "an unknown time", 40)
    return (
        f"a kernel snapshot of {when} whose manifest claims {len(saved)} pickled variable(s) "
        f"and {len(imports)} import(s): {_names(names) or 'none'} (loading runs whatever the "
        "pickles hold, whatever these names say)"
    )


def _quoted(value: object, limit: int) -> str:
    """A value someone else wrote, as one short line of plain characters."""
    text = "".join(c if c.isprintable() else "?" for c in preview(str(value), limit))
    return repr(text) if any(c in text for c in ",()—-:;") else text


def save_code(directory: Path, variable_cap: int, total_cap: int) -> str:
    return (
        "import prime_agent_kernel.snapshot as _prime_agent_snapshot\n"
        f"_prime_agent_snapshot.save({str(directory)!r}, {variable_cap!r}, {total_cap!r})\n"
        "del _prime_agent_snapshot\n"
    )


def restore_code(directory: Path, digest: str, previous: bool) -> str:
    return (
        "import prime_agent_kernel.snapshot as _prime_agent_snapshot\n"
        f"_prime_agent_snapshot.restore({str(directory)!r}, only_if_fresh=True, "
        f"previous={previous!r}, expect={digest!r})\n"
        "del _prime_agent_snapshot\n"
    )


def manual_restore_call(previous: bool = False) -> str:
    """The line a user types in the kernel to bring the session's snapshot back by hand: no
    folder, so it works on any kernel (the host offers it over the bridge: core/hand_restore.py)."""
    extra = "previous=True" if previous else ""
    return f"import prime_agent_kernel; prime_agent_kernel.restore_snapshot({extra})"


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


async def forget_skill_paths(kernel: KernelPort) -> None:
    """The kernel asks the host again where skill modules are (a store became trusted)."""
    code = (
        "import prime_agent_kernel.harness as _prime_agent_harness\n"
        "_prime_agent_harness.forget_paths()\n"
        "del _prime_agent_harness\n"
    )
    try:
        await _run(kernel, code)
    except Exception as exc:  # no kernel yet: it asks when it first imports a skill
        log.info("the kernel keeps its skill paths until it asks again: %s", exc)


async def take_snapshot(
    kernel: KernelPort,
    session_dir: Path,
    settings: SnapshotSettings,
    signer: Signer,
    secrets: SecretScanner | None = None,
    transfers: SnapshotTransfers | None = None,
    keeps_latest: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """Snapshot the kernel's variables; the committed manifest (`unchanged`: nothing ran since
    the last). The kernel writes the files and a new manifest (a kernel that does not share the
    host's disk sends them over the bridge: core/snapshot_transfer.py); the host checks every
    file (a provider key in one drops that variable), signs the manifest and commits it.
    `keeps_latest()`, asked once the kernel wrote: a new manifest without a single name does not
    replace the latest (`SnapshotKeeper`: a process restarted by someone's choice)."""
    directory = state_directory(session_dir)
    if _linked(directory):
        raise SnapshotFailed(f"{directory} is a symbolic link: no snapshot is taken through it")
    with contextlib.suppress(OSError):
        (directory / NEW_MANIFEST).unlink()
    caps = Caps(settings.variable_cap, settings.total_cap)
    remote = transfers is not None and not shares_disk(await _runner(kernel))
    try:
        if transfers is not None and remote:
            directory.mkdir(parents=True, exist_ok=True)
            committed = (read_manifest(session_dir) or {}).get("time")
            with transfers.expecting(directory, caps):
                await _run(kernel, push_code(caps, committed))
        else:
            await _run(kernel, save_code(directory, caps.variable, caps.total))
    except SnapshotFailed as exc:  # a full disk while the kernel wrote: nothing of it stays
        await asyncio.to_thread(_discard_new, directory)
        if getattr(await _runner(kernel), "lacks_package", False):
            raise SnapshotsUnavailable("this kernel has no prime_agent_kernel") from None
        raise SnapshotFailed(
            f"the snapshot could not be written ({exc}); the previous snapshot is kept"
        ) from None
    new = directory / NEW_MANIFEST
    if keeps_latest is not None and new.exists() and _names_nothing(new) and keeps_latest():
        await asyncio.to_thread(_discard_new, directory)
    if not (directory / NEW_MANIFEST).exists():
        manifest = read_manifest(session_dir)
        if manifest is None:
            raise SnapshotFailed(f"the kernel wrote no manifest into {directory}")
        return {**manifest, "unchanged": True}
    return await asyncio.to_thread(commit_snapshot, directory, signer, secrets)


def _names_nothing(path: Path) -> bool:
    found = _read_manifest(path)
    manifest = found[1] if found is not None else {}
    return not any(manifest.get(part) for part in ("saved", "imports", "skipped"))


def commit_snapshot(
    directory: Path, signer: Signer, secrets: SecretScanner | None = None
) -> dict[str, Any]:
    """Turn the kernel's `manifest.new.json` into the signed `manifest.json`. The folder never
    lacks a valid manifest: the one being replaced is copied to `manifest.previous.json` first,
    the new one is written beside and renamed over. On any failure (a full disk) the previous
    snapshot stays as it was and the new files go."""
    new_path = directory / NEW_MANIFEST
    try:
        found = _read_manifest(new_path)
        if found is None:
            raise SnapshotFailed(f"the kernel's new manifest in {directory} is unreadable")
        manifest = _checked_files(directory, found[1], secrets)
        signed = signer.sign_object(SIGNED_FOR, {**manifest, "version": FORMAT_VERSION})
        current = directory / MANIFEST
        kept = _read_manifest(current)
        if kept is not None and _signed(kept[1], signer):
            replace_whole(directory / PREVIOUS_MANIFEST, kept[0])
        elif kept is not None:  # someone else's: kept aside for the user to trust
            replace_whole(directory / UNTRUSTED_MANIFEST, kept[0])
        replace_whole(current, json.dumps(signed).encode("utf-8"))
    except BaseException as exc:
        _discard_new(directory)
        if isinstance(exc, OSError):
            raise SnapshotFailed(
                f"the snapshot could not be written ({exc.strerror or exc}); the previous "
                "snapshot is kept"
            ) from None
        raise
    with contextlib.suppress(OSError):
        new_path.unlink()
    _remove_unreferenced(directory)
    return signed


def _signed(manifest: dict[str, Any], signer: Signer) -> bool:
    return manifest.get("version") == FORMAT_VERSION and signer.verify_object(SIGNED_FOR, manifest)


def _discard_new(directory: Path) -> None:
    """A save that failed leaves nothing: its manifest and files go, the previous stay."""
    with contextlib.suppress(OSError):
        (directory / NEW_MANIFEST).unlink()
    _remove_unreferenced(directory)


def _checked_files(
    directory: Path, manifest: dict[str, Any], secrets: SecretScanner | None, strict: bool = True
) -> dict[str, Any]:
    """`manifest` with each saved file's digest taken from the file itself, and any variable
    whose bytes hold a provider key moved to `skipped` (its file removed)."""
    saved: list[dict[str, Any]] = []
    skipped = [e for e in manifest.get("skipped", []) if isinstance(e, dict)]
    total = 0
    for entry in manifest.get("saved", []):
        if not isinstance(entry, dict) or not _FILE_NAME.fullmatch(str(entry.get("file"))):
            continue
        path = directory / str(entry["file"])
        try:
            data = read_bytes(path, MAX_COPIED_FILE_BYTES)
        except OSError as exc:
            if strict:
                raise
            skipped.append(
                {
                    "name": entry.get("name"),
                    "type": entry.get("type"),
                    "reason": f"its file is missing or unreadable ({exc})",
                }
            )
            continue
        if secrets is not None and secrets.found_in(data):
            path.unlink(missing_ok=True)
            skipped.append(
                {"name": entry.get("name"), "type": entry.get("type"), "reason": HOLDS_A_KEY}
            )
            continue
        total += len(data)
        saved.append({**entry, "bytes": len(data), "sha256": trust_sha256(data)})
    return {**manifest, "saved": saved, "skipped": skipped, "total_bytes": total}


def _remove_unreferenced(directory: Path) -> None:
    """Variable files no manifest names (a replaced snapshot's, a failed save's) and temp
    files left by a crash."""
    if _linked(directory):
        return
    keep: set[str] = set()
    for name in (MANIFEST, PREVIOUS_MANIFEST, NEW_MANIFEST, UNTRUSTED_MANIFEST):
        found = _read_manifest(directory / name)
        if found is not None:
            keep.update(
                str(e.get("file")) for e in found[1].get("saved", []) if isinstance(e, dict)
            )
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for file_name in names:
        if file_name.endswith((".pkl", ".tmp")) and file_name not in keep:
            with contextlib.suppress(OSError):
                (directory / file_name).unlink()


def sign_snapshot(session_dir: Path, signer: Signer) -> bool:
    """The user trusts the snapshot `untrusted_snapshot` showed: it gets the digest of its
    files as they are now and this user's signature, and becomes the latest (the latest of this
    user's, if any, becomes the previous). False: there was none. Nothing else is signed."""
    directory = state_directory(session_dir)
    if _linked(directory):
        return False
    for name in (MANIFEST, UNTRUSTED_MANIFEST):
        found = _read_manifest(directory / name)
        if found is None or (name == MANIFEST and _signed(found[1], signer)):
            continue
        manifest = _checked_files(directory, found[1], None, strict=False)
        signed = signer.sign_object(SIGNED_FOR, {**manifest, "version": FORMAT_VERSION})
        if name == UNTRUSTED_MANIFEST:
            current = _read_manifest(directory / MANIFEST)
            if current is not None:
                replace_whole(directory / PREVIOUS_MANIFEST, current[0])
        replace_whole(directory / MANIFEST, json.dumps(signed).encode("utf-8"))
        with contextlib.suppress(OSError):
            (directory / UNTRUSTED_MANIFEST).unlink()
        _remove_unreferenced(directory)
        return True
    return False


async def restore_snapshot(
    kernel: KernelPort,
    session_dir: Path,
    signer: Signer,
    transfers: SnapshotTransfers | None = None,
) -> dict[str, Any]:
    """Restore the session's trusted snapshot (the latest, or the one before it when the latest
    is unreadable) into a kernel without user variables; the kernel's report. An untrusted
    snapshot is refused without the kernel reading a byte of it."""
    directory = state_directory(session_dir)
    check = await asyncio.to_thread(check_snapshot, session_dir, signer)
    if check.state == "none":
        return {"refused": "no snapshot", "unreadable": check.unreadable}
    if check.state == "untrusted":
        return {"refused": UNTRUSTED, "snapshot_time": (check.manifest or {}).get("time")}
    with contextlib.suppress(FileNotFoundError):
        (directory / RESTORE_REPORT).unlink()
    runner = await _runner(kernel)
    if transfers is not None and not shares_disk(runner):
        await pull_through_bridge(
            runner.run_silently, directory, check.previous, str(check.digest), transfers
        )
    else:
        await _run(kernel, restore_code(directory, str(check.digest), check.previous))
    try:
        report: dict[str, Any] | None = read_json_object(
            directory / RESTORE_REPORT, MAX_MANIFEST_BYTES
        )
    except UnreadableFile:
        report = None
    if report is None:
        raise SnapshotFailed(f"the kernel wrote no restore report into {directory}")
    if check.previous:
        report["previous"] = True
        report["unreadable"] = check.unreadable
    return report


UNTRUSTED = "untrusted"
UNTRUSTED_TEXT = (
    "The kernel snapshot was not restored: it was not made here (it is unsigned, or signed with "
    "another user's secret), and loading a snapshot runs code. The user can review it and trust "
    "this session (the chat's Trust and restore, `prime-agent-lab run --trust`)."
)


def _names(items: list[str]) -> str:
    shown = ", ".join(items[:NAMES_SHOWN])
    more = len(items) - NAMES_SHOWN
    return f"{shown} and {more} more" if more > 0 else shown


def _reasons(entries: list[dict[str, Any]]) -> str:
    return _names([f"{e.get('name')} ({preview(str(e.get('reason', '')), 120)})" for e in entries])


def describe_restore(report: dict[str, Any]) -> tuple[str, str]:
    """(notice kind, text) for a restore report."""
    refused = report.get("refused")
    if refused == UNTRUSTED:
        return NOT_RESTORED, UNTRUSTED_TEXT
    if refused == "no snapshot":
        if report.get("unreadable"):
            why = preview(str(report["unreadable"]), 300)
            return NOT_RESTORED, f"The kernel snapshot cannot be read ({why}): a clean start."
        return NOT_RESTORED, (
            "The kernel snapshot and the one before it are missing or unreadable: this is a "
            "clean start."
        )
    if refused and str(refused).startswith("the kernel already holds"):
        return NOT_RESTORED, (
            f"A kernel snapshot ({report.get('snapshot_time') or 'earlier'}) exists but was not "
            f"restored: {refused}. To bring it back (names the kernel holds are kept), run "
            f"`{manual_restore_call()}`."
        )
    if refused:
        return NOT_RESTORED, f"The kernel snapshot was not restored ({refused}): a clean start."
    restored = [str(e.get("name")) for e in report.get("restored", [])]
    restored += [f"{e.get('name')} (import {e.get('module')})" for e in report.get("imports", [])]
    which = (
        "the snapshot before the latest (the latest "
        f"{preview(str(report.get('unreadable') or 'is unreadable'), 300)})"
        if report.get("previous")
        else "the snapshot"
    )
    when = report.get("snapshot_time")
    if restored:
        first = f"Kernel variables restored from {which} of {when}: {_names(restored)}."
    elif report.get("failed") or report.get("kept"):
        first = f"No kernel variable was restored from {which} of {when}."
    else:  # said plainly, not "restored ...: none."
        first = f"{which[0].upper()}{which[1:]} of {when} held no variables: nothing to restore."
    parts = [first]
    if report.get("failed"):
        parts.append(f"Could not be restored: {_reasons(report['failed'])}.")
    if report.get("skipped_at_save"):
        parts.append(f"Not in the snapshot: {_reasons(report['skipped_at_save'])}.")
    if report.get("kept"):
        parts.append(f"Kept as the kernel had them: {_names(report['kept'])}.")
    kind = RESTORED if restored or not report.get("failed") else NOT_RESTORED
    return kind, " ".join(parts)


# Replaces the executor's "all variables are gone" once the snapshot is back in the new process.
DIED_AND_RESTORED_NOTE = (
    "[kernel died] The kernel process exited while this cell ran. It was restarted and the "
    "variables of its last snapshot were put back (listed below); what was set after that "
    "snapshot, this cell's work included, is gone."
)

# Replaces the executor's "all variables are gone" after the harness restarted the kernel for
# the agent's cell that ignored the interrupt (Stop, or its time limit) and the snapshot came back.
RESTARTED_AND_RESTORED_NOTE = (
    "{0} This cell ignored the interrupt, so the kernel was restarted and the variables of its "
    "last snapshot were put back (listed below); what was set after that snapshot is gone."
)
RESTART_REASONS = {
    "interrupted": "[stopped] The user stopped the turn.",
    "timeout": "[timeout] The cell ran longer than its time limit ({0:g} s).",
}

RESTART_HINT = (
    "A kernel snapshot from before the restart exists; it is not restored over a restart someone "
    f"chose. To bring it back, run `{manual_restore_call()}` (once a snapshot holds names set "
    "since the restart, add `previous=True`)."
)

RESTORED_BEFORE_NOTE = (
    "[kernel restarted] The kernel restarted while you were thinking, before this cell ran; "
    "what you set after its last snapshot is gone. [{0}] {1}"
)


def restored_note(result: ExecutionResult, kind: str, cell_timeout: float) -> str | None:
    """The cell's note once the snapshot came back after a restart under it (None: the
    executor's note stands, nothing came back)."""
    if kind != RESTORED:
        return None
    if result.restarted == "died":
        return DIED_AND_RESTORED_NOTE
    if result.restarted == "agent":
        reason = RESTART_REASONS.get(result.status, RESTART_REASONS["interrupted"])
        return RESTARTED_AND_RESTORED_NOTE.format(reason.format(cell_timeout))
    return None


def describe_failure(exc: BaseException) -> tuple[str, str]:
    return NOT_RESTORED, (
        f"The kernel snapshot could not be restored ({preview(str(exc), 300)}): this is a clean "
        "start."
    )


class _Queued:
    """The kernel port as one snapshot sees it, telling when that snapshot's silent run has
    asked for the executor's lock (its first step does): from then on the agent's next cell
    can only run after it."""

    def __init__(self, kernel: KernelPort) -> None:
        self._kernel = kernel
        self.queued = asyncio.Event()

    async def run_silently(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        runner = await _runner(self._kernel)
        run = asyncio.ensure_future(runner.run_silently(*args, **kwargs))
        asyncio.get_running_loop().call_soon(self.queued.set)  # after the run's first step
        return await run

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kernel, name)


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
        signer: Signer,
        transfers: SnapshotTransfers | None = None,
    ) -> None:
        self._session_dir = session_dir
        self._signer = signer
        self.transfers = transfers or SnapshotTransfers()
        self._settings = settings
        self._spawn = spawn
        self._due: dict[str, str] = {}  # session id -> why a restore is due
        self._restoring: dict[str, asyncio.Future[None]] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._saving: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._turn_start: dict[str, asyncio.Event] = {}  # session id -> its snapshot is queued
        self._restored_in: dict[str, object] = {}  # session id -> kernel process restored into
        self._saved_from: dict[str, object] = {}  # session id -> kernel process of its snapshot

    def directory(self, session_id: str) -> Path:
        return state_directory(self._session_dir(session_id))

    def has_snapshot(self, session_id: str) -> bool:
        return (self.directory(session_id) / MANIFEST).exists()

    def check(self, session_id: str) -> SnapshotCheck:
        return check_snapshot(self._session_dir(session_id), self._signer)

    # ------------------------------------------------------------ agents

    def agent_started(self, agent: AgentView) -> None:
        """An agent on a session: a trusted snapshot of it comes back into its (fresh) kernel.
        An untrusted one waits until the user trusts the session (`trusted`)."""
        if self.check(agent.session_id).state == "trusted":
            self._due[agent.session_id] = "start"
        agent.events.add_listener(lambda event: self._on_event(agent, event))

    def trusted(self, agent: AgentView) -> None:
        """The user trusted the agent's session: its snapshot comes back now (into a kernel that
        holds no user variables; the notice says what came back)."""
        if self.check(agent.session_id).state == "trusted":
            self._due[agent.session_id] = "trusted"
            if not agent.running:
                self._start_restore(agent)

    def agent_gone(self, session_id: str) -> None:
        timer = self._timers.pop(session_id, None)
        if timer is not None:
            timer.cancel()
        self._due.pop(session_id, None)
        self._turn_start.pop(session_id, None)
        self._saved_from.pop(session_id, None)

    def kernel_switched(self, agent: AgentView) -> None:
        """The agent moved to another kernel (the notebook got a new one): its snapshot comes
        back if that kernel holds no user variables yet."""
        if self.check(agent.session_id).state == "trusted":
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
            if timer is not None:  # the turn's start takes the snapshot
                timer.cancel()
            self._save_at_turn_start(agent)
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
                agent.notice(NOT_RESTORED, RESTART_HINT)

    # ------------------------------------------------------------ restore

    async def before_turn(self, agent: AgentView) -> None:
        """Agent hook: a restore that is due (or under way) finishes before the turn's message,
        so what it says reaches the model with that message."""
        if agent.session_id in self._due:
            self._start_restore(agent)
        task = self._restoring.get(agent.session_id)
        if task is not None:
            await asyncio.shield(task)

    async def before_cell(self, agent: AgentView) -> KernelCameBack | None:
        """Agent hook: the kernel died while the model was thinking (a restart noticed in a
        turn): the snapshot comes back before the turn's next cell, whose note tells the model.
        The turn's first cell goes after the snapshot taken at the turn's start."""
        await self._turn_start_queued(agent.session_id)
        if agent.session_id not in self._due:
            return None
        task = self._restoring.get(agent.session_id)
        if task is not None:
            await asyncio.shield(task)
            return None
        self._due.pop(agent.session_id, None)
        if self._restored_into_this_process(agent):
            return None
        told = await self._restore_told(agent)
        return KernelCameBack(told, RESTORED_BEFORE_NOTE.format(*told))

    async def after_restart(
        self, agent: AgentView, result: ExecutionResult
    ) -> KernelCameBack | None:
        """Agent hook: the kernel restarted under an agent cell (`result.restarted`). The
        snapshot comes back after a death or the harness's own restart, and the cell's note
        says so instead of "everything is gone"."""
        directory = self.directory(agent.session_id)
        if not (directory / MANIFEST).exists():
            return None
        if result.restarted == "external":
            return KernelCameBack((NOT_RESTORED, RESTART_HINT))
        self._due.pop(agent.session_id, None)
        told = await self._restore(agent)
        return KernelCameBack(told, restored_note(result, told[0], agent.config.cell_timeout))

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
            report = await restore_snapshot(agent.kernel, session_dir, self._signer, self.transfers)
            self._restored_in[agent.session_id] = _generation(agent.kernel)
        except Exception as exc:
            log.warning("restoring the snapshot of %s failed", agent.session_id, exc_info=True)
            return describe_failure(exc)
        return describe_restore(report)

    # ------------------------------------------------------------ save

    def _save_at_turn_start(self, agent: AgentView) -> None:
        """Snapshot what the kernel holds as a turn starts (overlapping the model's answer), so
        a restart forced by one of the turn's cells loses nothing from before the turn. Cheap
        when no cell ran since the last snapshot: the kernel then writes nothing."""
        if _generation(agent.kernel) is None or agent.session_id in self._due:
            return  # no kernel yet, or it does not hold the snapshot's state yet
        port = _Queued(agent.kernel)
        task = asyncio.ensure_future(self._take_quietly(agent, port))
        task.add_done_callback(lambda _: port.queued.set())  # also when it never ran
        self._spawn(task)
        self._turn_start[agent.session_id] = port.queued

    async def _turn_start_queued(self, session_id: str) -> None:
        """Until the turn's start snapshot is queued on the executor ahead of the turn's first
        cell (a few steps of the event loop; the cell then waits for it there, where Stop can
        withdraw it)."""
        queued = self._turn_start.pop(session_id, None)
        if queued is not None:
            await queued.wait()

    async def _take_quietly(self, agent: AgentView, kernel: KernelPort | _Queued) -> None:
        try:
            await self._take(agent, kernel)
        except SnapshotsUnavailable as exc:
            log.debug("no kernel snapshot of %s: %s", agent.session_id, exc)
        except Exception as exc:
            log.warning("the kernel snapshot of %s failed: %s", agent.session_id, exc)

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
        except SnapshotsUnavailable as exc:
            log.debug("no kernel snapshot of %s: %s", agent.session_id, exc)
        except Exception as exc:
            log.warning("the kernel snapshot of %s failed: %s", agent.session_id, exc)

    async def save(self, agent: AgentView) -> dict[str, Any]:
        """Snapshot now, one at a time per agent. A save already running read the kernel before
        this call (a turn's first snapshot is still being written when the turn's cells have
        changed the kernel): it is waited for, and a new one taken, never handed out as now's."""
        while (running := self._saving.get(agent.session_id)) is not None and not running.done():
            with contextlib.suppress(Exception):  # its caller hears of its failure
                await asyncio.shield(running)
        return await self._take(agent, agent.kernel)

    async def _take(self, agent: AgentView, kernel: KernelPort | _Queued) -> dict[str, Any]:
        session_dir = self._session_dir(agent.session_id)
        if agent.session_id in self._due:  # the kernel does not hold the snapshot's state yet
            return {**(read_manifest(session_dir) or {}), "unchanged": True}
        restoring = self._restoring.get(agent.session_id)
        if restoring is not None:  # never save over a snapshot that is still coming back
            await asyncio.shield(restoring)
        task = asyncio.ensure_future(
            take_snapshot(
                kernel,
                session_dir,
                self._settings(),
                self._signer,
                agent.redactor,
                self.transfers,
                lambda: self._keeps_latest(agent),
            )
        )
        self._saving[agent.session_id] = task
        try:
            manifest = await asyncio.shield(task)
        finally:
            if self._saving.get(agent.session_id) is task:
                del self._saving[agent.session_id]
        if not manifest.get("unchanged"):
            self._saved_from[agent.session_id] = _generation(agent.kernel)
        return manifest

    def _keeps_latest(self, agent: AgentView) -> bool:
        """The kernel runs a process other than the one the latest snapshot came from, and
        nothing was restored into it (a restart someone chose, which is not undone): until it
        holds a name of its own, its empty snapshot does not push the latest one out, so the
        restore line the notice names (`manual_restore_call`) still brings that one back."""
        saved_from = self._saved_from.get(agent.session_id)
        now = _generation(agent.kernel)
        restored = self._restored_in.get(agent.session_id) == now
        return saved_from is not None and now is not None and now != saved_from and not restored

    def pending_save(self, session_id: str) -> bool:
        """A snapshot is scheduled or running (tests and eviction wait for it)."""
        running = self._saving.get(session_id)
        return session_id in self._timers or (running is not None and not running.done())
