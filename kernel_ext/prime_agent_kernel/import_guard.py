"""What an automatic snapshot restore may import: installed packages, and the project's own
modules only as they were when the snapshot was taken.

Restoring imports modules by name (`import addmod` for a saved import, the classes a pickle
names). A kernel's working folder comes first on `sys.path`, so a file someone added to the
project since (a `git pull`, a colleague's copy) would run as the notebook opens, before anyone
ran a cell. So a snapshot records the file and SHA-256 of every module loaded from outside the
Python installation, and while the host's automatic restore runs, such a module is imported
only if the file it resolves to now holds those same bytes (a clone's copy of a skill module
does; a module someone added or changed does not). A restore typed by hand in a cell
has no guard: it is the user's own command.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import os
import site
import sys
import sysconfig
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from . import files

MAX_MODULES = 2000
MAX_MODULE_BYTES = 16 * files.MiB


def _installed_roots() -> tuple[str, ...]:
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        roots.add(sysconfig.get_path(key))
    try:
        roots.update(site.getsitepackages())
        roots.add(site.getusersitepackages())
    except AttributeError:  # a virtualenv's old site module
        pass
    return tuple(os.path.join(os.path.realpath(r), "") for r in roots if r)


def is_local(origin: object) -> bool:
    """A module file outside the Python installation (the project's, a skill's)."""
    if not isinstance(origin, str) or not os.path.isabs(origin):
        return False
    return not os.path.realpath(origin).startswith(_installed_roots())


def _digest(path: str) -> str | None:
    try:
        return hashlib.sha256(files.read_bytes(path, MAX_MODULE_BYTES)).hexdigest()
    except files.UnreadableFile:
        return None


def local_modules() -> dict[str, dict[str, str]]:
    """name -> {file, sha256} of every loaded module from outside the installation."""
    found: dict[str, dict[str, str]] = {}
    roots = _installed_roots()
    for name, module in list(sys.modules.items()):
        origin = getattr(module, "__file__", None)
        if not isinstance(origin, str) or not os.path.isabs(origin):
            continue
        real = os.path.realpath(origin)
        if real.startswith(roots):
            continue
        digest = _digest(real)
        if digest is not None:
            found[name] = {"file": real, "sha256": digest}
        if len(found) >= MAX_MODULES:
            break
    return found


class ImportGuard(importlib.abc.MetaPathFinder):
    """First on `sys.meta_path` during an automatic restore: finds a module the way the others
    would, and refuses a local one the snapshot does not know as it is now."""

    def __init__(self, known: dict[str, Any]) -> None:
        self.known = known

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        spec = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        if spec is None or not spec.has_location or not is_local(spec.origin):
            return spec
        real = os.path.realpath(spec.origin)
        recorded = self.known.get(fullname)
        # the same bytes are the same code, wherever they are now (a clone's copy of a skill)
        if not isinstance(recorded, dict) or recorded.get("sha256") != _digest(real):
            raise ImportError(
                f"not the file the snapshot was taken with (new or changed: {real}); import it "
                "yourself if you trust it"
            )
        return spec


@contextmanager
def guarded(known: dict[str, Any]) -> Iterator[None]:
    guard = ImportGuard(known)
    sys.meta_path.insert(0, guard)
    try:
        yield
    finally:
        if guard in sys.meta_path:
            sys.meta_path.remove(guard)
