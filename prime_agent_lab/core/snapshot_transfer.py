"""Snapshot bytes between the host and a kernel that does not share its disk (a gateway kernel):
the host's side of `snapshot.begin` / `put` / `commit` / `get` (docs/gateway.md section 2.3).

Nothing here signs or trusts anything the kernel says. An upload is accepted only while the host
is taking that session's snapshot (`expecting`). `begin` checks the new manifest against the
host's caps (per variable, total) before any byte moves; `put` writes a chunk only at the end of
what came before and never past the file's declared size; `commit` checks each file's size and
sha256, then places the files under names no kept snapshot uses and writes `manifest.new.json`,
which the host checks, signs and commits as for a local kernel (core/snapshots.py). Until then
the folder's signed snapshots are untouched, so a failed or abandoned upload leaves the previous
snapshot whole: its temp files go when the save ends, or after two minutes without a chunk.

A restore reads only what the host chose (`offering`): the exact bytes of the manifest whose
signature it verified and the files that manifest names, never through a link.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hashlib
import json
import os
import re
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prime_agent_kernel.operations import (
    BEGIN_SNAPSHOT,
    COMMIT_SNAPSHOT,
    GET_SNAPSHOT_CHUNK,
    PUT_SNAPSHOT_CHUNK,
)

from .bridge import BridgeError, payload_number
from .snapshot_files import (
    MANIFEST,
    PREVIOUS_MANIFEST,
    RESTORE_REPORT,
    SNAPSHOT_TIMEOUT,
    SnapshotFailed,
    state_directory,
)
from .user_expressions import json_object
from .whole_writes import replace_whole

if TYPE_CHECKING:
    from .caller import CallerContext, Register

CHUNK_BYTES = 2**20  # raw bytes per chunk: base64 of it stays well under the bridge's 4 MiB
UPLOAD_IDLE_TIMEOUT = 120.0  # an upload without a chunk for this long is dropped
MANIFEST_FILE = "manifest"  # `snapshot.get`'s name for the manifest the host chose
NEW_MANIFEST = "manifest.new.json"
_FILE_NAME = re.compile(r"[0-9]{5}-[0-9a-f]{8}\.pkl")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC


@dataclass
class _File:
    size: int
    sha256: str
    written: int = 0


@dataclass
class _Upload:
    directory: Path
    manifest: dict[str, Any]
    files: dict[str, _File]
    touched: float
    save: _Save
    ident: str = field(default_factory=lambda: secrets.token_hex(12))

    def temp(self, name: str) -> Path:
        return self.directory / f"{name}.{self.ident}.tmp"


@dataclass(eq=False)
class _Offer:
    directory: Path
    manifest: bytes
    files: frozenset[str]
    touched: float | None = None  # a standing offer (`offer`): when the kernel last read it


@dataclass(frozen=True)
class Caps:
    variable: int
    total: int


@dataclass(eq=False)
class _Save:
    caps: Caps
    begun: bool = False  # each save sends one upload


class SnapshotTransfers:
    """Per runtime: the uploads under way and the restores offered, by `kernel-state/` folder."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        # folder -> the saves under way (two may overlap: a turn's start and a debounced one)
        self._expecting: dict[Path, list[_Save]] = {}
        self._uploads: dict[str, _Upload] = {}
        self._offers: dict[Path, _Offer] = {}

    # ------------------------------------------------------------ the host's side

    @contextlib.contextmanager
    def expecting(self, directory: Path, caps: Caps) -> Iterator[None]:
        """A save of this folder's session is under way: its kernel may upload. What that save's
        upload left unfinished goes when it ends."""
        save = _Save(caps)
        self._expecting.setdefault(directory, []).append(save)
        try:
            yield
        finally:
            saves = self._expecting[directory]
            saves.remove(save)
            if not saves:
                del self._expecting[directory]
            for ident, upload in list(self._uploads.items()):
                if upload.save is save:
                    self._drop(ident)

    @contextlib.contextmanager
    def offering(self, directory: Path, manifest: bytes) -> Iterator[None]:
        """A restore of this folder's session is under way: its kernel may read `manifest` (the
        exact bytes the host verified) and the files it names."""
        offer = self._offers[directory] = _offer(directory, manifest)
        try:
            yield
        finally:
            if self._offers.get(directory) is offer:
                del self._offers[directory]

    def offer(self, directory: Path, manifest: bytes) -> None:
        """A restore the kernel runs itself (`prime_agent_kernel.restore_snapshot()` typed in
        it, core/hand_restore.py): `manifest` (verified by the host) and its files stay offered
        until two minutes pass without a read, or another restore of the folder replaces it."""
        self._offers[directory] = _offer(directory, manifest, self._clock())

    def uploads(self) -> int:
        """Uploads under way (tests)."""
        return len(self._uploads)

    # ------------------------------------------------------------ the kernel's side

    def begin(self, directory: Path, manifest: object) -> str:
        self._expire()
        # the kernel runs the saves in the order the host asked for them
        save = next((s for s in self._expecting.get(directory, []) if not s.begun), None)
        if save is None:
            raise BridgeError(409, "the host is not taking this kernel's snapshot")
        files = _declared_files(manifest, save.caps)
        for name in files:  # a name a kept snapshot uses would be replaced under it
            if os.path.lexists(directory / name):
                raise BridgeError(409, f"{name} exists already")
        assert isinstance(manifest, dict)
        upload = _Upload(directory, manifest, files, self._clock(), save)
        save.begun = True
        self._uploads[upload.ident] = upload
        return upload.ident

    def put(self, directory: Path, ident: object, name: object, offset: int, data: object) -> int:
        upload = self._upload(directory, ident)
        declared = upload.files.get(str(name))
        if declared is None:
            raise BridgeError(400, f"{str(name)[:80]!r} is not a file of this upload")
        if offset != declared.written:
            raise BridgeError(
                400, f"offset {offset} is not the end of what came ({declared.written})"
            )
        try:
            chunk = base64.b64decode(str(data), validate=True)
        except (binascii.Error, ValueError):
            raise BridgeError(400, "data is not base64") from None
        if len(chunk) > CHUNK_BYTES:
            raise BridgeError(413, f"a chunk is at most {CHUNK_BYTES:,} bytes")
        if declared.written + len(chunk) > declared.size:
            self._drop(upload.ident)
            raise BridgeError(
                400, f"{name} would pass its declared {declared.size:,} bytes: upload dropped"
            )
        try:
            fd = os.open(upload.temp(str(name)), os.O_WRONLY | os.O_CREAT | _NO_FOLLOW, 0o600)
            try:
                os.pwrite(fd, chunk, offset)
            finally:
                os.close(fd)
        except OSError as exc:
            self._drop(upload.ident)
            raise BridgeError(507, f"the host cannot write the snapshot ({exc.strerror})") from None
        declared.written += len(chunk)
        upload.touched = self._clock()
        return declared.written

    def commit(self, directory: Path, ident: object) -> list[str]:
        upload = self._upload(directory, ident)
        try:
            for name, declared in upload.files.items():
                digest = _digest(upload.temp(name))
                if digest is None and declared.size == 0:  # an empty file sent no chunk
                    upload.temp(name).touch()
                    digest = hashlib.sha256(b"").hexdigest()
                if declared.written != declared.size or digest != declared.sha256:
                    raise BridgeError(
                        400, f"{name} does not match its declared size and sha256: upload dropped"
                    )
            for name in upload.files:
                os.replace(upload.temp(name), directory / name)
            replace_whole(directory / NEW_MANIFEST, json.dumps(upload.manifest).encode("utf-8"))
        except OSError as exc:
            raise BridgeError(507, f"the host cannot write the snapshot ({exc.strerror})") from None
        finally:
            self._drop(upload.ident)
        return sorted(upload.files)

    def read(self, directory: Path, name: object, offset: int, size: int) -> bytes:
        offer = self._offers.get(directory)
        if offer is not None and offer.touched is not None:
            if self._clock() - offer.touched > UPLOAD_IDLE_TIMEOUT:
                del self._offers[directory]
                offer = None
            else:
                offer.touched = self._clock()
        if offer is None:
            raise BridgeError(409, "the host is not restoring a snapshot into this kernel")
        if name == MANIFEST_FILE:
            return offer.manifest[offset : offset + size]
        if not isinstance(name, str) or name not in offer.files:
            raise BridgeError(403, "not a file of the snapshot the host chose")
        if offer.directory.is_symlink():
            raise BridgeError(403, f"{offer.directory} is a symbolic link")
        try:
            fd = os.open(offer.directory / name, os.O_RDONLY | os.O_NONBLOCK | _NO_FOLLOW)
        except OSError as exc:
            raise BridgeError(404, f"{name} cannot be read ({exc.strerror})") from None
        try:
            return os.pread(fd, size, offset)
        finally:
            os.close(fd)

    # ------------------------------------------------------------ bookkeeping

    def _upload(self, directory: Path, ident: object) -> _Upload:
        self._expire()
        upload = self._uploads.get(str(ident))
        if upload is None or upload.directory != directory:
            raise BridgeError(404, "no such upload (dropped, finished, or another kernel's)")
        return upload

    def _expire(self) -> None:
        now = self._clock()
        for ident, upload in list(self._uploads.items()):
            if now - upload.touched > UPLOAD_IDLE_TIMEOUT:
                self._drop(ident)

    def _drop(self, ident: str) -> None:
        upload = self._uploads.pop(ident, None)
        if upload is not None:
            for name in upload.files:
                with contextlib.suppress(OSError):
                    upload.temp(name).unlink()


