"""Bridge operations behind the kernel's `compact`: the context's status and a compaction on
request (both act on the calling agent, derived from the verified kernel)."""

from __future__ import annotations

from typing import Any

from prime_agent_kernel.operations import COMPACTION_STATUS, SCHEDULE_COMPACTION

from .bridge import BridgeError
from .caller import CallerContext, Register


def register_compact_operations(register: Register) -> None:
    """Offer the compaction's status and a compaction on request (`compact.status()`,
    `compact.run()`) through `register` (`AgentRuntime.operation`)."""

    async def status(ctx: CallerContext, payload: dict[str, Any]) -> dict[str, Any]:
        return ctx.agent.compactor.status()

    async def run(ctx: CallerContext, payload: dict[str, Any]) -> dict[str, Any]:
        instructions = payload.get("instructions")
        if instructions is not None and not isinstance(instructions, str):
            raise BridgeError(400, "instructions must be a string or None")
        return ctx.agent.compactor.schedule(instructions)

    register(COMPACTION_STATUS, status)
    register(SCHEDULE_COMPACTION, run)
