"""The kernel fleet's own lifetime: what it starts in the background ends with it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from prime_agent_lab.adapters.kernel_fleet import KernelFleet
from prime_agent_lab.adapters.local_kernels import LocalBackend, LocalKernels


async def test_closing_the_fleet_ends_a_kernel_preparation_still_under_way(tmp_path: Path) -> None:
    # A preparation left pending outlives the host's event loop; its coroutine is then closed
    # by the garbage collector wherever that runs, logging "Task was destroyed but it is
    # pending" and "Event loop is closed" tracebacks into whatever code happens to be running.
    backend = LocalBackend(LocalKernels("python3", cwd=tmp_path))
    fleet = KernelFleet(backend, lambda: "http://127.0.0.1:9/", pool_size=0)
    kernel_id = await backend.start()
    fleet.prepare_soon(kernel_id)
    await asyncio.sleep(0)  # the preparation has started: it waits on the kernel
    preparing = [
        task for task in asyncio.all_tasks() if "KernelFleet._prepare" in repr(task.get_coro())
    ]
    assert preparing and not any(task.done() for task in preparing)
    await fleet.close()
    assert all(task.done() for task in preparing)
    assert not backend.managed(kernel_id)