def _offer(directory: Path, manifest: bytes, touched: float | None = None) -> _Offer:
    saved = json.loads(manifest).get("saved", [])
    names = {str(e.get("file")) for e in saved if isinstance(e, dict)}
    files = frozenset(n for n in names if _FILE_NAME.fullmatch(n))
    return _Offer(directory, manifest, files, touched)


def _digest(path: Path) -> str | None:
    try:
        fd = os.open(path, os.O_RDONLY | _NO_FOLLOW)
    except OSError:
        return None
    digest = hashlib.sha256()
    with os.fdopen(fd, "rb") as file:
        while block := file.read(CHUNK_BYTES):
            digest.update(block)
    return digest.hexdigest()


def _declared_files(manifest: object, caps: Caps) -> dict[str, _File]:
    """The files a new manifest declares, once they are within the caps; else a 413 or 400."""
    if not isinstance(manifest, dict) or not isinstance(manifest.get("saved"), list):
        raise BridgeError(400, "manifest must be an object with a 'saved' list")
    files: dict[str, _File] = {}
    for entry in manifest["saved"]:
        if not isinstance(entry, dict):
            raise BridgeError(400, "each saved variable must be an object")
        name, size, digest = entry.get("file"), entry.get("bytes"), entry.get("sha256")
        if not isinstance(name, str) or not _FILE_NAME.fullmatch(name) or name in files:
            raise BridgeError(400, f"not a snapshot file name: {str(name)[:80]!r}")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise BridgeError(400, f"{name}: bytes must be a whole number")
        if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
            raise BridgeError(400, f"{name}: sha256 must be 64 hex digits")
        if size > caps.variable:
            raise BridgeError(
                413, f"{name} has {size:,} bytes, over the per-variable cap of {caps.variable:,}"
            )
        files[name] = _File(size, digest)
    total = sum(f.size for f in files.values())
    if total > caps.total:
        raise BridgeError(413, f"{total:,} bytes, over the snapshot's total cap of {caps.total:,}")
    return files


