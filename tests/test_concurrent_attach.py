"""Attaching one notebook, which may start its kernel, never holds up another notebook's agent."""

from __future__ import annotations

import asyncio
from typing import Any

from .conftest import run_turn, use_script


async def test_a_kernel_starting_for_one_notebook_does_not_block_another_notebooks_agent(
    host: Any, make_notebook: Any, agent_script: Any
) -> None:
    use_script(host, agent_script([{"code": "print('b ran')"}, {"text": "done"}]))
    busy_path, other_path = make_notebook("slow.ipynb"), make_notebook("other.ipynb")
    other = await host.attach(other_path)

    sessions = host.serverapp.session_manager
    real_create = sessions.create_session
    started, release = asyncio.Event(), asyncio.Event()

    async def slow_create_session(*args: Any, **kwargs: Any) -> Any:
        started.set()
        await release.wait()  # a kernel that takes its time to start
        return await real_create(*args, **kwargs)

    sessions.create_session = slow_create_session
    try:
        slow_attach = asyncio.ensure_future(host.attach(busy_path))
        await asyncio.wait_for(started.wait(), 30)

        # Meanwhile the other notebook re-attaches (as a tab does) and runs a whole turn.
        again = await asyncio.wait_for(host.attach(other_path), 10)
        ended = await run_turn(host, other.session_id, "go", timeout=30)

        assert again is other and ended["stop_reason"] == "end_turn"
        assert not slow_attach.done()
        release.set()
        await asyncio.wait_for(slow_attach, 60)
    finally:
        release.set()
        sessions.create_session = real_create
