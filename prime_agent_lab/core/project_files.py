"""A project's own files that steer the agent: context files (`AGENTS.md`, `CLAUDE.md`,
`.github/copilot-instructions.md`) and MCP server lists (`.mcp.json`), found from a notebook's
folder up to the project's root (docs/project-context.md).

Reading is careful, because the folder may come from someone else: a file whose real place is
outside the root (a symbolic link to `/etc/passwd`) is listed and never opened, only regular
files are read, at most `MAX_FILE_BYTES`, and a file that is not UTF-8 is refused. Whether a
file is used is the caller's business (trust: core/project_trust.py; caps: core/project_context.py).
"""

from __future__ import annotations

import os
import posixpath
import stat
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Literal

from .trust import sha256

CONTEXT_NAMES = ("AGENTS.md", "CLAUDE.md", ".github/copilot-instructions.md")
"""Per folder, the first of these that exists is its context file."""

MCP_NAME = ".mcp.json"

MAX_FILE_BYTES = 1_000_000
"""A project file larger than this is not read (listed as unreadable)."""

FileKind = Literal["context", "mcp"]

LINKS_OUT = "links outside the project"


@dataclass(frozen=True)
class FoundFile:
    """A project file as found: its bytes, or why they cannot be read."""

    path: str  # relative to the root, with `/`
    kind: FileKind
    real: Path | None  # where it really is (inside the root), None when it leads outside
    data: bytes | None = None
    problem: str | None = None  # why it is not readable (then `data` is None)

    @property
    def size(self) -> int:
        return len(self.data) if self.data is not None else 0

    @cached_property
    def digest(self) -> str:
        return sha256(self.data) if self.data is not None else ""

    @cached_property
    def text(self) -> str:
        return self.data.decode("utf-8") if self.data is not None else ""


@dataclass(frozen=True)
class Probe:
    """Where a candidate name is and what `lstat` and `stat` said, for caching by stat."""

    path: str
    kind: FileKind
    absolute: Path
    key: tuple[int, ...]
    folder: str = ""


def is_project_file_name(relative: str) -> bool:
    """Whether a path (relative to a folder) names a context file or an MCP list."""
    name = relative.replace("\\", "/")
    return any(name == n or name.endswith("/" + n) for n in (*CONTEXT_NAMES, MCP_NAME))


def kind_of(relative: str) -> FileKind:
    return "mcp" if posixpath.basename(relative) == MCP_NAME else "context"


def inside(root: Path, path: Path) -> bool:
    """Whether `path` (resolved) is `root` (resolved) or below it."""
    return path == root or root in path.parents


def folders(root: Path, notebook_path: str) -> list[str]:
    """The folders from `root` down to the notebook's, relative to the root (`""` for the root),
    outermost first; empty when the notebook is not inside the root (an absolute path elsewhere,
    `..`, or a folder whose real place is outside). Plain `os.path`: this runs per model call."""
    real_root = os.path.realpath(root)
    folder = os.path.realpath(os.path.join(root, os.path.dirname(notebook_path)))
    if folder == real_root:
        return [""]
    if not folder.startswith(real_root.rstrip(os.sep) + os.sep):
        return []
    parts = folder[len(real_root) :].strip(os.sep).split(os.sep)
    return ["/".join(parts[:i]) for i in range(len(parts) + 1)]


def _stat_key(path: str) -> tuple[int, ...] | None:
    """What changes when the file at `path` (or where its link points) changes; None: nothing
    is there."""
    try:
        link = os.lstat(path)
    except OSError:
        return None
    key = (link.st_ino, link.st_mode, link.st_mtime_ns)
    try:
        target = os.stat(path)
    except OSError:
        return key
    after = (target.st_dev, target.st_ino, target.st_size, target.st_mtime_ns, target.st_ctime_ns)
    return (*key, *after)


def probe(root: Path, notebook_path: str) -> list[Probe]:
    """The project files that exist from the root down to the notebook's folder (per folder its
    context file, then its `.mcp.json`), outermost first, with their stat keys."""
    found: list[Probe] = []
    base_root = os.fspath(root)
    for folder in folders(root, notebook_path):
        base = os.path.join(base_root, folder) if folder else base_root
        for name in (*CONTEXT_NAMES, MCP_NAME):
            if name != MCP_NAME and found and found[-1].folder == folder:
                continue  # this folder's context file was found already
            absolute = os.path.join(base, name)
            key = _stat_key(absolute)
            if key is not None:
                path = f"{folder}/{name}" if folder else name
                found.append(Probe(path, kind_of(name), Path(absolute), key, folder))
    return found


def read(root: Path, relative: str, kind: FileKind | None = None) -> FoundFile:
    """The file at `relative` below `root`, read carefully (see the module's doc)."""
    kind = kind or kind_of(relative)
    real_root = root.resolve()
    try:
        real = (root / relative).resolve(strict=True)
    except FileNotFoundError:
        return FoundFile(relative, kind, None, problem="not found (a link to nothing?)")
    except (OSError, RuntimeError) as exc:
        return FoundFile(relative, kind, None, problem=f"cannot be read: {exc}")
    if not inside(real_root, real):
        return FoundFile(relative, kind, None, problem=LINKS_OUT)
    try:
        data = _read_regular(real)
    except _Unreadable as exc:
        return FoundFile(relative, kind, real, problem=str(exc))
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return FoundFile(relative, kind, real, problem=f"not UTF-8 text (byte {exc.start})")
    return FoundFile(relative, kind, real, data=data)


class _Unreadable(Exception):
    pass


def _read_regular(real: Path) -> bytes:
    """A regular file's bytes, at most `MAX_FILE_BYTES`; opened without following a link that
    appeared since it was resolved, and without blocking on a FIFO."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        descriptor = os.open(real, flags)
    except OSError as exc:
        raise _Unreadable(f"cannot be read: {exc.strerror or exc}") from None
    try:
        info = os.fstat(descriptor)
    except OSError as exc:
        os.close(descriptor)
        raise _Unreadable(f"cannot be read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(info.st_mode):  # before fdopen, which raises for a folder
        os.close(descriptor)
        raise _Unreadable("not a regular file")
    with os.fdopen(descriptor, "rb") as handle:
        if info.st_size > MAX_FILE_BYTES:
            raise _Unreadable(f"larger than {MAX_FILE_BYTES:,} bytes ({info.st_size:,})")
        try:
            data = handle.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            raise _Unreadable(f"cannot be read: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise _Unreadable(f"larger than {MAX_FILE_BYTES:,} bytes")
    return data


def find(root: Path, notebook_path: str) -> list[FoundFile]:
    """Every project file from the root down to the notebook's folder, read (outermost first)."""
    return [read(root, p.path, p.kind) for p in probe(root, notebook_path)]
