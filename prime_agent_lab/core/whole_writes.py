"""Writes that land whole or not at all, for the files a full disk must not tear.

A write can fail half way (`ENOSPC` after part of the bytes, `EDQUOT`, `EIO`). Appended records
then leave a partial line that the next record would be glued onto, so a record that did get
written whole could no longer be read, and entries pointing at it would dangle. `append_whole`
cuts a failed append back to where it began; `replace_whole` writes a new version beside the file
and renames it over, so a failure leaves the previous version as it was and no temporary file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
from pathlib import Path

DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def is_disk_full(exc: BaseException) -> bool:
    """True for an OSError that means there is no room: the disk, a quota, a file size limit."""
    return isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS


def append_whole(path: Path | str, data: bytes, *, sync: bool = False) -> None:
    """Append `data` (one or more whole lines) to `path`, creating it if needed.

    Either every byte is in the file when this returns, or the OSError is raised and the file
    is as it was. A file that does not end with a newline (a torn last line left by a crash)
    first gets one, so the new record starts on a line of its own. Concurrent writers of one
    file must hold a lock of their own; a failed append is only cut back when nothing was
    appended after it.
    """
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
    try:
        end = os.fstat(fd).st_size
        if end > 0 and os.pread(fd, 1, end - 1) != b"\n":
            data = b"\n" + data
        written = 0
        try:
            while written < len(data):
                count = os.write(fd, data[written:])
                if count <= 0:  # a regular file never does this; never loop on it
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
                written += count
            if sync:
                os.fsync(fd)
        except OSError:
            _cut_back(fd, written)
            raise
    finally:
        os.close(fd)


def _cut_back(fd: int, written: int) -> None:
    """Remove the `written` bytes of a failed append (freeing space never needs space)."""
    if written == 0:
        return
    with contextlib.suppress(OSError):  # if this fails too, readers skip the torn line
        ours_end = os.lseek(fd, 0, os.SEEK_CUR)  # O_APPEND: the end of what we wrote
        if os.fstat(fd).st_size == ours_end:
            os.ftruncate(fd, ours_end - written)


def replace_whole(path: Path | str, data: bytes, *, sync: bool = False) -> None:
    """Write `data` as the new content of `path`: to a temporary file beside it, then renamed
    over it. On any failure the temporary file is removed and `path` keeps its old content."""
    target = Path(path)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        with open(temporary, "wb") as handle:
            handle.write(data)
            handle.flush()
            if sync:
                os.fsync(handle.fileno())
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
