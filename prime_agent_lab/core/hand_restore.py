"""The host's side of a restore typed by hand in a kernel: `prime_agent_kernel.restore_snapshot()`
without a folder (after a restart someone chose, which the agent never restores over; the
notice names this call). It works on every kernel, one on a gateway included, which cannot read
the host's session folder.

The kernel names nothing but `previous`: the snapshot is its own agent session's (the session of
the kernel whose signature the bridge verified), the latest or the one before it, and only if
this host's user signed it. The host answers the manifest's digest, and the kernel restores the
way the host's automatic restore makes it (core/snapshots.py `restore_snapshot`): a kernel that
shares the host's disk reads the folder and checks the manifest against that digest; any other
reads the manifest and its files with `snapshot.get`, which offers only those (`offer`), and the
kernel refuses a manifest whose digest differs. Each file's sha256 is checked before unpickling.
"""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prime_agent_kernel.operations import OFFER_SNAPSHOT

from .jsonfile import MAX_MANIFEST_BYTES, UnreadableFile, read_bytes
from .snapshot_transfer import SnapshotTransfers, shares_disk
from .snapshots import MANIFEST, PREVIOUS_MANIFEST, UNTRUSTED, kept_snapshots, state_directory
from .trust import Signer

if TYPE_CHECKING:
    from .caller import CallerContext, Register


def chosen_snapshot(
    session_dir: Path, signer: Signer, previous: bool
) -> tuple[dict[str, Any], bytes | None]:
    """What to offer for a hand restore of `session_dir`'s snapshot, and the manifest's bytes
    (None: nothing to offer; the answer says why). The latest unreadable: the one before it."""
    kept = kept_snapshots(session_dir, signer)
    choice = next((k for k in kept if k.previous), None) if previous else next(iter(kept), None)
    if choice is None:
        return {"refused": "no snapshot"}, None
    if not choice.trusted:
        return {"refused": UNTRUSTED, "snapshot_time": choice.manifest.get("time")}, None
    directory = state_directory(session_dir)
    name = PREVIOUS_MANIFEST if choice.previous else MANIFEST
    try:
        raw = read_bytes(directory / name, MAX_MANIFEST_BYTES)
    except UnreadableFile as exc:
        return {"refused": f"no snapshot ({exc})"}, None
    if hashlib.sha256(raw).hexdigest() != choice.digest:
        return {"refused": "the snapshot changed while it was being checked"}, None
    answer = {
        "digest": choice.digest,
        "previous": choice.previous,
        "time": choice.manifest.get("time"),
        "directory": None,
    }
    return answer, raw


def register_hand_restore(register: Register, transfers: SnapshotTransfers) -> None:
    async def offer(ctx: CallerContext, payload: dict[str, Any]) -> dict[str, Any]:
        previous = payload.get("previous") is True
        session_dir = ctx.session.directory
        answer, raw = await asyncio.to_thread(
            chosen_snapshot, session_dir, ctx.runtime.signer, previous
        )
        if raw is None:
            return answer
        directory = state_directory(session_dir)
        if shares_disk(ctx.agent.kernel):
            return {**answer, "directory": str(directory)}
        transfers.offer(directory, raw)
        return answer

    register(OFFER_SNAPSHOT, offer)
