"""Which project files (context files, `.mcp.json`) this user trusts (docs/project-context.md).

They are the project's files, so no signature can live inside them: the host keeps a list,
`trusted_files.json` next to the signing secret (core/trust.py), one record per file `{path,
sha256, signature}` with the path the file's real absolute path and the signature an HMAC
(purpose `project-file`) under the user's secret. A file is trusted when its current bytes
have a valid record; a record whose signature fails (an edited list, another user's) is
ignored. Writes replace the list by rename under a lock, so two servers of one user never lose
each other's records.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .project_files import is_project_file_name, read
from .trust import Signer, default_secret_file

log = logging.getLogger(__name__)

PURPOSE = "project-file"
LIST_FILE = "trusted_files.json"


def default_list_file() -> Path:
    """`trusted_files.json` in the folder of the signing secret."""
    return default_secret_file().parent / LIST_FILE


class TrustedFiles:
    """The user's list of trusted project files, read again only when it changed on disk."""

    def __init__(self, signer: Signer, path: Path | None = None) -> None:
        self.signer = signer
        self.path = path or default_list_file()
        self._cache: tuple[tuple[int, ...] | None, dict[str, str]] = (None, {})

    def __repr__(self) -> str:
        return f"TrustedFiles({self.path})"

    def _stat_key(self) -> tuple[int, ...] | None:
        try:
            info = os.stat(self.path)
        except OSError:
            return None
        return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)

    def records(self) -> dict[str, str]:
        """Real path -> trusted sha256, of the records whose signature holds."""
        key = self._stat_key()
        if key is not None and key == self._cache[0]:
            return self._cache[1]
        valid = self._read_valid()
        self._cache = (key, valid)
        return valid

    def version(self) -> tuple[int, ...] | None:
        """Changes whenever the list on disk changes (for callers that cache what it decides)."""
        return self._stat_key()

    def is_trusted(self, real: Path, digest: str) -> bool:
        return bool(digest) and self.records().get(str(real)) == digest

    def trust(self, real: Path, digest: str) -> None:
        """Record `digest` as the trusted bytes of the file at `real` (an absolute real path),
        replacing what was recorded for it."""
        record = self.signer.sign_object(PURPOSE, {"path": str(real), "sha256": digest})
        with self._locked():
            kept = [r for r in self._read_raw() if r.get("path") != str(real)]
            self._write([*kept, record])
        self._cache = (None, {})

    def _read_raw(self) -> list[dict[str, Any]]:
        try:
            data = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            log.warning("the trusted project files list %s cannot be read: %s", self.path, exc)
            return []
        files = data.get("files") if isinstance(data, dict) else None
        return [r for r in files if isinstance(r, dict)] if isinstance(files, list) else []

    def _read_valid(self) -> dict[str, str]:
        valid: dict[str, str] = {}
        for record in self._read_raw():
            path, digest = record.get("path"), record.get("sha256")
            if set(record) != {"path", "sha256", "signature"}:
                continue
            if not isinstance(path, str) or not isinstance(digest, str):
                continue
            if self.signer.verify_object(PURPOSE, record):
                valid[path] = digest
        return valid

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = self.path.with_name(f".{self.path.name}.lock")
        descriptor = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            yield
        finally:
            os.close(descriptor)  # releases the lock

    def _write(self, records: list[dict[str, Any]]) -> None:
        body = json.dumps({"version": 1, "files": records}, indent=1).encode("utf-8")
        temp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        try:
            descriptor = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(body)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, self.path)  # a link at the list's place is replaced, not followed
        finally:
            with contextlib.suppress(OSError):
                temp.unlink()


class SaveKeepsTrust:
    """Contents API save hooks (docs/project-context.md): a save keeps the trust of a context
    file or `.mcp.json` that was trusted just before it (the user editing their own trusted
    `AGENTS.md` in JupyterLab), and never makes an untrusted or new file trusted. JupyterLab
    saves a file when its document opens and copies files by saving the copy, so "saved from
    JupyterLab" says nothing about who wrote the bytes.

    `pre_save` (a pre-save hook) notes whether the bytes on disk at the path are trusted;
    `post_save` (a post-save hook) trusts the saved bytes only when they were."""

    def __init__(self, trusted: TrustedFiles, root: Path) -> None:
        self.trusted = trusted
        self.real_root = root.resolve()
        self._was_trusted: dict[str, bool] = {}  # os path -> trusted before its save

    def _relative(self, os_path: str) -> str | None:
        """The path below the root of a project file name whose real place is in the root."""
        if not os_path or not is_project_file_name(os_path.replace(os.sep, "/")):
            return None
        real = Path(os_path).resolve()
        if self.real_root not in real.parents:
            return None
        return real.relative_to(self.real_root).as_posix()

    def _trusted_now(self, relative: str) -> tuple[Path | None, str, bool]:
        found = read(self.real_root, relative)
        if found.real is None or found.data is None:
            return None, "", False
        return found.real, found.digest, self.trusted.is_trusted(found.real, found.digest)

    def pre_save(
        self, model: Any = None, path: str = "", contents_manager: Any = None, **_: Any
    ) -> None:
        if contents_manager is None:
            return
        os_path = contents_manager._get_os_path(path.strip("/"))
        relative = self._relative(os_path)
        if relative is None:
            return
        self._was_trusted[os_path] = self._trusted_now(relative)[2]

    def post_save(
        self, os_path: str = "", model: Any = None, contents_manager: Any = None, **_: Any
    ) -> None:
        was_trusted = self._was_trusted.pop(os_path, False)
        relative = self._relative(os_path)
        if relative is None or not was_trusted:
            return
        real, digest, _trusted = self._trusted_now(relative)
        if real is not None:
            self.trusted.trust(real, digest)

    def install(self, contents_manager: Any) -> None:
        contents_manager.register_pre_save_hook(self.pre_save)
        contents_manager.register_post_save_hook(self.post_save)
