"""Reading the product's own files so that no content can hurt: a reader gets a regular file's
bytes up to a cap (a FIFO, a directory or a 1 GB file is refused, never blocked on or read whole)
and a JSON object or None. Writes that land whole are in `whole_writes.py`.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any


class UnreadableFile(OSError):
    """A file that cannot be read as what it should be; the message names it and says why."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def read_bounded(path: Path, limit: int) -> bytes:
    """The bytes of the regular file `path`, at most `limit` of them."""
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise UnreadableFile(path, exc.strerror or str(exc)) from None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise UnreadableFile(path, "not a regular file")
        if info.st_size > limit:
            raise UnreadableFile(
                path, f"{info.st_size:,} bytes, over the {limit:,} this file may have"
            )
        with os.fdopen(descriptor, "rb", closefd=False) as handle:
            data = handle.read(limit + 1)
    except UnreadableFile:
        raise
    except OSError as exc:
        raise UnreadableFile(path, exc.strerror or str(exc)) from None
    finally:
        os.close(descriptor)
    if len(data) > limit:
        raise UnreadableFile(path, f"over the {limit:,} bytes this file may have")
    return data


def parse_json_object(raw: bytes) -> dict[str, Any] | None:
    """`raw` as a JSON object, or None for anything else (any content: deep nesting, bad UTF-8,
    a number too long to convert)."""
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None
