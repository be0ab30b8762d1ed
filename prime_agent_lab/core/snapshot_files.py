"""Where a session's kernel snapshot lives and what its files are called: shared by the host's
snapshot keeper (core/snapshots.py) and the bridge transfer for kernels without the host's disk
(core/snapshot_transfer.py)."""

from __future__ import annotations

from pathlib import Path

STATE_DIRECTORY = "kernel-state"
MANIFEST = "manifest.json"
PREVIOUS_MANIFEST = "manifest.previous.json"
RESTORE_REPORT = "restore-report.json"
SNAPSHOT_TIMEOUT = 600.0  # a snapshot waits behind a cell the user runs; it never interrupts it


class SnapshotFailed(RuntimeError):
    """A snapshot or restore could not run; the message says why."""


def state_directory(session_dir: Path) -> Path:
    return session_dir / STATE_DIRECTORY
