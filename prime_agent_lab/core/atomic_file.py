"""Files replaced whole: a reader sees the old content or the new one, never a part of it.

The new content goes to a temporary file beside the target, is flushed to disk, and is renamed
over the target (atomic on POSIX and, with `os.replace`, on Windows). A failure leaves the target
as it was and no temporary file behind.
"""

from __future__ import annotations

import contextlib
import os
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

TEMPORARY_SUFFIX = ".tmp"


@contextlib.contextmanager
def replacing(
    path: str | os.PathLike[str], text: bool = True, encoding: str = "utf-8", **kwargs: Any
) -> Iterator[IO[Any]]:
    """A file object whose content replaces `path` when the block ends without an error.

    `text`, `encoding` and `kwargs` are as for `open` (text files get Unix line ends unless
    `newline` says otherwise). A symlink is followed: its target gets the content. The file keeps
    its permission bits; a new file gets the usual ones (0o666 minus the umask).
    """
    target = Path(os.path.realpath(path))
    temporary = target.with_name(f".{target.name}.{uuid.uuid4().hex[:12]}{TEMPORARY_SUFFIX}")
    try:
        mode = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        mode = None
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        if text:
            kwargs.setdefault("newline", "\n")
            handle: IO[Any] = os.fdopen(descriptor, "w", encoding=encoding, **kwargs)
        else:
            handle = os.fdopen(descriptor, "wb", **kwargs)
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


def write_text_atomically(path: str | os.PathLike[str], content: str) -> None:
    """Replace `path` with `content` (UTF-8) in one step for every reader."""
    with replacing(path) as handle:
        handle.write(content)
