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
import glob
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

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
    # never through a symbolic link: a log or mailbox in a folder from someone else could
    # point the append at any file of the user's (O_NOFOLLOW fails with ELOOP)
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags, 0o666)
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


def temporary_glob(name: str) -> str:
    """A glob matching the temporary files `replacing` writes beside a file called `name`."""
    return f".{glob.escape(name)}.*.tmp"


@contextlib.contextmanager
def replacing(
    path: str | os.PathLike[str],
    text: bool = True,
    encoding: str = "utf-8",
    follow_symlinks: bool = True,
    **kwargs: Any,
) -> Iterator[IO[Any]]:
    """A file object whose content replaces `path` when the block ends without an error: it is
    written to a temporary file beside the target, fsynced and renamed over it, so a reader
    sees the old content or the new one and a failure (a full disk) leaves the old one and no
    temporary file. `text`, `encoding` and `kwargs` are as for `open` (text files get Unix line
    ends unless `newline` says otherwise). A symlink is followed (its target gets the content:
    a user's notebook) unless `follow_symlinks` is false (the product's own files, where a link
    a colleague's folder brings would point a write anywhere: the link itself is replaced). The
    file keeps its permission bits; a new file gets the usual ones (0o666 minus the umask).
    """
    target = Path(os.path.realpath(path) if follow_symlinks else os.path.abspath(path))
    temporary = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(6)}.tmp")
    try:
        info = os.stat(target, follow_symlinks=follow_symlinks)
        mode = None if stat.S_ISLNK(info.st_mode) else stat.S_IMODE(info.st_mode)
    except OSError:  # none yet (or a link loop, which is replaced)
        mode = None
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        if text:
            kwargs.setdefault("newline", "\n")
            handle: IO[Any] = open(descriptor, "w", encoding=encoding, **kwargs)  # noqa: SIM115
        else:
            handle = open(descriptor, "wb", **kwargs)  # noqa: SIM115
    except BaseException:
        os.close(descriptor)
        temporary.unlink(missing_ok=True)
        raise
    try:
        with handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def replace_whole(path: Path | str, data: bytes, follow_symlinks: bool = False) -> None:
    """Write `data` as the new content of `path` (`replacing`); a symlink at `path` is replaced,
    not followed, unless `follow_symlinks`."""
    with replacing(path, text=False, follow_symlinks=follow_symlinks) as handle:
        handle.write(data)
