"""Every bridge operation, declared once: its name on the wire, the arguments of its payload,
and the kernel call that makes it (or why no kernel call does).

Both sides use these declarations. The kernel package calls the host only with them (`_call` in
`__init__.py` refuses an undeclared operation or argument before anything is sent), and the
host registers its handlers under them (the runtime's `BridgeService(declared=OPERATIONS)`
refuses any other name). It imports nothing of either package, so the host's import is cheap.
tests/test_bridge_operations.py checks the rest: every declared operation has a handler, each
handler reads exactly the declared arguments, every call in the kernel package sends only
declared ones, and every operation a kernel call should make is made. docs/bridge.md's table
of operations is generated from here (`python -m prime_agent_kernel.operations --docs
docs/bridge.md`).

An operation is its wire name (a `str`), so it goes wherever a name goes. It is named after
what it does on the host; the kernel API names (`rlm`, `compact.run`, ...) are the user's and
do not change with it. Adding one: a line here, its handler on the host (a `core/*_ops.py`
module), its kernel call; then the docs table. A renamed operation needs no alias: the host and
the kernel ship together, and a kernel whose package does not match the host's (a gateway kernel
image that lags behind the server) is told apart by `WIRE_VERSION`, which the host's setup reads
and names in the chat and the model's observation when it differs from its own.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path


class Operation(str):
    """A bridge operation: the string is its wire name."""

    arguments: tuple[str, ...]  # the keys of its payload
    called_by: str  # the kernel API that makes it; "" for one only the host's own tools make
    result: str  # what it answers

    def __new__(
        cls, name: str, arguments: tuple[str, ...], called_by: str, result: str
    ) -> Operation:
        op = super().__new__(cls, name)
        op.arguments, op.called_by, op.result = arguments, called_by, result
        return op


OPERATIONS: dict[str, Operation] = {}


def _declare(name: str, arguments: tuple[str, ...], called_by: str, result: str) -> Operation:
    assert name not in OPERATIONS, f"bridge operation {name!r} is declared twice"
    OPERATIONS[name] = op = Operation(name, arguments, called_by, result)
    return op


# ------------------------------------------------------------------ the session
READ_HISTORY = _declare(
    "history.read",
    ("since",),
    "`history`",
    "the caller's own session record (the path to the leaf); with `since` (an entry id the "
    "kernel holds) only what follows it",
)
PING = _declare(
    "ping",
    ("delay", "echo"),
    "",
    "`{kernel_id, session_id, echo}` as the host sees the caller, after `delay` seconds (0 to "
    "60): a health and latency probe for tests and tools",
)

# ------------------------------------------------------------------ sub-agents (`rlm`)
SPAWN_SUBAGENT = _declare(
    "subagents.spawn",
    ("prompt", "name", "model"),
    "`rlm(prompt, name=None, model=None)`",
    "the new sub-agent's handle, at once",
)
LIST_SUBAGENTS = _declare(
    "subagents.list", (), "`rlm.list_subagents()`", "the caller's sub-agents, oldest first"
)
DELETE_SUBAGENT = _declare(
    "subagents.delete", ("child",), "`rlm.delete_subagent(child)`", "what was deleted"
)
FIND_MODELS = _declare(
    "subagents.find_models",
    ("query",),
    "`rlm.find_models(query)`",
    "the `provider/model` names a sub-agent may run on",
)
SUBAGENT_USAGE = _declare(
    "subagents.usage",
    (),
    "`rlm.usage()`",
    "the caller's tokens and cost, own and with its sub-agents, per agent of its tree",
)

# ------------------------------------------------------------------ messages and the family
SEND_MESSAGE = _declare(
    "messages.send",
    ("message", "receiver_role", "receiver_name", "mode"),
    "`agent_message.send(...)`",
    "a receipt, or one per family member for `receiver_role: all`",
)
LIST_FAMILY = _declare(
    "family.list", (), "`agent_message.list_agents()`", "the family members the caller reaches"
)
DESCRIBE_AGENT = _declare(
    "family.describe",
    ("target",),
    "`agent_observe.get_agent(target)`",
    "one family member's state: status, task, model, turns, messages waiting, last answer",
)
RECENT_MESSAGES = _declare(
    "family.recent_messages",
    ("target", "limit"),
    "`agent_observe.recent_messages(target, limit)`",
    "a family member's newest messages, oldest first",
)

# ------------------------------------------------------------------ compaction (`compact`)
COMPACTION_STATUS = _declare(
    "compaction.status", (), "`compact.status()`", "tokens, window, percent, what is scheduled"
)
SCHEDULE_COMPACTION = _declare(
    "compaction.schedule",
    ("instructions",),
    "`compact.run(instructions)`",
    "whether a compaction is scheduled before the next model call",
)

# ------------------------------------------------------------------ goals (`goal`)
CREATE_GOAL = _declare(
    "goals.create",
    ("objective", "token_budget"),
    "`goal.create(objective, token_budget=None)`",
    "the new goal's state; refused while a goal is active, paused or budget-limited",
)
GET_GOAL = _declare(
    "goals.get",
    (),
    "`goal.get()`",
    "`{goal, remaining_tokens, completion_budget_report}` (goal None: no goal)",
)
COMPLETE_GOAL = _declare(
    "goals.complete",
    (),
    "`goal.complete()`",
    "the completed goal and its `completion_budget_report`",
)

# ------------------------------------------------------------------ the harness (`rlm.harness`)
CREATE_ENTRY = _declare(
    "harness.create",
    ("kind", "fields", "global", "source", "request"),
    "`rlm.harness.create_<kind>(...)`",
    "the new entry; `source` (agent or user) is told by `request`, the execute request of the "
    "cell that made the call, unless given",
)
UPDATE_ENTRY = _declare(
    "harness.update",
    ("kind", "id", "fields", "global", "source", "request"),
    "`rlm.harness.update_<kind>(...)`",
    "the entry as updated",
)
DELETE_ENTRY = _declare(
    "harness.delete",
    ("kind", "id", "global"),
    "`rlm.harness.delete_<kind>(...)`; the harness panel's Delete on a host without refinements",
    "the entry as it was",
)
GET_ENTRY = _declare("harness.get", ("kind", "id"), "`rlm.harness.get(kind, id)`", "the entry")
LIST_ENTRIES = _declare(
    "harness.list",
    ("kind",),
    "`rlm.harness.list(kind)`",
    "the entries of the stores that can be read, and why any other cannot",
)
SKILL_PATHS = _declare(
    "harness.skill_paths",
    (),
    "`import` of a skill module (the harness finder)",
    "where skill modules are imported from",
)
SKILL_SOURCE = _declare(
    "harness.skill_source",
    ("name",),
    "`import` of a skill module on a kernel that does not share the host's disk (the harness "
    "finder)",
    "`{source, sha256}` of the skill module `name` from the stores the host offers, or None",
)
HARNESS_STATE = _declare(
    "harness.state",
    (),
    "`rlm.harness.state()`",
    "both stores' entries, the refinement records and what could not be read",
)
WAIT_FOR_HARNESS_CHANGE = _declare(
    "harness.wait_for_change",
    ("stamp", "timeout"),
    "the harness panel",
    "the state once it differs from `stamp`, or after `timeout` seconds (25 at most)",
)

# ------------------------------------------------------------------ snapshots over the bridge
# For a kernel that does not share the host's disk (a gateway kernel): docs/gateway.md 2.3.
BEGIN_SNAPSHOT = _declare(
    "snapshot.begin",
    ("manifest",),
    "the host's snapshot of a kernel that does not share its disk",
    "an upload id, once the host checked the new manifest against its caps (before any byte "
    "moves); refused unless the host is taking this kernel's snapshot",
)
PUT_SNAPSHOT_CHUNK = _declare(
    "snapshot.put",
    ("upload", "file", "offset", "data"),
    "the host's snapshot of a kernel that does not share its disk",
    "the bytes of `file` written so far; `data` is base64 of at most 1 MiB, written at "
    "`offset` (the end of what came before), never past the file's declared size",
)
COMMIT_SNAPSHOT = _declare(
    "snapshot.commit",
    ("upload",),
    "the host's snapshot of a kernel that does not share its disk",
    "the files the host placed, once each matched its declared size and sha256 (the host then "
    "checks, signs and commits the manifest as for a local kernel)",
)
GET_SNAPSHOT_CHUNK = _declare(
    "snapshot.get",
    ("file", "offset", "size"),
    "the host's restore into a kernel that does not share its disk; "
    "`prime_agent_kernel.restore_snapshot()` there",
    "base64 of at most `size` bytes (1 MiB) of the signed manifest the host chose "
    "(`file: manifest`) or of a file it names, from `offset`",
)
OFFER_SNAPSHOT = _declare(
    "snapshot.offer",
    ("previous",),
    "`prime_agent_kernel.restore_snapshot()` (no folder)",
    "the caller's own session's snapshot signed by this host's user (the latest, or with "
    "`previous` the one before it), offered to restore: `{digest, previous, time, directory}`, "
    "`directory` only for a kernel that shares the host's disk (any other reads it with "
    "`snapshot.get`); `{refused}` when there is none or it is not signed here",
)

# ------------------------------------------------------------------ refinements (`refine`)
SCHEDULE_REFINEMENT = _declare(
    "refinement.schedule",
    ("instructions", "global"),
    "`refine.run(instructions, global_)`",
    "whether a refinement is planned (it applies at the next turn boundary)",
)
REFINEMENT_STATUS = _declare(
    "refinement.status", (), "`refine.status()`", "pending, in flight, waiting, rollbacks queued"
)
REFINEMENT_HISTORY = _declare(
    "refinement.history", (), "`refine.history()`", "every refinement record, oldest first"
)
ROLLBACK_REFINEMENT = _declare(
    "refinement.rollback",
    ("id",),
    "`refine.rollback(id)`; the harness panel's Rollback",
    "the rollback, applied now or queued for the next turn boundary",
)
DELETE_ENTRY_BY_REFINEMENT = _declare(
    "refinement.delete_entry",
    ("kind", "id", "global"),
    "the harness panel's Delete",
    "the delete, recorded as a refinement and applied at the next turn boundary",
)


# ------------------------------------------------------------------ heartbeats (`rlm_heartbeat`)
CREATE_HEARTBEAT = _declare(
    "heartbeats.create",
    ("instruction", "interval", "label", "delivery_mode"),
    "`rlm_heartbeat.create(instruction, interval, label, delivery_mode)`",
    "the new heartbeat (the agent's own), with its first run",
)
LIST_HEARTBEATS = _declare(
    "heartbeats.list",
    ("include_inactive",),
    "`rlm_heartbeat.list(include_inactive)`",
    "the session's jobs: the agent's own, and the user's and the terminal's read-only",
)
UPDATE_HEARTBEAT = _declare(
    "heartbeats.update",
    ("id", "instruction", "interval", "label", "delivery_mode", "status"),
    "`rlm_heartbeat.update(id, ...)`",
    "the heartbeat as changed (only the agent's own)",
)
DELETE_HEARTBEAT = _declare(
    "heartbeats.delete",
    ("id",),
    "`rlm_heartbeat.delete(id)`",
    "what was deleted (only the agent's own)",
)


# ------------------------------------------------------------------ MCP servers (`mcp`)
LIST_MCP_SERVERS = _declare(
    "mcp.list_servers",
    (),
    "`mcp.list_servers()`",
    "the MCP servers the caller's session may use: name, transport, state, where it came from",
)
LIST_MCP_TOOLS = _declare(
    "mcp.list_tools",
    ("server",),
    "`mcp.list_tools(server)`",
    "the server's tools: name, description, input schema",
)
CALL_MCP_TOOL = _declare(
    "mcp.call_tool",
    ("server", "tool", "arguments"),
    "`mcp.call_tool(server, tool, arguments=None)`",
    "`{structured, content, is_error, chars}`: the tool's result as the server gave it",
)
READ_MCP_RESOURCE = _declare(
    "mcp.read_resource",
    ("server", "uri"),
    "`mcp.read_resource(server, uri)`",
    "the resource's contents: text, or base64 blobs",
)


# ------------------------------------------------------------------ the wire version

PROTOCOL_VERSION = 1
"""Raised by hand when the bridge changes outside the table above: how a call is signed, framed
or answered, or what the host's setup hands the package (`configure`)."""


