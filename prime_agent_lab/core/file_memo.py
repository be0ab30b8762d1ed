"""Values worked out from a file, kept until the file changes.

A file counts as changed when its inode, size, modification or status-change time differ, which
an append, a rewrite or a rename over it all do. The cache holds one value per path and kind.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Generic, TypeVar

T = TypeVar("T")

Stamp = tuple[int, int, int, int]


def stamp_of(file: Path) -> Stamp | None:
    """What tells one version of the file from the next; None when it cannot be looked at."""
    try:
        stat = os.stat(file)
    except OSError:
        return None
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


class FileMemo(Generic[T]):
    """`compute(file)` once per version of each file; thread-safe (lists are built off the
    event loop while a request may build another)."""

    def __init__(self, compute: Callable[[Path], T]) -> None:
        self._compute = compute
        self._cache: dict[Path, tuple[Stamp, T]] = {}
        self._lock = threading.Lock()

    def get(self, file: Path) -> T:
        stamp = stamp_of(file)
        if stamp is None:  # nothing to key on: worked out every time (it says why it failed)
            return self._compute(file)
        with self._lock:
            cached = self._cache.get(file)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        value = self._compute(file)
        with self._lock:
            self._cache[file] = (stamp, value)
        return value

    def forget(self, file: Path) -> None:
        with self._lock:
            self._cache.pop(file, None)

    def keep_only(self, files: Iterable[Path]) -> None:
        """Drop what is cached for any file not in `files` (deleted sessions)."""
        keep = set(files)
        with self._lock:
            for gone in set(self._cache) - keep:
                del self._cache[gone]
