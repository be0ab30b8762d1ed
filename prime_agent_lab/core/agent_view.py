"""What the harness's own helpers (compaction, the kernel clean-up) see of an agent.

A protocol rather than `Agent` itself, so the loop can own those helpers without the helpers
importing the loop back.
"""

from __future__ import annotations

from typing import Protocol

from .events import EventBus
from .messages import ModelRequest, ModelResponse
from .ports import KernelPort, ModelProvider
from .redaction import Redactor
from .sessions import SessionLog
from .settings import Settings


class AgentView(Protocol):
    session: SessionLog
    provider: ModelProvider
    kernel: KernelPort
    events: EventBus
    current_turn: int | None
    redactor: Redactor

    @property
    def config(self) -> Settings: ...

    @property
    def session_id(self) -> str: ...

    @property
    def running(self) -> bool: ...

    @property
    def system_prompt(self) -> str: ...

    def notice(self, kind: str, text: str, turn: int | None = None) -> None: ...

    async def side_call(self, turn: int, request: ModelRequest) -> ModelResponse: ...
