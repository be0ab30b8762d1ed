"""Prime Agent Lab's in-kernel package.

The host loads it into an agent's kernel and calls `configure(...)`; it binds the kernel API
names (`history`, `agent_message`, `agent_observe`, `rlm`, `compact`, `refine`,
`rlm_heartbeat`, `goal`, `mcp`) into the user namespace. It never imports the host package:
everything goes over the bridge.

Importing the package loads none of the kernel API (the host imports the declarations of the
bridge operations, `prime_agent_kernel.operations`, and nothing more): its classes and the bridge
client load when the names are bound, or when one of the package's names below is first used.
"""

from __future__ import annotations

import importlib
import secrets
from typing import TYPE_CHECKING, Any

from .version import __version__

PROCESS_TOKEN = secrets.token_hex(16)
"""Made once per kernel process, as the package is imported: a host that cannot see the
process (a kernel on a Jupyter gateway) reads it with each agent cell and knows that a different
token means a new process, whoever restarted it (prime_agent_lab/adapters/kernel_process.py)."""

if TYPE_CHECKING:
    from .bridge import BridgeClient, BridgeError
    from .compact import Compact
    from .goal import Goal
    from .harness import Harness, HarnessEntry, HarnessError
    from .heartbeat import Heartbeat
    from .history import Entry, History
    from .mcp import Mcp, McpError, McpImage, McpToolError
    from .messaging import AgentMessage, AgentObserve, Record
    from .refine import Refine
    from .rlm import RLM, AgentUsage, Subagent, SubagentHandle

_EXPORTS = {
    "BridgeClient": ".bridge",
    "BridgeError": ".bridge",
    "Compact": ".compact",
    "Heartbeat": ".heartbeat",
    "Goal": ".goal",
    "Harness": ".harness",
    "HarnessEntry": ".harness",
    "HarnessError": ".harness",
    "Entry": ".history",
    "History": ".history",
    "Mcp": ".mcp",
    "McpError": ".mcp",
    "McpImage": ".mcp",
    "McpToolError": ".mcp",
    "AgentMessage": ".messaging",
    "AgentObserve": ".messaging",
    "Record": ".messaging",
    "Refine": ".refine",
    "RLM": ".rlm",
    "AgentUsage": ".rlm",
    "Subagent": ".rlm",
    "SubagentHandle": ".rlm",
}


def __getattr__(name: str) -> Any:
    """The kernel API's classes, loaded on first use (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "RLM",
    "AgentMessage",
    "AgentObserve",
    "AgentUsage",
    "BridgeClient",
    "BridgeError",
    "Compact",
    "Entry",
    "Goal",
    "Harness",
    "HarnessEntry",
    "HarnessError",
    "Heartbeat",
    "History",
    "Mcp",
    "McpError",
    "McpImage",
    "McpToolError",
    "Record",
    "Refine",
    "Subagent",
    "SubagentHandle",
    "__version__",
    "configure",
    "load_ipython_extension",
    "restore_snapshot",
]

BOUND_NAMES = (
    "history",
    "agent_history",
    "agent_message",
    "agent_observe",
    "rlm",
    "compact",
    "refine",
    "goal",
    "rlm_heartbeat",
    "mcp",
)
"""Every name the package binds (or will bind) in the user namespace: kernel snapshots never
save them. A new bound name goes here too (tests/test_snapshots.py checks `_bind_names`)."""

_client: BridgeClient | None = None


def client() -> BridgeClient:
    from .bridge import BridgeError

    if _client is None:
        raise BridgeError(
            "this kernel is not attached to a Prime Agent Lab agent yet; attach one from the "
            "Prime Agent panel"
        )
    return _client


def _fetch_history(since: str | None) -> dict[str, Any]:
    from .operations import READ_HISTORY

    answer: dict[str, Any] = _sync_call(READ_HISTORY, {"since": since})
    return answer


async def _call(op: str, payload: dict[str, Any]) -> Any:
    """Make a declared bridge operation with its declared arguments (operations.py)."""
    from .operations import check_call

    check_call(op, payload)
    return await client().acall(op, payload)


def _sync_call(op: str, payload: dict[str, Any]) -> Any:
    from .operations import check_call

    check_call(op, payload)
    return client().call(op, payload)


def _kernel_key(shell: Any) -> bytes:
    return bytes(shell.kernel.session.key)


def _bind_names(shell: Any) -> None:
    """Bind the kernel API names; a user's own variable of the same name is left alone
    (`history` is also `agent_history`, as researchers often have a `history` of their own)."""
    from .compact import Compact, track
    from .goal import Goal
    from .harness import Harness
    from .heartbeat import Heartbeat
    from .history import History
    from .mcp import Mcp
    from .messaging import AgentMessage, AgentObserve
    from .refine import Refine
    from .rlm import RLM, show_link

    record = History(_fetch_history)
    names: dict[str, Any] = {"agent_history": record}
    ours: dict[str, Any] = {
        "history": record,
        "agent_message": AgentMessage(_call),
        "agent_observe": AgentObserve(_call),
        "rlm": RLM(_call, show_link, harness=Harness(_sync_call)),
        "compact": Compact(_call),
        "refine": Refine(_call),
        "rlm_heartbeat": Heartbeat(_call),
        "goal": Goal(_call),
        "mcp": Mcp(_call),
    }
    for name, value in ours.items():
        existing = shell.user_ns.get(name)
        if existing is None or isinstance(existing, type(value)):
            names[name] = value
    shell.push(names, interactive=False)
    track(shell)  # which cell last set each name (the kernel clean-up spares the user's)


def configure(
    bridge_url: str, kernel_id: str, shell: Any = None, *, secret: bytes | None = None
) -> None:
    """Point the bridge at the host and bind the kernel API names (idempotent). Calls are signed
    with `secret`, the per-kernel secret a host hands over when it does not hold the kernel's
    connection key (a gateway's kernel: `prime_agent_kernel.secret`); None: with that key."""
    from .bridge import BridgeClient
    from .harness import install_finder, watch_skill_modules
    from .interrupts import install as install_interrupts

    global _client
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    key = secret if secret is not None else _kernel_key(shell)
    _client = BridgeClient(bridge_url, kernel_id, key)
    install_finder(_sync_call)  # skill modules import from the harness stores
    watch_skill_modules(shell)  # and are reloaded when another writer replaces them
    install_interrupts(shell)  # Stop ends the agent's cells that await and block
    _bind_names(shell)


def load_ipython_extension(shell: Any) -> None:
    """`%load_ext prime_agent_kernel`: binds the names; `configure` connects them to a host."""
    _bind_names(shell)


def restore_snapshot(
    directory: str | None = None, overwrite: bool = False, previous: bool = False
) -> dict[str, Any]:
    """Bring a kernel snapshot back by hand (after a restart from the Kernel menu, which the
    agent never restores over). Without `directory`: this kernel's agent session's own snapshot,
    which the host offers over the bridge once it checked it was signed here (any kernel, one on
    a gateway included); with it: the snapshot in that folder, which this kernel must be able to
    read, unchecked (your choice, docs/trust.md). Names the kernel holds now are kept unless
    `overwrite`; `previous`: the snapshot before the latest. The report says what came back."""
    if directory is None:
        from .snapshot_transfer import restore_from_host

        return restore_from_host(overwrite=overwrite, previous=previous)
    from .snapshot import restore

    return restore(directory, overwrite=overwrite, previous=previous)
