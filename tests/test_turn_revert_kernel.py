"""Reverting a turn, the kernel's side (`prime_agent_kernel.snapshot.restore(prune=True)`): the
snapshot's values come back over what the kernel holds, and the names created after the snapshot
go; the kernel package's own names, and names the snapshot skipped, stay (docs/pairing.md,
section 5)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from prime_agent_kernel import BOUND_NAMES
from prime_agent_kernel import snapshot as kernel_snapshot

from prime_agent_lab.core.snapshots import commit_snapshot, state_directory
from prime_agent_lab.core.trust import Signer


class Shell:
    """What `prime_agent_kernel.snapshot` uses of an IPython shell."""

    def __init__(self, **names: Any) -> None:
        self.user_ns: dict[str, Any] = dict(names)
        self.user_ns_hidden: dict[str, Any] = {}
        self.execution_count = 1


def snapshot(folder: Path, shell: Shell) -> None:
    kernel_snapshot.save(str(folder), shell=shell)
    commit_snapshot(folder, Signer(b"the secret of these revert tests"))


def test_a_pruning_restore_brings_values_back_and_deletes_what_came_after(tmp_path: Path) -> None:
    folder = state_directory(tmp_path)
    lock = threading.Lock()
    shell = Shell(x=1, kept=[1, 2], lock=lock)  # a lock is skipped at save, with its reason
    snapshot(folder, shell)
    bound = sorted(BOUND_NAMES)[0]
    shell.user_ns.update(x=2, y="new", kept=[1, 2, 3], _private=5, **{bound: "the package's"})
    shell.execution_count = 3

    report = kernel_snapshot.restore(str(folder), shell=shell, overwrite=True, prune=True)

    assert report["refused"] is None and report["failed"] == []
    assert shell.user_ns["x"] == 1 and shell.user_ns["kept"] == [1, 2]
    assert report["removed"] == ["y"] and "y" not in shell.user_ns
    assert shell.user_ns["lock"] is lock  # skipped at save: left as it is
    assert shell.user_ns["_private"] == 5 and shell.user_ns[bound] == "the package's"


def test_a_restore_without_prune_deletes_nothing_and_reports_no_removed(tmp_path: Path) -> None:
    folder = state_directory(tmp_path)
    shell = Shell(x=1)
    snapshot(folder, shell)
    shell.user_ns.update(x=2, y="new")

    report = kernel_snapshot.restore(str(folder), shell=shell, overwrite=True)

    assert shell.user_ns == {"x": 1, "y": "new"} and "removed" not in report


def test_after_a_pruning_restore_the_next_snapshot_is_taken_again(tmp_path: Path) -> None:
    """The kernel no longer holds what the latest snapshot saw (it was the turn's end): the
    next save writes, even though no cell ran (a silent restore moves no execution count)."""
    folder = state_directory(tmp_path)
    shell = Shell(x=1)
    snapshot(folder, shell)
    shell.user_ns.update(x=2, y=3)
    shell.execution_count = 2
    snapshot(folder, shell)  # the turn's end

    kernel_snapshot.restore(str(folder), shell=shell, overwrite=True, previous=True, prune=True)
    again = kernel_snapshot.save(str(folder), shell=shell)

    assert "unchanged" not in again
    assert {e["name"] for e in again["saved"]} == {"x"}
