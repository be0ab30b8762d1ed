"""The server's file saves replace the file whole, so nobody reads a notebook half-written.

jupyter_server's `atomic_writing` (FileContentsManager and its subclasses, `use_atomic_writing`
on, the default) copies the file to a backup, then truncates it and writes the new content in
place. A reader in between (the async contents manager serves reads while a save writes in a
thread) gets an empty or cut notebook: `NotJSONError`, a 400 for the browser or for the chat
panel's attach. Worse, such a failed read finds the backup and moves the file being written
aside, so that save lands in `<name>.invalid`. The collaboration rooms save every notebook the
agent writes to, and the host creates child, fork and clone notebooks, all through the contents
manager, so with agents at work this is not rare (2 of 5 runs of the agent-tree browser test
under load).

`install` makes the server's file contents manager write through `core.whole_writes.replacing`
instead: a temporary file beside the target, renamed over it. Nothing else about saving changes
(hooks, checkpoints, signing, permission errors as 403, the direct write in a directory that is
not writable).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from typing import IO, Any

from jupyter_server.services.contents.fileio import FileManagerMixin

from ..core.whole_writes import replacing

log = logging.getLogger(__name__)


class ReplacingWrites:
    """Mixin for a jupyter_server `FileManagerMixin` contents manager: `atomic_writing`
    replaces the file by a rename instead of rewriting it in place."""

    use_atomic_writing: bool

    @contextlib.contextmanager
    def atomic_writing(self, os_path: str, *args: Any, **kwargs: Any) -> Iterator[IO[Any]]:
        directory = os.path.dirname(os.path.realpath(os_path))
        if not self.use_atomic_writing or not os.access(directory, os.W_OK):
            with super().atomic_writing(os_path, *args, **kwargs) as handle:  # type: ignore[misc]
                yield handle
            return
        with self.perm_to_403(os_path), replacing(os_path, *args, **kwargs) as handle:  # type: ignore[attr-defined]
            yield handle


def install(contents_manager: Any, file_ids: Any = None) -> None:
    """Give the server's file contents manager replacing writes. A contents manager that is not
    jupyter_server's file manager (S3, a database, ...) or that overrides `atomic_writing`
    itself is left as it is, and so is a server whose file ids (`file_ids`, the
    jupyter-server-fileid manager) follow inodes: a replaced file gets a new inode, and would lose
    its id."""
    cls = type(contents_manager)
    if isinstance(contents_manager, ReplacingWrites):
        return
    if not isinstance(contents_manager, FileManagerMixin):
        return
    if _tracks_inodes(file_ids):
        log.info(
            "Prime Agent Lab keeps jupyter_server's in-place saves: %s follows files by inode",
            type(file_ids).__qualname__,
        )
        return
    if cls.atomic_writing is not FileManagerMixin.atomic_writing:
        log.info(
            "Prime Agent Lab keeps %s's own atomic_writing: a notebook may be read while a save "
            "rewrites it",
            cls.__qualname__,
        )
        return
    # The contents manager exists before any extension loads (other extensions hold it), so
    # the instance gets the subclass; its name stays, so logs and config read the same.
    replacing_cls = type(cls.__name__, (ReplacingWrites, cls), {"__module__": cls.__module__})
    replacing_cls.__qualname__ = cls.__qualname__
    contents_manager.__class__ = replacing_cls


def _tracks_inodes(file_ids: Any) -> bool:
    try:
        from jupyter_server_fileid.manager import LocalFileIdManager
    except ImportError:
        return False
    return isinstance(file_ids, LocalFileIdManager)
