"""Snapshots through the bridge, for a kernel that does not share the host's disk (a gateway
kernel, docs/gateway.md section 2.3).

`push` writes the snapshot with `snapshot.save` (same code, same caps) into a staging folder
of the kernel's own, sends its manifest (`snapshot.begin`: the host checks the caps before any
byte moves), then each file in chunks of at most 1 MiB (`snapshot.put`), then `snapshot.commit`:
the host checks each file's size and sha256, places them and signs the manifest as it does for
a local kernel. The staging folder is emptied afterwards: the kernel keeps nothing.

`pull` is the restore: the host offers one manifest it verified (its signature, its digest) and
the files that manifest names, nothing else. The kernel fetches them in chunks (`snapshot.get`)
into a temporary folder, refuses a manifest whose digest is not the one the host passed, and
restores with `snapshot.restore`, which checks each file's sha256 before unpickling it.

The kernel never signs or checks a signature: the secret stays with the host.
"""

from __future__ import annotations

import base64 as _base64
import contextlib as _contextlib
import hashlib as _hashlib
import json as _json
import os as _os
import shutil as _shutil
import tempfile as _tempfile
from typing import Any

from . import snapshot as _snapshot
from .files import MAX_MANIFEST_BYTES, MiB
from .operations import (
    BEGIN_SNAPSHOT,
    COMMIT_SNAPSHOT,
    GET_SNAPSHOT_CHUNK,
    OFFER_SNAPSHOT,
    PUT_SNAPSHOT_CHUNK,
)

CHUNK_BYTES = MiB
MANIFEST_FILE = "manifest"  # `snapshot.get`'s name for the manifest the host chose

# (execution_count, manifest time) of the last snapshot this kernel pushed or pulled: when the
# host's latest manifest still has that time and no cell ran since, nothing is sent again
_last: tuple[int, Any] | None = None
_last_report: dict[str, Any] | None = None


def _sync_call(op: str, payload: dict[str, Any]) -> Any:
    from . import _sync_call as call

    return call(op, payload)


def _shell(shell: Any) -> Any:
    if shell is not None:
        return shell
    from IPython import get_ipython

    return get_ipython()


def _count(shell: Any) -> int:
    return int(getattr(shell, "execution_count", 0))


def push(
    variable_cap: int, total_cap: int, committed: str | None = None, shell: Any = None
) -> dict[str, Any]:
    """Snapshot the user namespace and send it to the host; `{"pushed": False}` when no cell ran
    since this kernel's last snapshot and the host's latest (`committed`, its time) is it."""
    global _last
    shell = _shell(shell)
    count = _count(shell)
    if committed is not None and _last == (count, committed):
        return {"pushed": False}
    staging = _tempfile.mkdtemp(prefix="prime-agent-snapshot-")
    try:
        manifest = _snapshot.save(staging, variable_cap, total_cap, shell, force=True)
        upload = _sync_call(BEGIN_SNAPSHOT, {"manifest": manifest})["upload"]
        for entry in manifest["saved"]:
            _send_file(upload, staging, str(entry["file"]))
        _sync_call(COMMIT_SNAPSHOT, {"upload": upload})
    finally:
        _shutil.rmtree(staging, ignore_errors=True)
        _snapshot._last_saved.pop(staging, None)  # a folder of one use: nothing to remember
    _last = (count, manifest["time"])
    return {"pushed": True, "time": manifest["time"]}


def _send_file(upload: str, staging: str, name: str) -> None:
    offset = 0
    with open(_os.path.join(staging, name), "rb") as file:
        while True:
            chunk = file.read(CHUNK_BYTES)
            if not chunk and offset:
                return
            data = _base64.b64encode(chunk).decode("ascii")
            _sync_call(
                PUT_SNAPSHOT_CHUNK, {"upload": upload, "file": name, "offset": offset, "data": data}
            )
            offset += len(chunk)
            if not chunk:
                return


