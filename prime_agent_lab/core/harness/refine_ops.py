"""Bridge operations behind the kernel's `refine`: schedule a refinement, its status, the
history and a rollback (all act on the calling agent, derived from the verified kernel)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from prime_agent_kernel.operations import (
    DELETE_ENTRY_BY_REFINEMENT,
    REFINEMENT_HISTORY,
    REFINEMENT_STATUS,
    ROLLBACK_REFINEMENT,
    SCHEDULE_REFINEMENT,
)

from ..bridge import BridgeError
from ..caller import CallerContext, Register
from .refiner import RefineError, Refiner


def register_refine_operations(
    register: Register, refiner_of: Callable[[str], Refiner | None]
) -> None:
    """Offer what `refine.run()`, `refine.status()`, `refine.history()` and
    `refine.rollback()` call, and a user's delete from a panel recorded as a refinement
    (`DELETE_ENTRY_BY_REFINEMENT`), through `register` (`AgentRuntime.operation`)."""

    def refiner(ctx: CallerContext) -> Refiner:
        found = refiner_of(ctx.agent.session_id)
        if found is None:
            raise BridgeError(409, "this agent cannot refine its harness (no refiner)")
        return found

    async def run(ctx: CallerContext, payload: dict[str, Any]) -> dict[str, Any]:
        instructions = payload.get("instructions")
        if instructions is not None and not isinstance(instructions, str):
            raise BridgeError(400, "instructions must be a string or None")
        global_ = payload.get("global", False)
        if not isinstance(global_, bool):
            raise BridgeError(400, "global_ must be True or False")
        with _errors():
            return refiner(ctx).schedule(instructions, global_=global_, trigger="agent")

    async def status(ctx: CallerContext, payload: dict[str, Any]) -> dict[str, Any]:
        return refiner(ctx).status()

    async def history(ctx: CallerContext, payload: dict[str, Any]) -> list[dict[str, Any]]:
        return refiner(ctx).history()

    async def rollback(ctx: CallerContext, payload: dict[str, Any]) -> dict[str, Any]:
        with _errors():
            return await refiner(ctx).rollback(payload.get("id"))

    async def delete(ctx: CallerContext, payload: dict[str, Any]) -> dict[str, Any]:
        kind, entry_id, global_ = payload.get("kind"), payload.get("id"), payload.get("global")
        if not isinstance(kind, str) or not isinstance(entry_id, str):
            raise BridgeError(400, "kind and id must be strings")
        if not isinstance(global_, bool):
            raise BridgeError(400, "global_ must be True or False")
        with _errors():
            return await refiner(ctx).delete(kind, entry_id, global_)

    register(SCHEDULE_REFINEMENT, run)
    register(REFINEMENT_STATUS, status)
    register(REFINEMENT_HISTORY, history)
    register(ROLLBACK_REFINEMENT, rollback)
    register(DELETE_ENTRY_BY_REFINEMENT, delete)


@contextmanager
def _errors() -> Iterator[None]:
    """A RefineError becomes a bridge error with its status and message."""
    try:
        yield
    except RefineError as exc:
        raise BridgeError(exc.status, exc.message) from None
