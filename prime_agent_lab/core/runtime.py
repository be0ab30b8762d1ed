"""The agent-tree runtime: creates, tracks and routes agents, for the server and the CLI alike.

A host (the Jupyter server extension, or the headless CLI) supplies an `AgentEnvironment`: how to
make a model provider, the notebook of a new child, a kernel for it, and the key that proves a
kernel's bridge calls. Everything else lives here once: which agent is on which kernel, the bridge
and the caller context of its operations, the loop's hooks, crash recovery when a session is
opened, and (in `family.py`, `mailbox.py`) the tree of agents and the messages between them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .agent import Agent, AgentConfig, AgentHooks, TurnOutcome
from .bridge import BridgeError, BridgeService, Caller
from .bridge_ops import register_session_operations
from .events import EventBus
from .family import Family, FamilyError, Member
from .mailbox import Mailbox
from .message_ops import register_message_operations
from .ports import KernelPort, ModelProvider, NotebookPort
from .recovery import close_interrupted_turn
from .sessions import SessionLog, SessionRepository

log = logging.getLogger(__name__)


class AgentEnvironment(Protocol):
    """What a host supplies to the runtime."""

    def provider(self, model: str | None) -> ModelProvider:
        """A provider for `model` (`provider/model`, a bare model name, or None: the default).
        Raises ValueError for a model no configured provider serves."""
        ...

    def kernel_key(self, kernel_id: str) -> bytes | None:
        """The signing key of a kernel this host runs (None: not one of ours)."""
        ...

    async def create_child_notebook(self, path: str, cells: list[dict[str, Any]]) -> NotebookPort:
        """Create the notebook `path` (relative, posix) holding `cells`, and open it."""
        ...

    async def start_child_kernel(self, notebook_path: str, cwd: str) -> KernelPort:
        """A kernel of its own for a child's notebook, working in `cwd` (relative, posix)."""
        ...

    async def release_kernel(self, kernel: KernelPort) -> None:
        """Shut down a kernel the runtime asked for (a deleted child, shutdown)."""
        ...


@dataclass(frozen=True)
class RuntimeSettings:
    agent: AgentConfig
    max_depth: int = 1  # 1: roots spawn children, children do not spawn
    message_max_bytes: int = 16 * 1024  # one agent message, after stripping
    message_max_pending: int = 20  # messages waiting for one target
    message_rate_per_second: float = 3.0  # per sender->target pair (a token bucket)
    message_rate_burst: int = 3


@dataclass(frozen=True)
class CallerContext:
    """Who is calling over the bridge, derived from the verified kernel, never the payload."""

    runtime: AgentRuntime
    agent: Agent
    kernel_id: str

    @property
    def session(self) -> SessionLog:
        return self.agent.session


Operation = Callable[[CallerContext, dict[str, Any]], Awaitable[Any]]


