"""Kernel snapshots: the user namespace saved per variable, and restored into a fresh kernel.

The host runs `save` / `restore` as silent executions (nothing enters the notebook or the
kernel's history) and reads what they wrote: `manifest.new.json` after a save, which the host
checks, signs and renames over `manifest.json` (core/snapshots.py), and `restore-report.json`
after a restore. Each variable is its own file, pickled with the standard pickle first (fast) and
with dill (recurse) when that fails or when the pickle refers to `__main__` (a function or an
instance of a class defined in a cell, which only dill carries by value); the manifest names
each file with its SHA-256. Modules are recorded as imports. Everything is written as a temp file
then `os.replace`, so a crash or a full disk mid-save leaves the previous snapshot whole.

A restore loads nothing whose bytes differ from what the manifest names: the host passes the
digest of the manifest it verified (`expect`), and each file's digest is checked before it is
unpickled (pickles run code when loaded).

This module keeps its own references to builtins and never looks names up in the user's
namespace, so a user who shadows `list` or `open` does not break it.
"""

from __future__ import annotations

import builtins as _builtins
import contextlib as _contextlib
import datetime as _datetime
import hashlib as _hashlib
import io as _io
import json as _json
import os as _os
import pickle as _pickle
import re as _re
import secrets as _secrets
import socket as _socket
import stat as _stat
import sys as _sys
import threading as _threading
import types as _types
from importlib import import_module as _import_module
from typing import Any

from . import files as _files
from . import import_guard as _import_guard

FORMAT_VERSION = 2  # 2: each saved file carries its sha256, the host signs the manifest
MANIFEST = "manifest.json"
PREVIOUS_MANIFEST = "manifest.previous.json"
NEW_MANIFEST = "manifest.new.json"  # written by `save`, committed by the host
RESTORE_REPORT = "restore-report.json"
_FILE_NAME = _re.compile(r"[0-9]{5}-[0-9a-f]{8}\.pkl")
_MODULE_NAME = _re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
DEFAULT_VARIABLE_CAP = 16 * 2**20
DEFAULT_TOTAL_CAP = 256 * 2**20
IPYTHON_NAMES = frozenset({"In", "Out", "get_ipython", "exit", "quit"})
MAX_REASON = 200

# A kind of value that must not come back even if some pickler manages it: an open file
# would reopen (or fail to) somewhere else, a lock or thread has no meaning in a new process.
_NOT_SAVED: tuple[tuple[type | tuple[type, ...], str], ...] = (
    (_io.IOBase, "an open file (reopen it after a restore)"),
    (_socket.socket, "an open socket"),
    (
        (_types.GeneratorType, _types.AsyncGeneratorType, _types.CoroutineType),
        "a generator or coroutine (its running state cannot be saved)",
    ),
    (_types.FrameType, "a stack frame"),
    (_threading.Thread, "a thread"),
    (type(_threading.Lock()), "a lock"),
)

_str, _len, _isinstance, _type, _sorted, _dict = (
    _builtins.str,
    _builtins.len,
    _builtins.isinstance,
    _builtins.type,
    _builtins.sorted,
    _builtins.dict,
)
# directory -> (execution_count, manifest time) of this kernel's last snapshot there: unchanged
# only while the host committed that very manifest (a failed commit saves again next time)
_last_saved: dict[str, tuple[int, Any]] = {}


def _shell(shell: Any) -> Any:
    if shell is not None:
        return shell
    from IPython import get_ipython

    return get_ipython()


def bound_names() -> frozenset[str]:
    """The names the kernel package binds (never saved)."""
    from . import BOUND_NAMES

    return frozenset(BOUND_NAMES)


def user_variables(shell: Any) -> list[tuple[str, Any]]:
    """The user's own variables (name, value), in namespace order, read at one moment: a name
    the user's code removes while a snapshot runs (a thread, a `__reduce__`) is still saved
    with the value it had, instead of failing the snapshot."""
    hidden = getattr(shell, "user_ns_hidden", {})
    ours = bound_names()
    variables = []
    for name, value in list(shell.user_ns.items()):
        if name.startswith("_") or name in IPYTHON_NAMES or name in ours:
            continue
        if name in hidden and hidden[name] is value:
            continue
        variables.append((name, value))
    return variables


def user_names(shell: Any) -> list[str]:
    """The names of the user's own variables, in namespace order."""
    return [name for name, _ in user_variables(shell)]


