#!/usr/bin/env python3
"""Put the examples' recorded sessions where a server started at the checkout's root finds them.

    python binder/place_example_sessions.py [ROOT]      # ROOT: the checkout (default)

Each example was recorded in its own folder (examples/regenerate.py), so its sessions are under
`examples/<name>/.prime-agent/sessions/<id>/` and name their notebooks relative to that folder.
A server started at the root (Binder) reads `<root>/.prime-agent/sessions/` and names notebooks
relative to the root. This copies each session folder there, with the header's notebook paths
(`notebook_path`, `parent_notebook_path`) made relative to the root; every other byte is the
recorded one. The committed examples are left as they are.

The copies are someone else's files, like any session from a git clone (DESIGN.md, "Trust"):
nothing in them is signed with this machine's secret, so the harness store of a refinement and
queued mail are shown and not used until the user trusts them, and there are no kernel
snapshots. Listing a session and its step-through read the log only.

A session folder that exists at the target already is left alone (the placement runs again on
every Binder build; a user's own session is never overwritten).
"""

from __future__ import annotations

import json
import posixpath
import shutil
import sys
from pathlib import Path

SESSIONS = Path(".prime-agent") / "sessions"
SESSION_FILE = "session.jsonl"
HEADER_PATHS = ("notebook_path", "parent_notebook_path")


def place(root: Path) -> list[str]:
    """Copy every example's sessions under `root`'s sessions folder; the ids placed."""
    target = root / SESSIONS
    placed = []
    for spec in sorted((root / "examples").glob("*/example.json")):
        example = spec.parent
        folder = example.relative_to(root).as_posix()
        for session in sorted((example / SESSIONS).glob("*")):
            destination = target / session.name
            if not session.is_dir() or session.is_symlink() or destination.exists():
                continue
            shutil.copytree(session, destination, symlinks=True)
            rebase_header(destination / SESSION_FILE, folder)
            placed.append(session.name)
    return placed


def rebase_header(log: Path, folder: str) -> None:
    """The log's first line (its header) with its notebook paths under `folder`."""
    first, newline, rest = log.read_bytes().partition(b"\n")
    header = json.loads(first)
    for key in HEADER_PATHS:
        if isinstance(header.get(key), str) and header[key]:
            header[key] = posixpath.join(folder, header[key])
    log.write_bytes(json.dumps(header, ensure_ascii=False).encode() + newline + rest)


if __name__ == "__main__":
    checkout = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]
    for session_id in place(checkout.resolve()):
        print(f"placed example session {session_id} in {SESSIONS}")
