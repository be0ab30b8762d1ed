"""Reading and writing the product's own files so that no content and no full disk can hurt.

A reader gets a regular file's bytes up to a cap (a FIFO, a directory or a 1 GB file is refused,
never blocked on or read whole); a writer replaces a file whole or not at all and never leaves
its temp file behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
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


def write_file_atomically(path: Path, data: bytes) -> None:
    """Write `data` to a fsynced temp file beside `path`, then rename it over `path`: readers see
    the old file or the new one, and a failure (a full disk) leaves the old one and no temp."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(6)}.tmp")
    try:
        with open(temp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
