"""A skill module's source as the host hands it to a kernel that does not share its disk
(`harness.skill_source`, docs/gateway.md section 2.4): found where a local kernel's finder
would look (the `skills/` folders the host offers, in order), a single `.py` file, never
through a link, at most 1 MiB."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from .bridge import BridgeError
from .jsonfile import UnreadableFile, read_bytes
from .trust import sha256

MAX_MODULE_BYTES = 2**20
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def skill_source(paths: list[str], name: object) -> dict[str, Any] | None:
    """`{source, sha256}` of the module `name` in the first of `paths` that holds it, or None."""
    if not isinstance(name, str) or not _MODULE.fullmatch(name):
        raise BridgeError(400, "name must be a top-level module name")
    for folder in paths:
        path = Path(folder) / f"{name}.py"
        if os.path.islink(folder) or path.is_symlink() or not path.is_file():
            continue
        try:
            data = read_bytes(path, MAX_MODULE_BYTES)
        except UnreadableFile as exc:
            raise BridgeError(409, f"skill module {name!r} cannot be read ({exc.reason})") from None
        return {"source": data.decode("utf-8", errors="replace"), "sha256": sha256(data)}
    return None
