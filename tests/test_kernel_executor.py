"""The kernel executor against a real local kernel (no server): setup, outputs, displays."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from jupyter_client.manager import AsyncKernelManager

from prime_agent_lab.adapters.kernel_executor import KernelExecutor
from prime_agent_lab.core.ports import OutputEvent


@pytest.fixture
def kernel(jp_asyncio_loop: Any) -> Iterator[AsyncKernelManager]:
    km = AsyncKernelManager(kernel_name="python3")
    jp_asyncio_loop.run_until_complete(km.start_kernel())
    yield km
    jp_asyncio_loop.run_until_complete(km.shutdown_kernel(now=True))


async def test_a_kernel_without_the_package_still_runs_cells_and_says_why_history_is_missing(
    kernel: AsyncKernelManager,
) -> None:
    executor = KernelExecutor(kernel, "k", lambda: "import prime_agent_kernel_missing_xyz")
    first = await executor.execute("print(6 * 7)", lambda e: None, 30)
    second = await executor.execute("print(7 * 7)", lambda e: None, 30)
    await executor.close()

    assert first.status == "ok" and first.outputs[0]["text"] == "42\n"
    assert "could not be loaded" in first.note and "ModuleNotFoundError" in first.note
    assert second.note == ""  # said once, not on every cell


async def test_display_updates_and_clear_output_reach_the_cell_as_events(
    kernel: AsyncKernelManager,
) -> None:
    executor = KernelExecutor(kernel, "k")
    events: list[OutputEvent] = []
    code = (
        "from IPython.display import display, clear_output\n"
        "h = display('first', display_id=True)\n"
        "h.update('second')\n"
        "print('gone')\n"
        "clear_output(wait=True)\n"
        "print('kept')"
    )
    result = await executor.execute(code, events.append, 30)
    await executor.close()

    kinds = [e.kind for e in events]
    assert kinds == ["output", "update_display", "output", "clear", "output"]
    assert events[1].output is not None and events[1].output["data"]["text/plain"] == "'second'"
    assert [o.get("text") for o in result.outputs] == ["kept\n"]


async def test_executions_are_serialized_on_one_client(kernel: AsyncKernelManager) -> None:
    executor = KernelExecutor(kernel, "k")
    results = await asyncio.gather(
        *(
            executor.execute(f"import time; time.sleep(0.05); print({i})", lambda e: None, 30)
            for i in range(4)
        )
    )
    await executor.close()
    assert [r.outputs[0]["text"] for r in results] == ["0\n", "1\n", "2\n", "3\n"]
    assert [r.execution_count for r in results] == [1, 2, 3, 4]
