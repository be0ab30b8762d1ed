"""One Jupyter session per notebook: session creations for one path run one at a time.

jupyter_server's `POST /api/sessions` checks that the path has no session, then starts a kernel
(seconds on a loaded machine) and only then saves the session. A sub-agent's kernel handed to the
same notebook meanwhile (`hand_to_notebook`) also found no session, so the notebook ended up with
two sessions: the tab on a kernel of its own, the agent on another, and at its next attach the
agent moved to the tab's kernel with a snapshot restore. Behind this gate a creation for a path
waits for one already under way, and then answers with the session that one made, as the
sessions API answers for a path that already has one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from jupyter_core.utils import ensure_async

_INSTALLED = "_prime_agent_lab_one_session_per_path"


class OneSessionPerPath:
    def __init__(self, manager: Any) -> None:
        self._manager = manager
        self._create: Callable[..., Awaitable[dict[str, Any]]] = manager.create_session
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: dict[str, int] = {}

    async def create_session(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        model, _ = await self.create_or_find(*args, **kwargs)
        return model

    async def create_or_find(self, *args: Any, **kwargs: Any) -> tuple[dict[str, Any], bool]:
        """The path's session, and whether this call created it (False: it existed)."""
        path = kwargs.get("path", args[0] if args else None)
        if not path:
            return dict(await self._create(*args, **kwargs)), True
        lock = self._locks.setdefault(path, asyncio.Lock())
        self._users[path] = self._users.get(path, 0) + 1
        try:
            async with lock:
                if await ensure_async(self._manager.session_exists(path=path)):
                    return dict(await self._manager.get_session(path=path)), False
                return dict(await self._create(*args, **kwargs)), True
        finally:
            self._users[path] -= 1
            if not self._users[path]:
                del self._users[path], self._locks[path]


def install(manager: Any) -> OneSessionPerPath:
    """Put the gate in front of `manager.create_session` (once; later calls return it)."""
    gate: OneSessionPerPath | None = getattr(manager, _INSTALLED, None)
    if gate is None:
        gate = OneSessionPerPath(manager)
        manager.create_session = gate.create_session
        setattr(manager, _INSTALLED, gate)
    return gate
