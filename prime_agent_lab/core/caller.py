"""Who is calling over the bridge, as the operations see it: the calling agent and the runtime
that runs it, derived from the verified kernel (never from the payload).

Operation modules (`rlm_ops`, `message_ops`) and the mailbox see the runtime through the
`TreeRuntime` protocol, so none of them imports the runtime module.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from .agent import Agent
from .family import Family
from .sessions import SessionLog, SessionRepository
from .stop_cause import StopCause
from .trust import Signer


class TreeRuntime(Protocol):
    """What operations and the mailbox use of the agent-tree runtime (`AgentRuntime`)."""

    agents: dict[str, Agent]
    family: Family
    repository: SessionRepository
    settings: Any
    environment: Any
    mailbox: Any
    scheduler: Any
    harnesses: Any
    goals: Any  # core/goals.py `Goals`
    autonomy: Any  # core/autonomy.py `Autonomy`
    mcp: Any  # core/mcp_ops.py `McpAccess`
    signer: Signer

    async def spawn_child(
        self, parent: Agent, task: object, name: object = None, model: object = None
    ) -> dict[str, Any]: ...

    def list_children(self, parent_id: str) -> list[dict[str, Any]]: ...

    def child_status(self, child_id: str) -> str: ...

    async def delete_child(self, parent: Agent, ref: object) -> dict[str, Any]: ...

    async def ensure_loaded(self, session_id: str) -> Agent: ...

    def spawn(self, awaitable: Awaitable[Any]) -> None: ...

    def session_of(self, session_id: str) -> SessionLog | None: ...

    def tree_usage(self, session_id: str) -> dict[str, int]: ...

    def descendants(self, session_id: str) -> list[str]: ...

    async def stop_subtree(
        self, session_id: str, cause: StopCause = ..., *, with_root: bool = True
    ) -> list[str]: ...


@dataclass(frozen=True)
class CallerContext:
    runtime: TreeRuntime
    agent: Agent
    kernel_id: str

    @property
    def session(self) -> SessionLog:
        return self.agent.session


Operation = Callable[[CallerContext, dict[str, Any]], Awaitable[Any]]
Register = Callable[[str, Operation], None]
"""`AgentRuntime.operation`: offers an operation to agent kernels; a FamilyError it raises
becomes a bridge error with the same status and message."""
