"""Who is calling over the bridge, as the operations see it: the calling agent and the runtime
that runs it, derived from the verified kernel (never from the payload)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from .agent import Agent
from .sessions import SessionLog


class TreeRuntime(Protocol):
    """What bridge operations use of the agent-tree runtime."""

    environment: Any

    async def spawn_child(
        self, parent: Agent, task: object, name: object = None, model: object = None
    ) -> dict[str, Any]: ...

    def list_children(self, parent_id: str) -> list[dict[str, Any]]: ...

    async def delete_child(self, parent: Agent, ref: object) -> dict[str, Any]: ...


@dataclass(frozen=True)
class CallerContext:
    runtime: TreeRuntime
    agent: Agent
    kernel_id: str

    @property
    def session(self) -> SessionLog:
        return self.agent.session
