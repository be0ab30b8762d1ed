"""One kernel per notebook: session creations for one path run one at a time, and a tab's
session that moves onto a notebook that has a kernel already joins that kernel.

jupyter_server's `POST /api/sessions` checks that the path has no session, then starts a kernel
(seconds on a loaded machine) and only then saves the session. A sub-agent's kernel handed to the
same notebook meanwhile (`hand_to_notebook`) also found no session, so the notebook ended up with
two sessions: the tab on a kernel of its own, the agent on another, and at its next attach the
agent moved to the tab's kernel with a snapshot restore. Behind this gate a creation for a path
waits for one already under way, and then answers with the session that one made, as the
sessions API answers for a path that already has one.

JupyterLab itself never posts the notebook's path: its `SessionContext` starts the session at a
placeholder path (a UUID in the notebook's folder, against that very race) and then PATCHes the
real path. So a tab opening a sub-agent's notebook just before its kernel was handed out still
got a kernel of its own. When the PATCH moves a placeholder session onto a path whose session
exists, the gate points it at that session's kernel; jupyter_server's PATCH then shuts the
placeholder's new kernel down and answers with the notebook's kernel, which the tab connects to.
"""

from __future__ import annotations

import asyncio
import contextlib
import posixpath
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from jupyter_core.utils import ensure_async

_INSTALLED = "_prime_agent_lab_one_session_per_path"


def is_placeholder(path: str) -> bool:
    """JupyterLab's placeholder session path: a UUID in the notebook's folder."""
    try:
        return str(uuid.UUID(posixpath.basename(path))) == posixpath.basename(path)
    except ValueError:
        return False


class OneSessionPerPath:
    def __init__(self, manager: Any) -> None:
        self._manager = manager
        self._create: Callable[..., Awaitable[dict[str, Any]]] = manager.create_session
        self._update: Callable[..., Awaitable[None]] = manager.update_session
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: dict[str, int] = {}

    @contextlib.asynccontextmanager
    async def _path_lock(self, path: str) -> AsyncIterator[None]:
        lock = self._locks.setdefault(path, asyncio.Lock())
        self._users[path] = self._users.get(path, 0) + 1
        try:
            async with lock:
                yield
        finally:
            self._users[path] -= 1
            if not self._users[path]:
                del self._users[path], self._locks[path]

    async def create_session(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        model, _ = await self.create_or_find(*args, **kwargs)
        return model

    async def create_or_find(self, *args: Any, **kwargs: Any) -> tuple[dict[str, Any], bool]:
        """The path's session, and whether this call created it (False: it existed)."""
        path = kwargs.get("path", args[0] if args else None)
        if not path:
            return dict(await self._create(*args, **kwargs)), True
        async with self._path_lock(path):
            if await ensure_async(self._manager.session_exists(path=path)):
                return dict(await self._manager.get_session(path=path)), False
            return dict(await self._create(*args, **kwargs)), True

    async def update_session(self, session_id: str, **kwargs: Any) -> None:
        path = kwargs.get("path")
        if not path or "kernel_id" in kwargs:
            await self._update(session_id, **kwargs)
            return
        async with self._path_lock(path):
            current = await self._manager.get_session(session_id=session_id)
            moving = current["path"] != path and is_placeholder(current["path"])
            if moving and await ensure_async(self._manager.session_exists(path=path)):
                existing = await self._manager.get_session(path=path)
                kwargs["kernel_id"] = existing["kernel"]["id"]
            await self._update(session_id, **kwargs)


def install(manager: Any) -> OneSessionPerPath:
    """Put the gate in front of `manager.create_session` and `manager.update_session` (once;
    later calls return it)."""
    gate: OneSessionPerPath | None = getattr(manager, _INSTALLED, None)
    if gate is None:
        gate = OneSessionPerPath(manager)
        manager.create_session = gate.create_session
        manager.update_session = gate.update_session
        setattr(manager, _INSTALLED, gate)
    return gate