def _now() -> str:
    return _datetime.datetime.now(_datetime.UTC).isoformat(timespec="milliseconds")


def _type_name(value: Any) -> str:
    kind = _type(value)
    module = getattr(kind, "__module__", "")
    name = getattr(kind, "__qualname__", getattr(kind, "__name__", "?"))
    return name if module in ("builtins", "__main__", "") else f"{module}.{name}"


def _reason(exc: BaseException) -> str:
    text = f"{_type(exc).__name__}: {exc}"
    return text if _len(text) <= MAX_REASON else text[: MAX_REASON - 3] + "..."


def _not_saved(value: Any) -> str | None:
    for kinds, reason in _NOT_SAVED:
        if _isinstance(value, kinds):
            return reason
    return None


def dumps(value: Any) -> tuple[bytes, str]:
    """(data, method): the standard pickle when it carries the value by itself, else dill."""
    try:
        data = _pickle.dumps(value, protocol=_pickle.HIGHEST_PROTOCOL)
        if b"__main__" not in data:  # else it names a cell's class or function by reference
            return data, "pickle"
    except Exception:
        pass
    import dill

    return dill.dumps(value, protocol=_pickle.HIGHEST_PROTOCOL, recurse=True), "dill"


def loads(data: bytes, method: str) -> Any:
    if method == "pickle":
        return _pickle.loads(data)
    import dill

    return dill.loads(data)


def _write_atomically(path: str, data: bytes, sync: bool = False) -> None:
    """Temp file then `os.replace`; the temp file never stays behind (a full disk). Only the
    manifest is fsynced: a variable file lost to a power cut fails alone at restore (it is
    reported), and syncing each would dominate a snapshot of many small variables."""
    temp = f"{path}.{_secrets.token_hex(4)}.tmp"
    try:
        with _builtins.open(temp, "wb") as file:
            file.write(data)
            if sync:
                file.flush()
                _os.fsync(file.fileno())
        _os.replace(temp, path)
    except BaseException:
        with _contextlib.suppress(OSError):
            _os.remove(temp)
        raise


def _read_json(path: str) -> dict[str, Any] | None:
    """A manifest that can be used, or None (missing or damaged: `_read_manifest` says why)."""
    return _read_manifest(path)[0]


def _read_manifest(path: str) -> tuple[dict[str, Any] | None, str | None]:
    """(manifest, None); (None, None) when there is none; (None, why) when it is damaged."""
    manifest, damage, _ = _read_manifest_bytes(path)
    return manifest, damage


def _read_manifest_bytes(path: str) -> tuple[dict[str, Any] | None, str | None, bytes]:
    """`_read_manifest`, and the exact bytes it was read from (their digest is what the host
    checked)."""
    try:
        raw = _files.read_bytes(path, _files.MAX_MANIFEST_BYTES)
        manifest = _files.parse_json_object(path, raw)
    except _files.UnreadableFile as exc:
        return None, None if exc.missing else _str(exc), b""
    for key in ("saved", "imports", "skipped"):
        value = manifest.get(key, [])
        if not _isinstance(value, list) or not all(_isinstance(e, _dict) for e in value):
            return None, f"{path} is damaged: its {key!r} is not a list of objects", raw
    for entry in manifest.get("saved", []):
        name = entry.get("file")
        if not _isinstance(name, _str) or _os.path.basename(name) != name or name in ("", ".."):
            return None, f"{path} is damaged: a saved variable's file is not a file name", raw
    return manifest, None, raw


