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

import contextlib
import logging
import math
import queue
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..core.user_expressions import json_object

log = logging.getLogger(__name__)

KEY_COMM_TARGET = "prime_agent.key"  # must match prime_agent_kernel.secret.KEY_COMM_TARGET
SECRET_BYTES = 32
ANSWER = "prime_agent_secret_answer"
ANSWER_FUNCTION = "__import__('prime_agent_kernel.secret').secret.answer"
POLL = 0.05
IOPUB_GRACE = 1.0  # after the shell read's reply, seconds for iopub to bring the statuses


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
    """Open the one-shot comm that carries `secret` and read the kernel's answer.

    Run on the agent's own client right after the setup cell's reply (the kernel handles shell
    messages in order, so the target exists by then). A silent request sent right after the
    comm_open reads the answer back (`prime_agent_kernel.secret.answer`) on the shell channel:
    the comm_close on iopub is not enough, since a gateway's subscription to a kernel process
    that has just started can miss it (a setup then waited an hour for it). `own` marks both
    requests as the agent's while they run; `observe` sees every iopub message read here (the
    executor's view of who keeps the kernel busy). SecretNotTaken when the kernel refuses or
    does not answer.
    """
    comm_id = uuid.uuid4().hex
    content = {"comm_id": comm_id, "target_name": KEY_COMM_TARGET, "data": {"secret": secret.hex()}}
    msg = client.session.msg("comm_open", content)
    open_id = str(msg["header"]["msg_id"])
    own.add(open_id)
    try:
        client.shell_channel.send(msg)
        read_id = client.execute(
            "",
            silent=True,
            store_history=False,
            allow_stdin=False,
            user_expressions={ANSWER: f"{ANSWER_FUNCTION}({comm_id!r})"},
        )
        own.add(read_id)
        try:
            answer = await _answer(client, comm_id, read_id, timeout, observe)
        finally:
            own.discard(read_id)
    finally:
        own.discard(open_id)
    if answer is None:
        raise SecretNotTaken("the kernel did not acknowledge the bridge secret")
    if not answer.get("ok"):
        raise SecretNotTaken(
            "the kernel did not take the bridge secret: "
            f"{answer.get('error') or 'no such comm target (is prime_agent_kernel installed?)'}"
        )


async def _answer(
    client: Any,
    comm_id: str,
    read_id: str,
    timeout: float,
    observe: Callable[[dict[str, Any]], None],
) -> dict[str, Any] | None:
    """The kernel's answer to the comm `comm_id`: from the reply to `read_id` (its shell read),
    else from the comm_close on iopub; {} when the kernel took no comm of that id, None when no
    answer came within `timeout` (or none that a kernel package without `answer` can give).

    iopub is read until the read's `idle`, which follows everything of the comm (iopub is
    ordered), so their statuses are read here and not taken later for another client's; once
    the reply is in, iopub gets IOPUB_GRACE to catch up."""
    closed: dict[str, Any] | None = None
    reply: dict[str, Any] | None = None
    idle = False
    deadline = time.monotonic() + timeout
    settled = math.inf
    while True:
        now = time.monotonic()
        if now >= deadline or (reply is not None and (idle or now >= settled)):
            break
        if not idle:
            with contextlib.suppress(queue.Empty):
                msg = await client.get_iopub_msg(timeout=min(deadline - now, POLL))
                observe(msg)
                kind = msg["header"]["msg_type"]
                content = msg.get("content") or {}
                if kind == "comm_close" and content.get("comm_id") == comm_id:
                    closed = dict(content.get("data") or {})
                elif kind == "status" and msg["parent_header"].get("msg_id") == read_id:
                    idle = content.get("execution_state") == "idle"
        if reply is None:
            with contextlib.suppress(queue.Empty):
                msg = await client.get_shell_msg(timeout=POLL if idle else 0)
                if msg["parent_header"].get("msg_id") == read_id:
                    reply = dict(msg["content"])
                    settled = time.monotonic() + IOPUB_GRACE
    read = None if reply is None else json_object(reply, ANSWER)
    if read and closed is None:
        log.info("the kernel's answer to the bridge secret came on the shell channel only")
    return read if read is not None else closed