def _table_digest() -> str:
    table = sorted([str(op), *op.arguments] for op in OPERATIONS.values())
    return hashlib.sha256(json.dumps(table).encode()).hexdigest()[:8]


WIRE_VERSION = f"{PROTOCOL_VERSION}.{_table_digest()}"
"""What the host and the kernel package must share to talk over the bridge: the protocol, and
the declared operations with their arguments (any change to them makes a new wire version, with
nothing to remember)."""


def check_call(op: str, payload: dict[str, object]) -> Operation:
    """The declaration of `op`, once `payload` carries only its arguments; ValueError else."""
    declared = OPERATIONS.get(op)
    if declared is None:
        raise ValueError(
            f"bridge operation {op!r} is not declared in prime_agent_kernel/operations.py"
        )
    unknown = [k for k in payload if k not in declared.arguments]
    if unknown:
        takes = ", ".join(declared.arguments) or "no arguments"
        raise ValueError(f"bridge operation {op!r} takes {takes}, not {', '.join(unknown)}")
    return declared


# ------------------------------------------------------------------ the docs table

TABLE_START = (
    "<!-- bridge operations: generated by "
    "`python -m prime_agent_kernel.operations --docs docs/bridge.md` -->"
)
TABLE_END = "<!-- end of bridge operations -->"


def markdown_table() -> str:
    rows = [
        "| operation | arguments | called by | result |",
        "| --- | --- | --- | --- |",
    ]
    for op in OPERATIONS.values():
        arguments = ", ".join(f"`{a}`" for a in op.arguments) or "none"
        caller = op.called_by or "the host's own tools only"
        rows.append(f"| `{op}` | {arguments} | {caller} | {op.result} |")
    return "\n".join(rows)


def docs_with_table(text: str) -> str:
    """`text` with the table between its markers replaced by the current one."""
    start, end = text.index(TABLE_START), text.index(TABLE_END)
    return f"{text[: start + len(TABLE_START)]}\n{markdown_table()}\n{text[end:]}"


if __name__ == "__main__":
    if sys.argv[1:2] == ["--docs"] and len(sys.argv) == 3:
        path = Path(sys.argv[2])
        path.write_text(docs_with_table(path.read_text(encoding="utf-8")), encoding="utf-8")
    else:
        print(markdown_table())