def _state_directory(ctx: CallerContext) -> Path:
    return state_directory(ctx.session.directory)


def register_snapshot_operations(register: Register, transfers: SnapshotTransfers) -> None:
    async def begin(ctx: CallerContext, payload: dict[str, Any]) -> dict[str, Any]:
        return {"upload": transfers.begin(_state_directory(ctx), payload.get("manifest"))}

    async def put(ctx: CallerContext, payload: dict[str, Any]) -> dict[str, Any]:
        offset = int(payload_number(payload, "offset", default=0, minimum=0, maximum=2**40))
        written = transfers.put(
            _state_directory(ctx),
            payload.get("upload"),
            payload.get("file"),
            offset,
            payload.get("data"),
        )
        return {"written": written}

    async def commit(ctx: CallerContext, payload: dict[str, Any]) -> dict[str, Any]:
        directory, upload = _state_directory(ctx), payload.get("upload")
        return {"files": await asyncio.to_thread(transfers.commit, directory, upload)}

    async def get(ctx: CallerContext, payload: dict[str, Any]) -> dict[str, Any]:
        offset = int(payload_number(payload, "offset", default=0, minimum=0, maximum=2**40))
        size = int(payload_number(payload, "size", default=CHUNK_BYTES, minimum=0,
                                  maximum=CHUNK_BYTES))  # fmt: skip
        data = transfers.read(_state_directory(ctx), payload.get("file"), offset, size)
        return {"data": base64.b64encode(data).decode("ascii")}

    register(BEGIN_SNAPSHOT, begin)
    register(PUT_SNAPSHOT_CHUNK, put)
    register(COMMIT_SNAPSHOT, commit)
    register(GET_SNAPSHOT_CHUNK, get)


