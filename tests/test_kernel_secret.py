"""The per-kernel secret of a kernel whose connection key the host does not hold (a gateway's),
handed over a one-shot comm at setup (`adapters/kernel_secret.py`, `prime_agent_kernel.secret`).
On a real local kernel: the gateway path itself is in tests/test_gateway.py."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import json
import queue
from typing import Any

import pytest
from jupyter_client.manager import AsyncKernelManager

from prime_agent_lab.adapters.kernel_executor import KernelExecutor
from prime_agent_lab.adapters.kernel_secret import (
    KEY_COMM_TARGET,
    KernelSetup,
    SecretNotTaken,
    draw_secret,
    hand_secret,
    secret_setup_code,
)
from prime_agent_lab.adapters.kernel_source import new_client

BRIDGE = "http://127.0.0.1:9/prime-agent/bridge"  # never called here
STEP_TIMEOUT = 120.0  # under pytest-timeout's 180 s, so a hang fails with the await it hung in

CHECK = """
import json as _json, prime_agent_kernel as _pak
_ip = get_ipython()
_sessions = _ip.history_manager.get_range(session=0, start=1, stop=None, raw=True, output=False)
_prime_agent_check = _json.dumps({
    "key": _pak.client()._key.hex(),
    "connection_key": _ip.kernel.session.key.hex(),
    "inputs": "\\n".join(_ip.user_ns.get("In", [])) + "\\n".join(c for _, _, c in _sessions),
    "target_left": "TARGET" in _ip.kernel.comm_manager.targets,
    "rlm": "rlm" in _ip.user_ns,
})
""".replace("TARGET", KEY_COMM_TARGET)


async def test_the_secret_arrives_by_comm_and_signs_the_bridge_and_is_in_no_history(
    kernel: AsyncKernelManager,
) -> None:
    secret = draw_secret()
    setup = KernelSetup(secret_setup_code(BRIDGE, "k"), secret)
    executor = KernelExecutor(kernel, "k", setup_code=lambda: setup)
    try:
        async with asyncio.timeout(STEP_TIMEOUT):  # a hang says where it waits
            await executor.execute("x = 1", lambda e: None, 30)  # an agent cell: in history
            reply = await executor.run_silently(CHECK, 30, {"seen": "_prime_agent_check"})
    finally:
        await executor.close()
    assert executor.setup_problem is None
    seen = json.loads(ast.literal_eval(reply["user_expressions"]["seen"]["data"]["text/plain"]))
    assert seen["key"] == secret.hex() != seen["connection_key"]
    assert "x = 1" in seen["inputs"]  # the history is really read
    assert secret.hex() not in seen["inputs"]
    assert seen["rlm"] and not seen["target_left"]  # the API is bound; the target is gone


class IopubLost:
    """A real client whose iopub subscription loses everything, as a gateway's can right after
    the kernel process was replaced: only the shell channel's replies reach the host."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def get_iopub_msg(self, timeout: float | None = None) -> dict[str, Any]:
        with contextlib.suppress(queue.Empty):
            while True:
                await self._client.get_iopub_msg(timeout=0)
        await asyncio.sleep(timeout or 0)
        raise queue.Empty


def as_subscribed(client: Any) -> Any:
    return client


async def test_the_kernels_answer_is_read_on_the_shell_channel_when_iopub_loses_it(
    kernel: AsyncKernelManager,
) -> None:
    secret = draw_secret()
    client: Any = await new_client(kernel)
    try:
        await client.wait_for_ready(timeout=STEP_TIMEOUT)
        setup = await client.execute_interactive(secret_setup_code(BRIDGE, "k"), silent=True)
        assert setup["content"]["status"] == "ok"
        async with asyncio.timeout(20):  # without the shell read it waits out its hour
            await hand_secret(IopubLost(client), secret, 3600, set(), lambda msg: None)
        bound = await client.execute_interactive(
            "",
            silent=True,
            user_expressions={"key": "__import__('prime_agent_kernel').client()._key.hex()"},
        )
    finally:
        client.stop_channels()
    key = bound["content"]["user_expressions"]["key"]["data"]["text/plain"]
    assert ast.literal_eval(key) == secret.hex()


@pytest.mark.parametrize("iopub", [as_subscribed, IopubLost], ids=["iopub read", "iopub lost"])
@pytest.mark.parametrize(
    ("setup_code", "secret", "said"),
    [
        (secret_setup_code(BRIDGE, "k"), b"short", "the secret must be 32 bytes, not 5"),
        ("", draw_secret(), "no such comm target"),  # a kernel without the package's target
    ],
    ids=["a secret of the wrong size", "no target"],
)
async def test_a_kernel_that_does_not_take_the_secret_is_told_without_the_secret(
    kernel: AsyncKernelManager, setup_code: str, secret: bytes, said: str, iopub: Any
) -> None:
    client: Any = await new_client(kernel)
    try:
        await client.wait_for_ready(timeout=STEP_TIMEOUT)
        if setup_code:
            reply = await client.execute_interactive(setup_code, silent=True, timeout=30)
            assert reply["content"]["status"] == "ok"
        with pytest.raises(SecretNotTaken) as refused:
            await hand_secret(iopub(client), secret, 30, set(), lambda msg: None)
    finally:
        client.stop_channels()
    assert said in str(refused.value)
    assert secret.hex() not in str(refused.value)