def _fetch(name: str, limit: int) -> bytes:
    """The whole of `name` as the host offers it, never more than `limit` bytes."""
    parts: list[bytes] = []
    offset = 0
    while True:
        answer = _sync_call(
            GET_SNAPSHOT_CHUNK, {"file": name, "offset": offset, "size": CHUNK_BYTES}
        )
        chunk = _base64.b64decode(answer["data"], validate=True)
        offset += len(chunk)
        if offset > limit:
            raise ValueError(f"{name} is larger than its {limit:,} bytes")
        parts.append(chunk)
        if len(chunk) < CHUNK_BYTES:
            return b"".join(parts)


def pull(
    expect: str,
    previous: bool = False,
    only_if_fresh: bool = True,
    overwrite: bool = False,
    prune: bool = False,
    shell: Any = None,
) -> dict[str, Any]:
    """Restore the snapshot the host offers (`expect`: the sha256 of its manifest's bytes, which
    the host verified); the report, as `snapshot.restore` gives it."""
    global _last, _last_report
    shell = _shell(shell)
    folder = _tempfile.mkdtemp(prefix="prime-agent-restore-")
    try:
        raw = _fetch(MANIFEST_FILE, MAX_MANIFEST_BYTES)
        if _hashlib.sha256(raw).hexdigest() != expect:
            raise ValueError("the snapshot changed after the host checked it")
        manifest = _json.loads(raw)
        name = _snapshot.PREVIOUS_MANIFEST if previous else _snapshot.MANIFEST
        with open(_os.path.join(folder, name), "wb") as file:
            file.write(raw)
        if not (only_if_fresh and _snapshot.user_names(shell)):
            for entry in manifest.get("saved", []):
                _pull_file(folder, entry)
        report = _snapshot.restore(folder, shell, only_if_fresh, overwrite, previous, expect, prune)
    finally:
        _shutil.rmtree(folder, ignore_errors=True)
        _snapshot._last_saved.pop(folder, None)
    if report.get("refused") is None and not previous and not report["failed"]:
        _last = (_count(shell), manifest.get("time"))
    if prune:
        _last = None
    _last_report = report
    return report


def _pull_file(folder: str, entry: Any) -> None:
    """One variable file, if the manifest names a plain file name of a bounded size; a file
    that cannot be fetched is left missing and reported by the restore under its name."""
    if not isinstance(entry, dict):
        return
    name, size = entry.get("file"), entry.get("bytes")
    if not isinstance(name, str) or not _snapshot._FILE_NAME.fullmatch(name):
        return
    limit = size if isinstance(size, int) and size >= 0 else _snapshot.DEFAULT_VARIABLE_CAP
    with _contextlib.suppress(Exception):
        data = _fetch(name, limit)
        with open(_os.path.join(folder, name), "wb") as file:
            file.write(data)


def restore_from_host(
    overwrite: bool = False, previous: bool = False, shell: Any = None
) -> dict[str, Any]:
    """`prime_agent_kernel.restore_snapshot()` without a folder: the host offers this kernel's
    agent session's own snapshot, once it checked that it signed it (`snapshot.offer`), and it
    comes back as the host's automatic restore brings it: from the host's folder with the
    manifest's digest checked (a kernel that shares its disk), else over the bridge (`pull`)."""
    offer = _sync_call(OFFER_SNAPSHOT, {"previous": previous})
    if offer.get("refused") is not None:
        report = {"restored": [], "imports": [], "failed": [], "kept": []}
        return {**report, "snapshot_time": None, **offer}
    digest, chosen = str(offer["digest"]), bool(offer["previous"])
    if offer.get("directory"):
        return _snapshot.restore(
            str(offer["directory"]), _shell(shell), False, overwrite, chosen, digest
        )
    return pull(digest, chosen, only_if_fresh=False, overwrite=overwrite, shell=shell)


def last_report_json() -> str:
    """The last `pull`'s report as JSON (the host reads it as a user expression)."""
    return _json.dumps(_last_report)
