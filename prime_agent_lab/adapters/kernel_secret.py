"""The per-kernel secret, for a kernel whose connection key the host does not hold (a gateway's
kernel: `KernelSourceTraits.holds_connection_key` is false).

The secret is 32 random bytes drawn by the host for each setup of a kernel process, held only in
memory (`KernelFleet.key` answers it to the bridge, whose signature, replay and forgery checks
are the same for both key sources). It reaches the kernel on the kernel's own channel as the data
of a one-shot comm (`prime_agent_kernel.secret`), not as code: an execute request is stored in the
kernel's history when it is not silent, and a gateway relays and may log what it carries (docs/
gateway.md 1.3 measured the whole setup cell in the gateway's log). A comm is not executed and is
not broadcast to other clients; it is sent only during setup, when no agent cell awaits a reply,
so the bridge's no-comm rule for calls (docs/bridge.md) is not at stake.
"""

from __future__ import annotations

import queue
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

KEY_COMM_TARGET = "prime_agent.key"  # must match prime_agent_kernel.secret.KEY_COMM_TARGET
SECRET_BYTES = 32


@dataclass(frozen=True)
class KernelSetup:
    """What a new kernel process gets: a silent cell, and then the secret (None: the kernel
    signs with its connection key)."""

    code: str
    secret: bytes | None = field(default=None, repr=False)


class SecretNotTaken(RuntimeError):
    """The kernel did not take the secret; the message says why (never the secret)."""


def draw_secret() -> bytes:
    return secrets.token_bytes(SECRET_BYTES)


def secret_setup_code(bridge_url: str, kernel_id: str) -> str:
    """The silent cell for a kernel that signs with a per-kernel secret: it loads the package
    and waits for the secret's comm (`hand_secret`), which binds the kernel API."""
    return (
        "import prime_agent_kernel.secret as _prime_agent_secret\n"
        f"_prime_agent_secret.expect_secret({bridge_url!r}, {kernel_id!r})\n"
        "del _prime_agent_secret\n"
    )


async def hand_secret(
    client: Any,
    secret: bytes,
    timeout: float,
    own: set[str],
    observe: Callable[[dict[str, Any]], None],
) -> None:
    """Open the one-shot comm that carries `secret` and wait for the kernel to close it.

    Run on the agent's own client right after the setup cell's reply (the kernel handles shell
    messages in order, so the target exists by then). `own` marks the request as the agent's
    while it runs; `observe` sees every iopub message read here (the executor's view of who
    keeps the kernel busy). SecretNotTaken when the kernel refuses or does not answer.
    """
    comm_id = uuid.uuid4().hex
    content = {"comm_id": comm_id, "target_name": KEY_COMM_TARGET, "data": {"secret": secret.hex()}}
    msg = client.session.msg("comm_open", content)
    msg_id = str(msg["header"]["msg_id"])
    own.add(msg_id)
    try:
        client.shell_channel.send(msg)
        answer = await _comm_closed(client, comm_id, msg_id, timeout, observe)
    finally:
        own.discard(msg_id)
    if answer is None:
        raise SecretNotTaken("the kernel did not acknowledge the bridge secret")
    if not answer.get("ok"):
        raise SecretNotTaken(
            "the kernel did not take the bridge secret: "
            f"{answer.get('error') or 'no such comm target (is prime_agent_kernel installed?)'}"
        )


async def _comm_closed(
    client: Any,
    comm_id: str,
    msg_id: str,
    timeout: float,
    observe: Callable[[dict[str, Any]], None],
) -> dict[str, Any] | None:
    """The data of the kernel's comm_close for `comm_id`, read until the kernel is idle after the
    comm_open (so its status messages are read here, not taken later for another client's);
    None when it never closed the comm, or on timeout."""
    answer: dict[str, Any] | None = None
    idle = False
    deadline = time.monotonic() + timeout
    while not idle:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return answer
        try:
            msg = await client.get_iopub_msg(timeout=min(remaining, 1.0))
        except queue.Empty:
            continue
        observe(msg)
        kind = msg["header"]["msg_type"]
        content = msg.get("content") or {}
        if kind == "comm_close" and content.get("comm_id") == comm_id:
            answer = dict(content.get("data") or {})
        elif kind == "status" and msg["parent_header"].get("msg_id") == msg_id:
            idle = content.get("execution_state") == "idle"
    return answer