def save(
    directory: str,
    variable_cap: int = DEFAULT_VARIABLE_CAP,
    total_cap: int = DEFAULT_TOTAL_CAP,
    shell: Any = None,
    force: bool = False,
) -> dict[str, Any]:
    """Snapshot the user namespace into `directory`: the variable files and `manifest.new.json`,
    which the host commits. Nothing is written when no cell ran since this kernel's last
    snapshot there and the host committed it (unless `force`)."""
    shell = _shell(shell)
    count = int(getattr(shell, "execution_count", 0))
    last = _last_saved.get(directory)
    if not force and last is not None and last[0] == count:
        existing = _read_json(_os.path.join(directory, MANIFEST))
        if existing is not None and existing.get("time") == last[1]:
            return {**existing, "unchanged": True}
    if _os.path.islink(directory):
        raise OSError(f"{directory} is a symbolic link: no snapshot is written through it")
    _os.makedirs(directory, exist_ok=True)
    stamp = _secrets.token_hex(4)
    saved: list[dict[str, Any]] = []
    imports: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    total = 0
    for index, (name, value) in enumerate(user_variables(shell)):
        if _isinstance(value, _types.ModuleType):
            imports.append({"name": name, "module": value.__name__})
            continue
        entry = {"name": name, "type": _type_name(value)}
        reason = _not_saved(value)
        nbytes = getattr(value, "nbytes", None)
        if reason is None and _isinstance(nbytes, int) and nbytes > variable_cap:
            reason = f"{nbytes:,} bytes, over the per-variable cap of {variable_cap:,}"
        if reason is None:
            try:
                data, method = dumps(value)
            except Exception as exc:
                reason = f"cannot be pickled ({_reason(exc)})"
            else:
                if _len(data) > variable_cap:
                    reason = f"{_len(data):,} bytes, over the per-variable cap of {variable_cap:,}"
                elif total + _len(data) > total_cap:
                    reason = f"the snapshot would pass its total cap of {total_cap:,} bytes"
        if reason is not None:
            skipped.append({**entry, "reason": reason})
            continue
        file_name = f"{index:05d}-{stamp}.pkl"
        _write_atomically(_os.path.join(directory, file_name), data)
        total += _len(data)
        saved.append(
            {
                **entry,
                "bytes": _len(data),
                "method": method,
                "file": file_name,
                "sha256": _hashlib.sha256(data).hexdigest(),
            }
        )
    manifest = {
        "version": FORMAT_VERSION,
        "time": _now(),
        "python": _sys.version.split()[0],
        "execution_count": count,
        "saved": saved,
        "imports": imports,
        "skipped": skipped,
        "local_modules": _import_guard.local_modules(),
        "total_bytes": total,
        "variable_cap": variable_cap,
        "total_cap": total_cap,
    }
    _write_atomically(
        _os.path.join(directory, NEW_MANIFEST), _json.dumps(manifest).encode(), sync=True
    )
    _last_saved[directory] = (count, manifest["time"])
    return manifest


def _digest(data: bytes) -> str:
    return _hashlib.sha256(data).hexdigest()


def restore(
    directory: str,
    shell: Any = None,
    only_if_fresh: bool = False,
    overwrite: bool = False,
    previous: bool = False,
    expect: str | None = None,
    prune: bool = False,
) -> dict[str, Any]:
    """Bring a snapshot back, each name on its own; a report of what came back and what did not
    (also written to `restore-report.json`). A name the kernel already holds is left alone
    unless `overwrite`. `only_if_fresh`: restore nothing into a kernel that holds the user's
    variables (the host's automatic restore). `previous`: the snapshot before the latest.
    `expect`: the SHA-256 of the manifest the host verified; another manifest is refused. Each
    file is loaded only if its bytes match the digest the manifest names. `prune` (reverting a
    turn, docs/pairing.md section 5): also delete the user's names the snapshot neither saved,
    imported nor listed as skipped, i.e. what was created after it (`removed` in the report);
    the kernel package's own names are never touched."""
    shell = _shell(shell)
    report: dict[str, Any] = {
        "time": _now(),
        "restored": [],
        "imports": [],
        "failed": [],
        "kept": [],
        "refused": None,
        "snapshot_time": None,
    }
    path = _os.path.join(directory, PREVIOUS_MANIFEST if previous else MANIFEST)
    manifest, damage, raw = _read_manifest_bytes(path)
    present = set(user_names(shell))
    if manifest is None or manifest.get("version") not in (1, FORMAT_VERSION):
        report["refused"] = (
            "no snapshot"
            if manifest is None
            else f"snapshot format {manifest.get('version')!r} is not {FORMAT_VERSION}"
        )
        if damage is not None:
            report["unreadable"] = damage  # the manifest, named, and why
    elif expect is not None and _digest(raw) != expect:
        report["refused"] = "the snapshot changed after the host checked it"
    elif only_if_fresh and present:
        report["refused"] = "the kernel already holds variables: " + ", ".join(
            _sorted(present)[:10]
        )
    elif _os.path.islink(directory):
        report["refused"] = f"{directory} is a symbolic link"
    else:
        report["snapshot_time"] = manifest.get("time")
        report["skipped_at_save"] = manifest.get("skipped", [])
        known = manifest.get("local_modules")
        guard = (
            _import_guard.guarded(known if _isinstance(known, _dict) else {})
            if expect is not None  # the host's automatic restore
            else _contextlib.nullcontext()
        )
        with guard:
            _restore_imports(shell, manifest, present, overwrite, report)
            _restore_values(
                shell, directory, manifest, present, overwrite, report, expect is not None
            )
        if not report["failed"] and not previous:
            _last_saved[directory] = (
                int(getattr(shell, "execution_count", 0)),
                manifest.get("time"),
            )
        if prune:
            report["removed"] = _prune(shell, manifest, present)
            # the kernel no longer holds what the latest snapshot saw: the next one is taken
            _last_saved.pop(directory, None)
    _write_atomically(_os.path.join(directory, RESTORE_REPORT), _json.dumps(report).encode())
    return report