# ------------------------------------------------------------------ what the host runs


def shares_disk(kernel: object) -> bool:
    """Whether the kernel behind a port writes and reads the session folder itself (a local
    kernel) or gets its snapshot bytes and skill modules over the bridge (a gateway kernel).
    The fleet decides (`KernelFleet.shares_disk`); a port without a say shares it."""
    seen: set[int] = set()
    while id(kernel) not in seen:
        seen.add(id(kernel))
        says = getattr(type(kernel), "shares_disk", None)
        if says is not None:
            return bool(kernel.shares_disk)
        inner = getattr(kernel, "kernel", None) or getattr(kernel, "_kernel", None)
        if inner is None:
            break
        kernel = inner
    return True


def push_code(caps: Caps, committed: str | None) -> str:
    return (
        "import prime_agent_kernel.snapshot_transfer as _prime_agent_transfer\n"
        f"_prime_agent_transfer.push({caps.variable!r}, {caps.total!r}, {committed!r})\n"
        "del _prime_agent_transfer\n"
    )


def pull_code(digest: str, previous: bool, **options: bool) -> str:
    extra = "".join(f", {k}={v!r}" for k, v in options.items())
    return (
        "import prime_agent_kernel.snapshot_transfer as _prime_agent_transfer\n"
        f"_prime_agent_transfer.pull({digest!r}, previous={previous!r}{extra})\n"
        "del _prime_agent_transfer\n"
    )


PULL_REPORT = {
    "report": "__import__('prime_agent_kernel.snapshot_transfer', fromlist=['_'])"
    ".last_report_json()"
}


def pull_report(reply: dict[str, Any]) -> dict[str, Any] | None:
    """The kernel's restore report from the silent run's user expression (None: none)."""
    return json_object(reply, "report")


async def pull_through_bridge(
    run: Callable[..., Any],
    directory: Path,
    previous: bool,
    digest: str,
    transfers: SnapshotTransfers,
    **options: bool,
) -> dict[str, Any] | None:
    """A restore into a kernel that does not share the host's disk: it reads the manifest the
    host verified (`digest`), and the files it names, over the bridge; its report (None: it
    gave none), also written where a local kernel writes it. `run`: the port's `run_silently`;
    `options`: `snapshot.restore`'s (`overwrite`, `prune`, `only_if_fresh`)."""
    from .jsonfile import MAX_MANIFEST_BYTES, read_bytes

    raw = read_bytes(directory / (PREVIOUS_MANIFEST if previous else MANIFEST), MAX_MANIFEST_BYTES)
    if hashlib.sha256(raw).hexdigest() != digest:
        raise SnapshotFailed("the snapshot changed while it was being restored")
    with transfers.offering(directory, raw):
        reply = await run(pull_code(digest, previous, **options), SNAPSHOT_TIMEOUT, PULL_REPORT)
    if reply.get("status") != "ok":
        raise SnapshotFailed(f"{reply.get('ename', 'error')}: {reply.get('evalue', '')}")
    report = pull_report(reply)
    if report is not None:
        replace_whole(directory / RESTORE_REPORT, json.dumps(report).encode("utf-8"))
    return report
