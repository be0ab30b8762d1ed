"""The kernel package interrupts the agent's own cells that await and block; the user's cells keep
ipykernel's handling (`prime_agent_kernel.interrupts`)."""

from __future__ import annotations

from typing import Any

import pytest
from jupyter_client.manager import AsyncKernelManager
from prime_agent_kernel.interrupts import AGENT_CELL_KEY

from prime_agent_lab.adapters.kernel_executor import AGENT_CELL_METADATA, KernelExecutor

from .test_kernel_executor import UserClient

INSTALL = "import prime_agent_kernel.interrupts as _i\n_i.install(get_ipython())\ndel _i\n"
HANDLER = (
    "import asyncio, signal\nawait asyncio.sleep(0)\n"
    "print(getattr(signal.getsignal(signal.SIGINT), '__qualname__', '?'))"
)


def test_the_host_marks_agent_cells_the_way_the_kernel_package_reads_them() -> None:
    assert {AGENT_CELL_KEY: True} == AGENT_CELL_METADATA


def _text(result: Any) -> str:
    return "".join(o.get("text", "") for o in result.outputs).strip()


async def test_only_the_agent_s_own_cells_get_the_interrupt_handler(
    kernel: AsyncKernelManager,
) -> None:
    executor = KernelExecutor(kernel, "k", setup_code=lambda: INSTALL)
    user_output: list[dict[str, Any]] = []
    async with UserClient(kernel) as user:
        agents = await executor.execute(HANDLER, lambda e: None, 30)
        users = await user.client.execute_interactive(
            HANDLER, output_hook=user_output.append, timeout=30
        )
        after = await executor.execute(
            "import signal\nprint(signal.getsignal(signal.SIGINT).__qualname__)",
            lambda e: None,
            30,
        )
    await executor.close()
    assert _text(agents) == "AgentCellInterrupts._on_sigint"
    assert users["content"]["status"] == "ok"
    shown = "".join(m["content"].get("text", "") for m in user_output)
    assert "handle_sigint" in shown  # ipykernel's own, untouched
    assert _text(after) == "default_int_handler"  # put back when the cell ended


@pytest.mark.parametrize(
    "code",
    [
        "import asyncio, time\nawait asyncio.sleep(0)\ntime.sleep(60)",
        "import asyncio, time\ntime.sleep(60)\nawait asyncio.sleep(0)",
        "import time\nasync def slow():\n    time.sleep(60)\nawait slow()",
        "import asyncio\nawait asyncio.sleep(600)",
        "import asyncio, time\nawait asyncio.to_thread(time.sleep, 5)",
    ],
    ids=["await_then_block", "block_then_await", "blocking_coroutine", "long_await", "thread"],
)
async def test_an_agent_cell_that_awaits_and_blocks_is_interrupted_at_its_time_limit(
    kernel: AsyncKernelManager, code: str
) -> None:
    executor = KernelExecutor(kernel, "k", setup_code=lambda: INSTALL)
    await executor.execute("kept = 42", lambda e: None, 30)
    result = await executor.execute(code, lambda e: None, 1.0)
    check = await executor.execute("print(kept)", lambda e: None, 30)
    await executor.close()
    assert result.status == "timeout" and executor.restarts == 0, result.note
    assert "interrupted" in result.note and "intact" in result.note
    error = next(o for o in result.outputs if o["output_type"] == "error")
    assert error["ename"] in ("KeyboardInterrupt", "CancelledError")
    assert _text(check) == "42"
