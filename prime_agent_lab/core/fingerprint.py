"""The workspace fingerprint: whether anything in a run's folder changed since a gate failed.

In a git work tree it hashes `git status --porcelain`, `git diff HEAD` (binary changes too) and
the contents of untracked files that are not ignored; outside git, every file's relative path,
size and content hash. The harness's own files are left out: `.prime-agent/` (the session log
changes every turn), the run's notebook (with the temporary file it is rewritten through) and its
sub-agents' folder (agent cells are the record of the work, not the work), `.ipynb_checkpoints`
and `.git`. Otherwise a failed gate would always
count as changed and run again. A CLI run leaves out its own stdout and stderr files too
(`own_output_files`: `run ... > out.jsonl` in the folder writes it at every event). Hashing stops
past a size cap (the note says so); the files past
it still count by path, size and modification time. Past `MAX_FILES` files the rest are not
looked at (the note says so too).
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import stat
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .whole_writes import temporary_glob

ALWAYS_SKIPPED = (".prime-agent", ".git", ".ipynb_checkpoints")
HASH_CAP_BYTES = 256 * 2**20
MAX_FILES = 50_000  # a walk stops here: a folder that big (a home directory) is not one task's
GIT_TIMEOUT = 60.0
_BLOCK = 1 << 20


@dataclass(frozen=True)
class Fingerprint:
    digest: str
    note: str | None = None  # the hashing was cut short (what was only counted by size)


def harness_paths(notebook_path: str) -> tuple[str, ...]:
    """The run's own notebook and its sub-agents' folder (`a.ipynb` -> `a.agents`), relative."""
    stem = notebook_path[: -len(".ipynb")] if notebook_path.endswith(".ipynb") else notebook_path
    return (notebook_path, f"{stem}.agents")


def own_output_files(fds: Iterable[int] = (1, 2)) -> tuple[Path, ...]:
    """The regular files this process's stdout and stderr (`fds`) write to, found through
    /proc/self/fd (none where there is no /proc, or for a terminal or a pipe)."""
    found: list[Path] = []
    for fd in fds:
        try:
            opened = os.fstat(fd)
            path = Path(os.readlink(f"/proc/self/fd/{fd}"))
            named = path.stat()
        except OSError:
            continue
        same = (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)
        if stat.S_ISREG(opened.st_mode) and path.is_absolute() and same:
            found.append(path)
    return tuple(found)


def workspace_fingerprint(
    folder: Path, excluded: Iterable[str] = (), cap: int = HASH_CAP_BYTES
) -> Fingerprint:
    """The fingerprint of `folder` without `excluded` (paths relative to it) and the
    harness's own folders. Blocking: run it in a thread."""
    skip = tuple(p.strip("/") for p in excluded if p.strip("/"))
    if _in_git_work_tree(folder):
        try:
            return _git_fingerprint(folder, skip, cap)
        except (OSError, subprocess.SubprocessError):
            pass  # git failed on this tree: the files themselves still say it
    return _walk_fingerprint(folder, skip, cap)


def _git(folder: Path, *args: str) -> bytes:
    done = subprocess.run(
        ["git", *args],
        cwd=folder,
        capture_output=True,
        timeout=GIT_TIMEOUT,
        check=True,
        env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},  # status must not write the index
    )
    return done.stdout


def _in_git_work_tree(folder: Path) -> bool:
    try:
        return _git(folder, "rev-parse", "--is-inside-work-tree").strip() == b"true"
    except (OSError, subprocess.SubprocessError):
        return False


def _pathspec(skip: tuple[str, ...]) -> list[str]:
    spec = ["--", "."]
    for name in (*ALWAYS_SKIPPED, *skip):
        spec += [f":(exclude){name}", f":(exclude,glob)**/{name}/**"]
    return spec + [f":(exclude,glob){pattern}" for pattern in _being_rewritten(skip)]


def _being_rewritten(skip: tuple[str, ...]) -> list[str]:
    """Globs of the temporary files the excluded files are rewritten through (the run's
    notebook, saved while a gate's fingerprint is taken, is one for a moment)."""
    patterns = []
    for path in skip:
        folder, _, name = path.rpartition("/")
        patterns.append(f"{folder}/{temporary_glob(name)}" if folder else temporary_glob(name))
    return patterns