def _prune(shell: Any, manifest: dict[str, Any], present: set[str]) -> list[str]:
    """Delete the names the kernel held that the snapshot does not know (created after it)."""
    known = {
        _str(e.get("name"))
        for key in ("saved", "imports", "skipped")
        for e in manifest.get(key, [])
        if _isinstance(e, _dict)
    }
    removed = _sorted(present - known)
    for name in removed:
        shell.user_ns.pop(name, None)
    return removed


def _restore_imports(
    shell: Any, manifest: dict[str, Any], present: set[str], overwrite: bool, report: dict[str, Any]
) -> None:
    for entry in manifest.get("imports", []):
        if not _isinstance(entry, _dict):
            continue
        name, module = _str(entry.get("name")), _str(entry.get("module"))
        if not _MODULE_NAME.fullmatch(module):
            report["failed"].append({"name": name, "reason": f"not a module name: {module!r}"})
            continue
        if name in present and not overwrite:
            report["kept"].append(name)
            continue
        try:
            shell.user_ns[name] = _import_module(module)
        except Exception as exc:
            report["failed"].append({"name": name, "reason": f"import {module}: {_reason(exc)}"})
        else:
            report["imports"].append({"name": name, "module": module})


def _restore_values(
    shell: Any,
    directory: str,
    manifest: dict[str, Any],
    present: set[str],
    overwrite: bool,
    report: dict[str, Any],
    signed: bool,
) -> None:
    entries = [e for e in manifest.get("saved", []) if _isinstance(e, _dict)]
    # Classes first: dill finds a cell's class in __main__ when it loads an instance of it, so
    # the instance and the restored class stay one type.
    entries.sort(key=lambda e: 0 if _str(e.get("type")) == "type" else 1)
    for entry in entries:
        name = _str(entry.get("name"))
        if name in present and not overwrite:
            report["kept"].append(name)
            continue
        try:
            value = loads(_checked_file(directory, entry, signed), _str(entry.get("method")))
        except Exception as exc:
            report["failed"].append({"name": name, "reason": _reason(exc)})
            continue
        shell.user_ns[name] = value
        report["restored"].append({"name": name, "type": entry.get("type")})


def _checked_file(directory: str, entry: dict[str, Any], signed: bool) -> bytes:
    """A variable file's bytes, only if they are what the manifest names (`signed`: the
    manifest was verified by the host, so every file must carry a digest)."""
    file_name = _str(entry.get("file"))
    if not _FILE_NAME.fullmatch(file_name):
        raise ValueError(f"not a snapshot file name: {file_name[:80]!r}")
    path = _os.path.join(directory, file_name)
    recorded = entry.get("bytes")
    known = _isinstance(recorded, int) and recorded >= 0
    changed = f"{file_name} changed since the snapshot was taken (its digest differs)"
    with _contextlib.suppress(OSError):  # a missing file, a loop: the read below says so
        info = _os.stat(path)
        if known and _stat.S_ISREG(info.st_mode) and info.st_size != recorded:
            raise ValueError(changed)
    # never blocks on a pipe, never reads past what was saved
    data = _files.read_bytes(path, recorded if known else DEFAULT_VARIABLE_CAP)
    expected = entry.get("sha256")
    if expected is None and not signed:
        return data
    if not _isinstance(expected, _str) or _digest(data) != expected:
        raise ValueError(changed)
    return data
