"""`rlm`: spawn sub-agents (each with its own notebook, kernel and session) and manage them.

part_a = await rlm("Summarise part A of report.txt", name="part-a")
await rlm.list_subagents()
await rlm.delete_subagent("part-a")
await rlm.usage()
"""

from __future__ import annotations

import html
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, fields
from typing import Any

from .operations import (
    DELETE_SUBAGENT,
    FIND_MODELS,
    LIST_SUBAGENTS,
    SPAWN_SUBAGENT,
    SUBAGENT_USAGE,
)

Call = Callable[[str, dict[str, Any]], Awaitable[Any]]


@dataclass(frozen=True)
class SubagentHandle:
    """What `rlm(...)` returns at admission: the sub-agent is working, its answer comes later
    as a message from it."""

    rlm_child_id: str
    name: str
    session_dir: str
    model: str
    notebook_path: str


@dataclass(frozen=True)
class Subagent:
    """One entry of `rlm.list_subagents()`."""

    rlm_child_id: str
    name: str
    session_dir: str
    notebook_path: str
    model: str
    status: str  # running, idle, inactive, replied, completed, error
    task: str = ""
    created: str = ""
    spawn_turn: int | None = None  # the parent's turn that spawned it
    usage: dict[str, int] = field(default_factory=dict)  # its own model calls
    usage_total: dict[str, int] = field(default_factory=dict)  # with its sub-agents'


@dataclass(frozen=True)
class AgentUsage:
    """What `rlm.usage()` returns: an agent's token usage and cost, its own model calls and, in
    the `_total` fields, with its sub-agents' (each in `children`, the same way)."""

    session_id: str
    name: str  # a sub-agent's name; empty for a root agent
    model: str
    status: str
    calls: int = 0  # its own model calls
    usage: dict[str, int] = field(default_factory=dict)
    usage_total: dict[str, int] = field(default_factory=dict)
    cost: float | None = None  # US dollars; None: a model without a known price answered
    cost_total: float | None = None
    notebook_path: str | None = None
    children: tuple[AgentUsage, ...] = ()

    def agents(self) -> list[AgentUsage]:
        """This agent and every agent below it, depth first."""
        found = [self]
        for child in self.children:
            found += child.agents()
        return found

    def table(self) -> str:
        """One line per agent of the tree: own and total tokens and cost."""
        lines = ["agent  status  calls  tokens in/out (total)  cost (total)"]
        self._lines(lines, 0)
        return "\n".join(lines)

    def _lines(self, lines: list[str], depth: int) -> None:
        who = self.name or self.notebook_path or self.session_id
        own, total = _tokens(self.usage), _tokens(self.usage_total)
        lines.append(
            f"{'  ' * depth}{who}  {self.status}  {self.calls}  {own} ({total})  "
            f"{_dollars(self.cost)} ({_dollars(self.cost_total)})"
        )
        for child in self.children:
            child._lines(lines, depth + 1)

    def __str__(self) -> str:
        return self.table()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.table())


def _tokens(usage: dict[str, int]) -> str:
    read = sum(usage.get(k, 0) for k in ("input_tokens", "cache_read_tokens", "cache_write_tokens"))
    return f"{read:,}/{usage.get('output_tokens', 0):,}"


def _dollars(cost: float | None) -> str:
    return "unknown" if cost is None else f"${cost:.4f}"


def _agent_usage(data: dict[str, Any]) -> AgentUsage:
    children = tuple(_agent_usage(child) for child in data.get("children") or ())
    usage: AgentUsage = _build(AgentUsage, {**data, "children": children})
    return usage


def _build(cls: type, data: dict[str, Any]) -> Any:
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in names})


def _child_ref(child: Any) -> str:
    if isinstance(child, SubagentHandle | Subagent):
        return child.rlm_child_id
    if isinstance(child, dict):
        return str(child.get("rlm_child_id") or child.get("name") or "")
    if isinstance(child, str):
        return child
    raise TypeError("name the sub-agent by its handle, a list_subagents() entry, its id or name")


class RLM:
    """Bound as `rlm` in an agent's kernel."""

    def __init__(
        self, call: Call, show: Callable[[str, str], None] | None = None, harness: Any = None
    ) -> None:
        self._call = call
        self._show = show
        self.harness = harness  # `rlm.harness` (prime_agent_kernel.harness.Harness)

    async def __call__(
        self, prompt: str, name: str | None = None, model: str | None = None
    ) -> SubagentHandle:
        """Start a sub-agent on `prompt`; returns at once with its handle."""
        answer = await self._call(SPAWN_SUBAGENT, {"prompt": prompt, "name": name, "model": model})
        handle: SubagentHandle = _build(SubagentHandle, answer)
        if self._show is not None:
            self._show(handle.name, str(answer.get("notebook_link") or handle.notebook_path))
        return handle

    async def list_subagents(self) -> list[Subagent]:
        """This agent's sub-agents with their status, oldest first."""
        return [_build(Subagent, entry) for entry in await self._call(LIST_SUBAGENTS, {})]

    async def delete_subagent(self, child: Any) -> dict[str, Any]:
        """Remove an idle sub-agent (by handle, entry, id or name); its notebook and transcript
        stay on disk. A running one is not deleted."""
        result: dict[str, Any] = await self._call(DELETE_SUBAGENT, {"child": _child_ref(child)})
        return result

    async def find_models(self, query: str = "") -> list[str]:
        """The models a sub-agent can run on, as `provider/model`."""
        result: list[str] = await self._call(FIND_MODELS, {"query": query})
        return result

    async def usage(self) -> AgentUsage:
        """Tokens and cost of this agent's model calls, own and with its sub-agents', for every
        agent of its tree (`.children`, `.agents()`; printed as a table)."""
        return _agent_usage(await self._call(SUBAGENT_USAGE, {}))

    def __repr__(self) -> str:
        return "rlm: await rlm(task, name=None, model=None) starts a sub-agent"


def show_link(name: str, link: str) -> None:
    """A link to the sub-agent's notebook in the spawning cell's output (and a line of text for
    the model, which reads text/plain)."""
    from IPython.display import display

    href = html.escape(link, quote=True)
    bundle = {
        "text/html": f'<p>Sub-agent <a href="{href}">{html.escape(name)}</a> started '
        f"({html.escape(link)})</p>",
        "text/plain": f"Sub-agent {name} started: {link}",
    }
    metadata = {"prime_agent": {"role": "subagent_link", "name": name, "path": link}}
    display(bundle, raw=True, metadata=metadata)