def _git_fingerprint(folder: Path, skip: tuple[str, ...], cap: int) -> Fingerprint:
    digest = hashlib.sha256()
    spec = _pathspec(skip)
    digest.update(_git(folder, "status", "--porcelain=v1", "-z", "--untracked-files=all", *spec))
    try:
        _git(folder, "rev-parse", "--verify", "--quiet", "HEAD")
        digest.update(_git(folder, "diff", "HEAD", "--binary", "--no-ext-diff", *spec))
    except subprocess.CalledProcessError:  # no commit yet: the index and the tree
        digest.update(_git(folder, "diff", "--cached", "--binary", "--no-ext-diff", *spec))
        digest.update(_git(folder, "diff", "--binary", "--no-ext-diff", *spec))
    untracked = _git(folder, "ls-files", "--others", "--exclude-standard", "-z", *spec)
    names = sorted(n for n in untracked.decode("utf-8", "surrogateescape").split("\0") if n)
    hasher = _Hasher(cap)
    for name in names[:MAX_FILES]:
        hasher.add(folder / name, name, digest)
    hasher.left_out = max(len(names) - MAX_FILES, 0)
    return Fingerprint(digest.hexdigest(), hasher.note())


def _walk_fingerprint(folder: Path, skip: tuple[str, ...], cap: int) -> Fingerprint:
    digest = hashlib.sha256()
    hasher = _Hasher(cap)
    skipped_names = set(ALWAYS_SKIPPED)
    rewritten = _being_rewritten(skip)
    for root, dirs, files in os.walk(folder):
        relative_root = Path(root).relative_to(folder).as_posix()
        dirs[:] = sorted(
            d for d in dirs if d not in skipped_names and _relative(relative_root, d) not in skip
        )
        for name in sorted(files):
            relative = _relative(relative_root, name)
            if hasher.files >= MAX_FILES:
                hasher.left_out = 1
                return Fingerprint(digest.hexdigest(), hasher.note())
            if relative not in skip and not any(
                fnmatch.fnmatchcase(relative, pattern) for pattern in rewritten
            ):
                hasher.add(Path(root) / name, relative, digest)
    return Fingerprint(digest.hexdigest(), hasher.note())


def _relative(root: str, name: str) -> str:
    return name if root == "." else f"{root}/{name}"


class _Hasher:
    """Adds files to a digest: path, size and content hash, until `cap` bytes were hashed;
    after that path, size and modification time only."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.hashed = 0
        self.unhashed = 0  # files counted by size and time only
        self.files = 0
        self.left_out = 0  # files past MAX_FILES (a walk: at least this many)

    def add(self, path: Path, relative: str, digest: hashlib._Hash) -> None:
        self.files += 1
        try:
            stat = path.lstat()
        except OSError:
            digest.update(f"{relative}\0gone\0".encode("utf-8", "surrogateescape"))
            return
        line = f"{relative}\0{stat.st_size}\0"
        if path.is_symlink():
            line += f"link:{os.readlink(path)}"
        elif self.hashed + stat.st_size <= self.cap:
            line += self._content(path)
            self.hashed += stat.st_size
        else:
            line += f"mtime:{stat.st_mtime_ns}"
            self.unhashed += 1
        digest.update(f"{line}\0".encode("utf-8", "surrogateescape"))

    @staticmethod
    def _content(path: Path) -> str:
        content = hashlib.sha256()
        try:
            with path.open("rb") as file:
                while block := file.read(_BLOCK):
                    content.update(block)
        except OSError as exc:
            return f"unreadable:{exc.errno}"
        return content.hexdigest()

    def note(self) -> str | None:
        notes = []
        if self.unhashed:
            notes.append(
                f"{self.unhashed} files past the first {self.cap // 2**20} MB were compared by "
                "size and modification time, not content"
            )
        if self.left_out:
            notes.append(f"files past the first {MAX_FILES:,} were not compared")
        return "; ".join(notes) or None