class AgentRuntime:
    def __init__(
        self,
        repository: SessionRepository,
        environment: AgentEnvironment,
        settings: RuntimeSettings,
    ) -> None:
        self.repository = repository
        self.environment = environment
        self.settings = settings
        self.agents: dict[str, Agent] = {}
        self.family = Family(repository)
        self._kernel_session: dict[str, str] = {}  # kernel id -> session id
        self._background: set[asyncio.Future[Any]] = set()
        self.bridge = BridgeService(environment.kernel_key, self._kernel_session.get)
        register_session_operations(self.bridge, self.context)
        self.mailbox = Mailbox(self)
        register_message_operations(self)

    # ------------------------------------------------------------ sessions and agents

    def create_session(
        self, notebook_path: str, provider: ModelProvider, **family: Any
    ) -> SessionLog:
        """A new session; `family` (parent_session_id, name, depth, task, ...) makes it a
        sub-agent's."""
        session = self.repository.create(
            notebook_path=notebook_path, provider=provider.name, model=provider.model, **family
        )
        self.family.add(
            Member(
                session_id=session.session_id,
                notebook_path=notebook_path,
                parent_session_id=family.get("parent_session_id"),
                name=family.get("name", ""),
                depth=family.get("depth", 0),
                task=family.get("task", ""),
                model=f"{provider.name}/{provider.model}",
                created=str(session.header.get("created", "")),
            )
        )
        return session

    async def ensure_loaded(self, session_id: str) -> Agent:
        """The agent of `session_id`, opened from disk when it is not loaded (a sub-agent after
        a server restart): its notebook, a kernel and its session come back."""
        agent = self.agents.get(session_id)
        if agent is not None:
            return agent
        raise FamilyError(409, f"agent {session_id} is not loaded")

    async def start_agent(
        self,
        session: SessionLog,
        provider: ModelProvider,
        notebook: NotebookPort,
        kernel: KernelPort,
        events: EventBus | None = None,
    ) -> tuple[Agent, int | None]:
        """An agent on `session`, registered and ready. A turn that a crash cut short is closed
        first (returned: its number, else None), so the model hears what really happened."""
        agent = Agent(
            session,
            provider,
            notebook,
            kernel,
            self.settings.agent,
            events or EventBus(session.session_id),
            hooks=self._hooks_for(session),
        )
        recovered = await close_interrupted_turn(
            session,
            notebook,
            output_cap=agent.config.output_cap,
            accepts_images=agent.config.accepts_images,
            redactor=agent.redactor,
        )
        self.agents[session.session_id] = agent
        if kernel.kernel_id:
            self.bind_kernel(agent, kernel)
        self.mailbox.agent_started(agent)
        return agent, recovered

    def _hooks_for(self, session: SessionLog) -> AgentHooks:
        return AgentHooks(
            inbox=self.mailbox.inbox_for(session.session_id), turn_ended=self._turn_ended
        )

    def _turn_ended(self, agent: Agent, outcome: TurnOutcome) -> None:
        """What follows a turn: the messages that waited for it to end start the next."""
        self.mailbox.turn_ended(agent)

    def agent(self, session_id: str) -> Agent | None:
        return self.agents.get(session_id)

    def agent_on_kernel(self, kernel_id: str) -> Agent | None:
        return self.agents.get(self._kernel_session.get(kernel_id, ""))

    def bind_kernel(self, agent: Agent, kernel: KernelPort) -> None:
        """Make `agent` the one agent of `kernel`: its bridge calls act as that agent."""
        current = agent.kernel.kernel_id if agent.kernel is not None else ""
        if current and current != kernel.kernel_id:
            self.unbind_kernel(current, agent)
        agent.kernel = kernel
        self._kernel_session[kernel.kernel_id] = agent.session_id

    def unbind_kernel(self, kernel_id: str, agent: Agent | None = None) -> None:
        """Forget who is on `kernel_id` (only if it is `agent`, when given)."""
        holder = self._kernel_session.get(kernel_id)
        if holder is not None and (agent is None or holder == agent.session_id):
            del self._kernel_session[kernel_id]

    def detach(self, agent: Agent) -> None:
        """Forget an idle agent; its session stays on disk and can be opened again."""
        if self.agents.get(agent.session_id) is agent:
            del self.agents[agent.session_id]
        if agent.kernel is not None and agent.kernel.kernel_id:
            self.unbind_kernel(agent.kernel.kernel_id, agent)
        agent.events.emit("status", status="inactive")
        self.spawn(close_provider(agent.provider))

    # ------------------------------------------------------------ the bridge

    def context(self, caller: Caller) -> CallerContext:
        agent = self.agents.get(caller.session_id)
        if agent is None:
            raise BridgeError(409, "the agent of this kernel is not loaded; attach it again")
        return CallerContext(self, agent, caller.kernel_id)

    def operation(self, name: str, handler: Operation) -> None:
        """Offer `handler` to agent kernels as bridge operation `name`."""

        async def call(caller: Caller, payload: dict[str, Any]) -> Any:
            return await handler(self.context(caller), payload)

        self.bridge.register(name, call)

    # ------------------------------------------------------------ lifetime

    def spawn(self, awaitable: Awaitable[Any]) -> None:
        """Run `awaitable` in the background, kept alive until it ends."""
        task = asyncio.ensure_future(awaitable)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def shutdown(self) -> None:
        self.mailbox.close()  # stopping a turn must not start one for a waiting message
        for agent in list(self.agents.values()):
            await agent.stop()
            await close_provider(agent.provider)
        self.agents.clear()


async def close_provider(provider: ModelProvider) -> None:
    """Providers with an SDK client hold HTTP connections; release them."""
    close = getattr(provider, "aclose", None)
    if close is not None:
        await close()


def notebook_directory(notebook_path: str) -> str:
    """The directory (relative, posix; "" for the root) a notebook sits in."""
    parent = Path(notebook_path).parent.as_posix()
    return "" if parent == "." else parent
