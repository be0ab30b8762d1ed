"""Every session entry type, declared once (docs/architecture.md, "Session entry types").

A type declares its fields, what the model reads of it (`seen`), how a summary renders it
(`summarised`), whether the kernel's `history` lists it, and its chat item (`chat`). The rest is
derived from this table and cannot drift from it:

- `SessionLog.append` refuses a type or a field not declared here and checks the declared ones;
  loading a log checks the declared fields of every entry (`problem`).
- The model's context (`sessions._ContextBuilder`) is made of the `seen` parts, and the token
  estimate (`tokens.entry_tokens`) is the estimate of exactly those parts.
- `compaction.render_entries`, `transcript.chat_transcript` and `transcript.history_records` read
  `summarised`, `chat` and `in_history`.
- `labextension/src/wire.ts` (`SessionEntryType`) and the fields table of docs/sessions.md are
  generated from it (`python -m prime_agent_lab.core.wire --ts`, `python -m
  prime_agent_lab.core.entry_types --docs`).

What the model reads (the rule every projection follows):
- Messages (`user_message`, `agent_message`, `assistant_message`, `tool_result`) as they are, and
  a compaction's summary where the compacted part was.
- A `notice` between turns is read with the next turn's message (`[notice] ...`). In a turn it is
  not: the cell that met the event says it in its own output. Notices for the user only
  (`wire.FOR_THE_USER_ONLY`) and those told as the sub-agent's message (`TOLD_AS_MESSAGES`) are
  never read as notices.
- `kernel_gc` is read at once (`[notice] ...`); a `refinement` at once in a turn, with the next
  turn's message between turns.
- "In a turn" means after a `user_message` and before its `turn_end` on the path, whether or not a
  compaction cut the turn's start away.
A summary (a compaction's, the refine planner's trajectory) renders what the model read of each
entry, plus `error` entries (where a turn broke off). Nothing else reaches the model.

Size: over 600 lines because it is one table (every entry type and notice kind, each with its
projections), and keeping every fact about an entry type here is what lets a new type touch one
core file; the machinery the table uses is in `core/entry_schema.py`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, Literal

from .entry_schema import (
    TURN,
    ChatContext,
    ChatItem,
    Entry,
    EntryType,
    Field,
    NoticeKindSpec,
    Seen,
    UndeclaredEntry,
    always,
    before_next_turn,
    code_of,
    compaction_text,
    cut_for_summary,
    docs_with_table,
    fields_problem,
    has_text_fields,
    new_entry_problem,
    notice_item,
    notice_text,
    now,
    summary_message,
    text_of,
)
from .messages import ToolCall
from .permission_texts import PLAN_NOT_RUN_TEXT, PLAN_OBSERVATION
from .token_counts import counted

# ---------------------------------------------------------------- stop reasons and notice kinds

StopReason = Literal["end_turn", "stopped", "shutdown", "error", "max_iterations", "interrupted"]
"""Why a turn ended (`turn_end`). `stopped`: the user stopped it; `shutdown`: the server (or a
CLI run, by SIGTERM) was shut down while it ran, and stopped it; `interrupted`: the process ended
without stopping it (killed, crashed), and the turn was closed when its session was next opened."""

STOP_NOTICES: dict[StopReason, str] = {
    "stopped": "Stopped.",
    "shutdown": "Stopped: the server (or the CLI run) was shut down during this turn.",
    "interrupted": "Interrupted: the server stopped while this turn was running.",
    "max_iterations": "Stopped at the limit of model calls for one turn.",
}
"""The notice line the chat shows for a turn that ended this way (transcript item and panel)."""

NOTICE_KINDS: dict[str, NoticeKindSpec] = {
    "kernel_restarted": NoticeKindSpec(
        "the agent restarted the kernel (a stopped cell ignored the interrupt, a timeout)",
        warning=True,
    ),
    "kernel_restarted_externally": NoticeKindSpec(
        "the kernel was restarted from the Kernel menu or by another client", warning=True
    ),
    "kernel_died": NoticeKindSpec("the kernel died", warning=True),
    "kernel_package_problem": NoticeKindSpec(
        "the kernel has no `prime_agent_kernel` package, one of another version than the "
        "server's, or one that could not be loaded, so `rlm`, `history`, snapshots and "
        "sub-agents are unavailable or may fail; cells still run (the text names the versions "
        "and what to install; docs/gateway.md)",
        warning=True,
    ),
    "output_rate_limited": NoticeKindSpec(
        "part of a cell's output was dropped by the IOPub data rate limit of the Jupyter gateway "
        "or server between the kernel and the agent (the text names the setting that raises it "
        "and how to print less; adapters/output_rate_limit.py)",
        warning=True,
    ),
    "cell_restored": NoticeKindSpec(
        "the notebook was rewritten during the turn; its agent cells were written back"
    ),
    "child_completed": NoticeKindSpec(
        "a sub-agent ended its task without replying (the text has a preview of its last answer)",
        told_as_message=True,
    ),
    "child_error": NoticeKindSpec(
        "a sub-agent's task ended with an error", warning=True, told_as_message=True
    ),
    "child_stopped": NoticeKindSpec(
        "a sub-agent was stopped before it finished its task", told_as_message=True
    ),
    "message_undeliverable": NoticeKindSpec(
        "a queued message can never be delivered (its target was deleted)", warning=True
    ),
    "forked": NoticeKindSpec(
        "this session is a fork or clone of another and runs on a fresh kernel (the "
        "original's variables were not carried over; docs/branching.md)"
    ),
    "compacted": NoticeKindSpec(
        "the context was summarised (the text says from how many tokens to how many)"
    ),
    "compaction_failed": NoticeKindSpec(
        "a compaction failed and the turn went on uncompacted", warning=True
    ),
    "kernel_gc": NoticeKindSpec(
        "variables the agent no longer needs were deleted or replaced by a summary"
    ),
    "kernel_state_restored": NoticeKindSpec(
        "a kernel snapshot came back (the text lists what did and what did not)"
    ),
    "kernel_state_not_restored": NoticeKindSpec(
        "a snapshot exists but was not restored (the kernel holds the user's variables, was "
        "restarted from the Kernel menu, or the snapshot is unreadable; the text says how to "
        "restore it by hand)",
        warning=True,
    ),
    "session_untrusted": NoticeKindSpec(
        "the session's folder (or a sub-agent's) holds a snapshot, a local harness or queued "
        "mail this user did not sign, which was not loaded (the text lists it; the chat offers "
        "Trust and restore; docs/trust.md)",
        warning=True,
        for_the_user_only=True,
    ),
    "session_trusted": NoticeKindSpec(
        "the user trusted them and they now load", for_the_user_only=True
    ),
    "project_untrusted": NoticeKindSpec(
        "the project holds context files (AGENTS.md, ...) or a .mcp.json this user has not "
        "trusted, which are not used (the text lists them; /context has a Trust button for "
        "each; docs/project-context.md)",
        warning=True,
        for_the_user_only=True,
    ),
    "continuation": NoticeKindSpec(
        "the harness kept the turn going after the model answered (an active goal, an "
        "autonomous run's gate or budget); the text is the line the chat shows, the model "
        "reads the `continuation` entry's own text"
    ),
    "gate_passed": NoticeKindSpec(
        "a gate of an autonomous run passed (the line: command, exit status, time, output head)",
        for_the_user_only=True,
    ),
    "gate_failed": NoticeKindSpec(
        "a gate of an autonomous run failed, or was not re-run on an unchanged workspace (its "
        "output reaches the model in the continuation)",
        warning=True,
        for_the_user_only=True,
    ),
    "autonomy": NoticeKindSpec(
        "an autonomous run was turned on or off, started or ended (the end line says why, and "
        "the budgets it used)",
        for_the_user_only=True,
    ),
    "goal": NoticeKindSpec(
        "the goal changed: set, paused, resumed, complete, cleared, its budget reached, or "
        "stopped by an error (docs/autonomy.md); the text says which"
    ),
    "session_unreadable": NoticeKindSpec(
        "a newer session of this notebook is damaged and was skipped (the text names it and "
        "why), so this is another session",
        warning=True,
    ),
    "mcp_call": NoticeKindSpec(
        "a cell called an MCP server (`mcp_call`): server, tool or resource, time, result size",
        for_the_user_only=True,
    ),
    "mcp_call_failed": NoticeKindSpec(
        "a cell's MCP call failed, timed out or was cancelled (`mcp_call`); the text says why",
        warning=True,
        for_the_user_only=True,
    ),
    "turn_reverted": NoticeKindSpec(
        "the user reverted an agent turn or removed cells of it (the chat's line of a "
        "`turn_reverted` entry, which the model reads itself)"
    ),
    "plan_not_run": NoticeKindSpec(
        "plan mode: the code the model asked to run was not run (the chat's line of its "
        "`tool_result`, with the `code`)",
        for_the_user_only=True,
    ),
}
"""Every kind of notice: a `notice` entry's `kind`, and the notice lines other types make."""

NoticeKind = Literal[tuple(NOTICE_KINDS)]  # type: ignore[valid-type]  # the table's keys
"""Something the user must know that is not an error (`NOTICE_KINDS` says what each means)."""

FOR_THE_USER_ONLY = frozenset(k for k, n in NOTICE_KINDS.items() if n.for_the_user_only)
"""Notice kinds the model never reads (nor counts as context, nor summarises, nor finds in
`history`): what a folder from someone else holds is described with that someone's words
(variable names, message text), which must not reach the model as the user's own message."""

TOLD_AS_MESSAGES = frozenset(k for k, n in NOTICE_KINDS.items() if n.told_as_message)
"""Notice kinds the model reads as a message from the sub-agent (runtime `_tell`), not as a
notice of its own."""

WARNING_NOTICES = frozenset(k for k, n in NOTICE_KINDS.items() if n.warning)

_BLOB_NAME = re.compile(r"[0-9a-f]{64}\.[a-z0-9]{1,8}")
_ORIGIN_FIELDS = ("from_session_id", "from_name", "relationship", "composed")
TICK_FIELDS = ("schedule_id", "schedule_label", "schedule_owner", "schedule_kind", "scheduled_for")
"""The fields of a message a scheduled job's tick made (core/scheduler.py), not another agent."""
DOCS = Path(__file__).resolve().parents[2] / "docs" / "sessions.md"


def _summary_lines(entry: Entry, in_turn: bool) -> list[str]:
    """What the model read of an entry, as summary lines (notices, cleaned-up names, ...)."""
    lines: list[str] = []
    for part in DECLARED[entry["type"]].seen(entry, in_turn):
        text = part.text.strip() if part.when == "before_next_turn" else part.text
        if text.startswith("[notice] "):
            lines.append(f"[notice] {cut_for_summary(text.removeprefix('[notice] '))}")
        else:
            lines.append(f"[{part.role}] {cut_for_summary(text)}")
    return lines


# ---------------------------------------------------------------- user_message, agent_message


def _user_seen(entry: Entry, in_turn: bool) -> tuple[Seen, ...]:
    return (Seen("user", text_of(entry, "text"), when="opens_turn"),)


def _user_chat(entry: Entry, context: ChatContext) -> list[ChatItem]:
    origin = {k: entry[k] for k in (*_ORIGIN_FIELDS, *TICK_FIELDS) if isinstance(entry.get(k), str)}
    if isinstance(entry.get("notice"), str):
        origin["notice"] = entry["notice"]
    if entry.get("from_user") is True:  # the user's, from the chat's queue or a steer
        origin = {"mode": str(entry.get("mode", "follow_up"))}
    return [{"type": "user", "turn": entry.get("turn"), "text": entry["text"], **origin}]  # type: ignore[typeddict-item]


_TICK_LACKS = ("from_session_id", "relationship")  # a tick has no sending agent


def _agent_message_chat(entry: Entry, context: ChatContext) -> list[ChatItem]:
    if entry.get("from_user") is True:  # the user's steer: their message, where it entered
        return _user_chat(entry, context)
    item: dict[str, Any] = {
        "type": "agent_message",
        "turn": entry.get("turn"),
        "text": entry["text"],
        **{k: str(entry.get(k, "")) for k in _ORIGIN_FIELDS if k not in _TICK_LACKS},
        **{k: entry[k] for k in (*_TICK_LACKS, *TICK_FIELDS) if isinstance(entry.get(k), str)},
    }
    if isinstance(entry.get("notice"), str):
        item["notice"] = entry["notice"]
    return [item]  # type: ignore[list-item]


def _message_lines(entry: Entry, in_turn: bool) -> list[str]:
    return [f"[user] {cut_for_summary(text_of(entry, 'text'))}"]


_ORIGIN = {
    "message_id": Field(str, "the mailbox message it carries (another agent's, a tick, yours)"),
    "from_session_id": Field(str, "the sender's session"),
    "from_name": Field(str, "the sender's name"),
    "relationship": Field(str, "the sender: `parent`, `child` or `sibling`"),
    "composed": Field(str, "when the sender wrote it"),
    "mode": Field(str, "`auto`, `steer` or `follow_up`"),
    "notice": Field(str, "set when it only carries a sub-agent's notice to the model"),
    "schedule_id": Field(str, "a scheduled job's tick: the job (docs/autonomy.md)"),
    "schedule_label": Field(str, "the job's label"),
    "schedule_owner": Field(str, "whose job: `user`, `agent` or `cli`"),
    "schedule_kind": Field(str, "`every`, `cron`, `in` or `at`"),
    "scheduled_for": Field(str, "when the tick was due"),
    "from_user": Field(
        bool, "the user's own message from the chat: a steer, or a follow-up that waited queued"
    ),
}

USER_MESSAGE = EntryType(
    "user_message",
    "A message that starts a turn: the user's, or another agent's (a task, a message).",
    {"turn": TURN, "text": Field(str, "what the model reads", required=True), **_ORIGIN},
    {"turn": 1, "text": "Plot the data."},
    seen=_user_seen,
    summarised=_message_lines,
    chat=_user_chat,
    chat_items=("user",),
    in_history=always,
    turn="opens",
)

AGENT_MESSAGE = EntryType(
    "agent_message",
    "Another agent's message (or the user's steer: `from_user`), taken into a running turn "
    "between two model calls.",
    {"turn": TURN, "text": Field(str, "what the model reads", required=True), **_ORIGIN},
    {
        "turn": 1,
        "text": '[message from child "a"]\nDone.',
        "message_id": "m1",
        "from_session_id": "20260101-000000-abcdef",
        "from_name": "a",
        "relationship": "child",
        "composed": "2026-01-01T00:00:00.000+00:00",
        "mode": "auto",
    },
    seen=lambda entry, in_turn: now(text_of(entry, "text")),
    summarised=_message_lines,
    chat=_agent_message_chat,
    chat_items=("agent_message", "user"),
    in_history=always,
)


CONTINUATION = EntryType(
    "continuation",
    "The harness kept a turn going after the model answered without a cell (docs/autonomy.md): "
    "the model reads `text` at once, the chat shows `summary`.",
    {
        "turn": TURN,
        "text": Field(str, "what the model reads next", required=True),
        "reason": Field(str, "`goal`, `gate`, `autonomous` or `wrap_up`", required=True),
        "summary": Field(str, "the one line the chat shows", required=True),
    },
    {
        "turn": 2,
        "text": "[continuation] The goal is still active. Audit every requirement ...",
        "reason": "goal",
        "summary": "Continuing: the goal is not complete.",
    },
    seen=lambda entry, in_turn: now(text_of(entry, "text")),
    summarised=_message_lines,
    chat=lambda entry, context: notice_item(entry, "continuation", text_of(entry, "summary")),
    chat_items=("notice",),
    in_history=always,
)


# ---------------------------------------------------------------- gate_run, autonomy

AUTONOMY_REASONS = {
    "gates_passed": "gates passed",
    "goal_complete": "goal complete",
    "continuations_used": "continuations used",
    "retries_exhausted": "gate retries exhausted",
    "max_turns": "turn budget used",
    "max_tokens": "token budget used",
    "timeout": "timed out",
    "stopped": "stopped",
    "error": "error",
}
"""How an autonomous run ended (`run_end.reason` of the CLI), with its words in the chat."""


def duration_words(seconds: float) -> str:
    """`4.2 s`, `1 m 20 s`, `2 h 5 m`."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} m {rest} s"
    return f"{minutes // 60} h {minutes % 60} m"


def plural(count: object, word: str) -> str:
    """`1 turn`, `12 turns`."""
    return f"{count} {word}{'' if count == 1 else 's'}"


def gate_words(command: str) -> str:
    """A gate in a one-line view: in backticks, a multi-line one by its first line and `…`."""
    lines = command.strip().splitlines() or [""]
    return f"`{lines[0].rstrip()}{' …' if len(lines) > 1 else ''}`"


def gate_line(entry: Entry) -> str:
    """The chat line of a gate run: command, exit status, time and the output's first line."""
    command, attempt = gate_words(text_of(entry, "command")), entry.get("attempt")
    if entry.get("skipped_unchanged"):
        return (
            f"Gate {command} not re-run (attempt {attempt}): the workspace is unchanged since "
            "it failed."
        )
    status = entry.get("exit_status")
    how = "passed" if entry.get("passed") else "failed"
    exit_words = "killed at its timeout" if status is None else f"exit {status}"
    seconds = entry.get("seconds")
    took = f", {duration_words(seconds)}" if isinstance(seconds, float | int) else ""
    head = next((ln.strip() for ln in text_of(entry, "output").splitlines() if ln.strip()), "")
    return f"Gate {command} {how} ({exit_words}{took})" + (f": {head[:200]}" if head else "")


def autonomy_line(entry: Entry) -> str:
    """The chat line of an autonomy record: turned on or off, a run started or ended."""
    budgets = entry.get("budgets") if isinstance(entry.get("budgets"), dict) else {}
    gates = [str(g) for g in entry.get("gates") or []]
    limits = (
        f"{plural(budgets.get('max_turns'), 'turn')}, {budgets.get('max_tokens', 0):,} tokens, "
        f"{budgets.get('timeout_minutes')} min"
        + (f"; gates: {', '.join(gate_words(g) for g in gates)}" if gates else "; no gates")
    )
    event = entry.get("event")
    if event == "configured":
        return (
            f"Autonomous mode on ({limits})." if entry.get("enabled") else ("Autonomous mode off.")
        )
    if event == "started":
        return f"Autonomous run started ({limits})."
    used = entry.get("used") if isinstance(entry.get("used"), dict) else {}
    reason = AUTONOMY_REASONS.get(text_of(entry, "reason"), text_of(entry, "reason"))
    seconds, turns = used.get("seconds"), used.get("turns", 0)
    stopped = [str(name) for name in entry.get("stopped_sub_agents") or []]
    return (
        f"Autonomous run ended: {reason} after {plural(turns, 'turn')}, "
        f"{used.get('tokens', 0):,} tokens, "
        f"{duration_words(seconds if isinstance(seconds, float | int) else 0)}"
        + (f"; it stopped the sub-agents still working: {', '.join(stopped)}" if stopped else "")
    )


GATE_RUN = EntryType(
    "gate_run",
    "One run of a gate of an autonomous run (docs/autonomy.md); the model does not read it (the "
    "continuation carries a failed gate's output), the chat shows one line.",
    {
        "turn": TURN,
        "command": Field(str, "the gate as given (`pytest -q`, `py:assert x == 1`)", required=True),
        "kind": Field(str, "`shell` or `python`", required=True),
        "attempt": Field(int, "this gate's run in the autonomous run, from 1", required=True),
        "exit_status": Field(
            int, "0 passed; null: killed at its timeout or not run", nullable=True
        ),
        "passed": Field(bool, "whether it passed", required=True),
        "seconds": Field(float, "how long it ran"),
        "output": Field(str, "its output, cut to `gate_output_chars`"),
        "skipped_unchanged": Field(bool, "not re-run: the workspace is unchanged since it failed"),
    },
    {
        "turn": 2,
        "command": "pytest -q",
        "kind": "shell",
        "attempt": 1,
        "exit_status": 1,
        "passed": False,
        "seconds": 1.5,
        "output": "1 failed, 3 passed",
        "skipped_unchanged": False,
    },
    chat=lambda entry, context: notice_item(
        entry, "gate_passed" if entry.get("passed") else "gate_failed", gate_line(entry)
    ),
    chat_items=("notice",),
)

AUTONOMY = EntryType(
    "autonomy",
    "Autonomous mode turned on or off for the session (`configured`: the latest one on the path "
    "is its state), or a run of it `started` or `ended` (docs/autonomy.md). The model does not "
    "read it; the chat shows one line.",
    {
        "turn": TURN,
        "event": Field(str, "`configured`, `started` or `ended`", required=True),
        "enabled": Field(bool, "`configured`: whether autonomous mode is on"),
        "reason": Field(str, "`ended`: how (`gates_passed`, `max_turns`, ...)", nullable=True),
        "budgets": Field(dict, "`max_turns`, `max_tokens`, `timeout_minutes`, `continuations`"),
        "gates": Field(list, "the gates, in order"),
        "used": Field(dict, "`ended`: `turns`, `tokens`, `seconds`, `continuations` of the run"),
        "signature": Field(
            str, "`configured`: this user's signature of `enabled`, `budgets`, `gates`"
        ),
        "stopped_sub_agents": Field(list, "`ended`: the sub-agents still working it stopped"),
    },
    {
        "turn": 3,
        "event": "ended",
        "reason": "gates_passed",
        "budgets": {
            "max_turns": 12,
            "max_tokens": 80000,
            "timeout_minutes": 30,
            "continuations": 3,
        },
        "gates": ["pytest -q"],
        "used": {"turns": 3, "tokens": 12345, "seconds": 80.0, "continuations": 1},
    },
    chat=lambda entry, context: notice_item(entry, "autonomy", autonomy_line(entry)),
    chat_items=("notice",),
)


# ---------------------------------------------------------------- assistant_message, tool_result


def _tool_calls(entry: Entry) -> tuple[ToolCall, ...]:
    return tuple(
        ToolCall(id=c["id"], name=c["name"], arguments=c["arguments"])
        for c in entry.get("tool_calls", [])
    )


def _assistant_lines(entry: Entry, in_turn: bool) -> list[str]:
    lines = [f"[assistant] {cut_for_summary(str(entry['text']))}"] if entry.get("text") else []
    for call in entry.get("tool_calls", []):
        arguments = call.get("arguments", "")
        code = code_of(arguments)
        lines.append(f"[assistant ran a cell] {cut_for_summary(code or str(arguments))}")
    return lines


def _assistant_chat(entry: Entry, context: ChatContext) -> list[ChatItem]:
    for call in entry.get("tool_calls", []):
        context.code_by_call[call.get("id", "")] = code_of(call.get("arguments", ""))
    if not entry.get("text"):
        return []
    item: dict[str, Any] = {"type": "assistant", "turn": entry.get("turn"), "text": entry["text"]}
    usage = entry.get("usage")
    if isinstance(usage, dict):  # the answer's footer (docs/pairing.md, "Model and cost")
        provider, model = str(entry.get("provider") or ""), str(entry.get("model") or "")
        price = context.price
        item.update(
            usage=counted(usage)[0],  # its token figures (core/token_counts.py), as live
            provider=provider,
            model=model,
            cost=price(provider, model, usage) if price is not None else None,
        )
    return [item]  # type: ignore[list-item]


def _tool_calls_shape(entry: Entry) -> str | None:
    calls = entry.get("tool_calls", [])
    if not all(has_text_fields(c, ("id", "name", "arguments")) for c in calls):
        return "malformed tool_calls"
    return None


def _is_image(image: Any) -> bool:
    """Inline (version 1) or a blob named by its hash (version 2; never a path)."""
    if has_text_fields(image, ("media_type", "data_base64")):
        return True
    return has_text_fields(image, ("media_type", "blob")) and bool(
        _BLOB_NAME.fullmatch(image["blob"])
    )


def _images_shape(entry: Entry) -> str | None:
    return None if all(_is_image(i) for i in entry.get("images", [])) else "malformed images"


def _plan_not_run(entry: Entry, context: ChatContext) -> list[ChatItem]:
    """A call plan mode refused has no cell: its line says so and carries the code."""

    if entry.get("status") != "skipped" or entry.get("observation") != PLAN_OBSERVATION:
        return []
    item = notice_item(entry, "plan_not_run", PLAN_NOT_RUN_TEXT)[0]
    item["code"] = context.code_by_call.get(entry.get("tool_call_id", "")) or ""
    return [item]


def _cell_chat(entry: Entry, context: ChatContext) -> list[ChatItem]:
    if not entry.get("cell_id"):
        return _plan_not_run(entry, context)
    item: ChatItem = {
        "type": "cell",
        "turn": entry.get("turn"),  # type: ignore[typeddict-item]
        "cell_id": entry["cell_id"],
        "code": context.code_by_call.get(entry.get("tool_call_id", "")) or "",
        "status": entry.get("status"),  # type: ignore[typeddict-item]
        "execution_count": entry.get("execution_count"),
        "preview": entry.get("preview", ""),
    }
    if entry.get("status") == "skipped" and (
        context.decision_by_call.get(entry.get("tool_call_id", "")) == "skip"
    ):
        item["decision"] = "skip"
    return [item]


ASSISTANT_MESSAGE = EntryType(
    "assistant_message",
    "One model response: its text and the cells it asked to run.",
    {
        "turn": TURN,
        "text": Field(str, "the answer's text"),
        "tool_calls": Field(list, "`id`, `name`, raw `arguments` of each call"),
        "usage": Field(dict, "input, output, cache read/write tokens", nullable=True),
        "provider": Field(str, "the provider that answered"),
        "model": Field(str, "the model that answered"),
        "stop_reason": Field(str, "why the model stopped", nullable=True),
        "harness": Field(dict, "the harness version the prompt was built from"),
    },
    {
        "turn": 1,
        "text": "Plotting it.",
        "tool_calls": [{"id": "c1", "name": "python", "arguments": '{"code": "plot(x)"}'}],
        "usage": {"input_tokens": 900, "output_tokens": 30},
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
        "stop_reason": "tool_use",
    },
    seen=lambda entry, in_turn: (
        Seen("assistant", text_of(entry, "text"), tool_calls=_tool_calls(entry)),
    ),
    summarised=_assistant_lines,
    chat=_assistant_chat,
    chat_items=("assistant",),
    in_history=always,
    shape=_tool_calls_shape,
)

TOOL_RESULT = EntryType(
    "tool_result",
    "What one tool call gave the model: the cell's observation.",
    {
        "turn": TURN,
        "tool_call_id": Field(str, "the call it answers", required=True),
        "cell_id": Field(str, "the notebook cell (null: nothing ran)", nullable=True),
        "status": Field(
            str,
            "`ok`, `error`, `timeout`, `died`, `interrupted`, `aborted`, `invalid_arguments`, "
            "`skipped`",
            nullable=True,
        ),
        "execution_count": Field(int, "the cell's execution count", nullable=True),
        "observation": Field(str, "exactly what the model read"),
        "preview": Field(str, "one line for the chat"),
        "images": Field(list, "`{media_type, blob, bytes}` (`blobs/<sha256>.<ext>`)"),
    },
    {
        "turn": 1,
        "tool_call_id": "c1",
        "cell_id": "cell-1",
        "status": "ok",
        "execution_count": 3,
        "observation": "[stdout]\n42",
        "preview": "42",
    },
    seen=lambda entry, in_turn: (
        Seen(
            "tool",
            text_of(entry, "observation"),
            tool_call_id=str(entry.get("tool_call_id")),
            images=tuple(entry.get("images", [])),
        ),
    ),
    summarised=lambda entry, in_turn: [
        f"[cell output] {cut_for_summary(text_of(entry, 'observation'))}"
    ],
    chat=_cell_chat,
    chat_items=("cell", "notice"),
    in_history=always,
    shape=_images_shape,
)

CELL_STARTED = EntryType(
    "cell_started",
    "The agent's cell is in the notebook and about to run (a crash mid-cell is then told as "
    "a cell that ran partly).",
    {
        "turn": TURN,
        "tool_call_id": Field(str, "the call it runs", nullable=True),
        "cell_id": Field(str, "the notebook cell", nullable=True),
    },
    {"turn": 1, "tool_call_id": "c1", "cell_id": "cell-1"},
)


# ---------------------------------------------------------------- notices, errors, turn ends


def _notice_seen(entry: Entry, in_turn: bool) -> tuple[Seen, ...]:
    if in_turn or entry.get("kind") in TOLD_AS_MESSAGES | FOR_THE_USER_ONLY:
        return ()
    return before_next_turn(notice_text(entry))


NOTICE = EntryType(
    "notice",
    "Something the user must know that is not an error (a kernel restart, ...). The model "
    "reads one between turns with its next message; in a turn the cell's output says it.",
    {
        "turn": TURN,
        "kind": Field(str, "a `NoticeKind` (core/wire.py)"),
        "text": Field(str, "what the chat shows"),
    },
    {"kind": "kernel_restarted_externally", "text": "The kernel was restarted."},
    seen=_notice_seen,
    summarised=_summary_lines,
    chat=lambda entry, context: notice_item(
        entry, str(entry.get("kind", "")), text_of(entry, "text")
    ),
    chat_items=("notice",),
    in_history=lambda entry: entry.get("kind") not in FOR_THE_USER_ONLY,
)

ERROR = EntryType(
    "error",
    "Why a turn broke off. Not read by the model; a summary keeps it (where the work stopped).",
    {
        "turn": TURN,
        "message": Field(str, "what the chat shows"),
        "kind": Field(
            str, "`provider`, `kernel`, `notebook`, `tool_arguments`, `internal`, `disk`"
        ),
    },
    {"turn": 1, "message": "model call failed (overloaded): 529", "kind": "provider"},
    summarised=lambda entry, in_turn: [f"[error] {cut_for_summary(text_of(entry, 'message'))}"],
    chat=lambda entry, context: [
        {"type": "error", "turn": entry.get("turn"), "message": entry.get("message", "")}  # type: ignore[typeddict-item]
    ],
    chat_items=("error",),
    in_history=always,
)


def _turn_end_chat(entry: Entry, context: ChatContext) -> list[ChatItem]:
    reason = entry.get("stop_reason")
    if reason not in STOP_NOTICES:
        return []
    return [
        {
            "type": "notice",
            "turn": entry.get("turn"),
            "stop_reason": reason,
            "text": STOP_NOTICES[reason],
        }  # type: ignore[typeddict-item,index]
    ]


TURN_END = EntryType(
    "turn_end",
    "The end of a turn, whatever ended it.",
    {
        "turn": TURN,
        "stop_reason": Field(
            str,
            "`end_turn`, `stopped` by the user, `shutdown`, `error`, `max_iterations`, "
            "`interrupted`",
        ),
        "final_text": Field(str, "the turn's last answer"),
        "note": Field(str, "why a turn cut by a crash was closed"),
    },
    {"turn": 1, "stop_reason": "stopped", "final_text": ""},
    chat=_turn_end_chat,
    chat_items=("notice",),
    in_history=always,
    turn="closes",
)


# ---------------------------------------------------------------- compaction and clean-up


def _compaction_chat(entry: Entry, context: ChatContext) -> list[ChatItem]:
    text = compaction_text(entry, int(entry.get("tokens_after") or 0))
    return notice_item(entry, "compacted", text)


COMPACTION = EntryType(
    "compaction",
    "A summary that replaces the context before `first_kept_entry_id` (docs/compaction.md).",
    {
        "turn": TURN,
        "summary": Field(str, "what the model reads instead of the dropped part", required=True),
        "first_kept_entry_id": Field(str, "where the kept part begins", nullable=True),
        "tokens_before": Field(int, "the context's size before"),
        "tokens_after": Field(int, "its estimated size after", nullable=True),
        "instructions": Field(str, "the user's or agent's instructions", nullable=True),
        "trigger": Field(str, "`threshold` or `requested`"),
        "dropped_entries": Field(int, "how many entries it summarises"),
        "usage": Field(dict, "of the summary call", nullable=True),
    },
    {
        "turn": 3,
        "summary": "## Goal\nPlot the data.",
        "first_kept_entry_id": "e1",
        "tokens_before": 190_000,
        "tokens_after": 21_000,
        "instructions": None,
        "trigger": "threshold",
        "dropped_entries": 40,
    },
    seen=lambda entry, in_turn: (
        Seen("user", summary_message(text_of(entry, "summary")), when="opens_context"),
    ),
    chat=_compaction_chat,
    chat_items=("notice",),
    in_history=always,
)

KERNEL_GC = EntryType(
    "kernel_gc",
    "The clean-up of the kernel's variables after a compaction; the model reads `text` at once.",
    {
        "turn": TURN,
        "text": Field(str, "what the model and the chat read"),
        "deleted": Field(list, "names deleted"),
        "summarized": Field(list, "names replaced by a short summary"),
        "skipped": Field(list, "`name`, `why` of what was left alone"),
        "oversized": Field(list, "`name`, `type`, `size` of what is over the snapshot cap"),
        "problem": Field(str, "why the review failed", nullable=True),
        "actions": Field(list, "what the kernel did"),
    },
    {"turn": 3, "text": "Kernel clean-up after compaction: deleted big.", "deleted": ["big"]},
    seen=lambda entry, in_turn: now(notice_text(entry)),
    summarised=_summary_lines,
    chat=lambda entry, context: notice_item(entry, "kernel_gc", text_of(entry, "text")),
    chat_items=("notice",),
    in_history=always,
)


def _refinement_seen(entry: Entry, in_turn: bool) -> tuple[Seen, ...]:
    return now(notice_text(entry)) if in_turn else before_next_turn(notice_text(entry))


def _refinement_chat(entry: Entry, context: ChatContext) -> list[ChatItem]:
    if not isinstance(entry.get("refinement"), dict):
        return []
    record = entry["refinement"]
    return [
        {
            "type": "refinement",
            "turn": entry.get("turn"),
            "text": text_of(entry, "text"),
            "refinement": record,
        }
    ]  # type: ignore[typeddict-item]


REFINEMENT = EntryType(
    "refinement",
    "A refinement of the harness was applied, rolled back or failed (docs/harness.md).",
    {
        "turn": TURN,
        "text": Field(str, "the note the model and the chat read"),
        "refinement": Field(dict, "the record (`RefinementRecord` in core/wire.py)"),
    },
    {
        "turn": 2,
        "text": "[refinement r1] Added a note on plots.",
        "refinement": {
            "id": "r1",
            "trigger": "user",
            "scope": "local",
            "instructions": None,
            "summary": "Added a note on plots.",
            "rationale": "",
            "expected_outcome": "",
            "edits": [],
            "rollback_of": None,
            "harness_version": {"local": 1, "global": 0},
            "created_at": "2026-01-01T00:00:00.000+00:00",
            "session_id": "20260101-000000-abcdef",
        },
    },
    seen=_refinement_seen,
    summarised=_summary_lines,
    chat=_refinement_chat,
    chat_items=("refinement",),
    in_history=always,
)

REFINE_REVIEW = EntryType(
    "refine_review",
    "An automatic review of whether the harness should be refined now.",
    {
        "trigger": Field(str, "`auto:turns` or `auto:compaction`"),
        "should_refine": Field(bool, "the review's answer"),
        "rationale": Field(str, "why"),
    },
    {"trigger": "auto:turns", "should_refine": False, "rationale": "Nothing to learn yet."},
)


# ---------------------------------------------------------------- the session around the turns


MODEL_CHANGE = EntryType(
    "model_change",
    "The session continues on another model: one the user chose (the panel's picker, `/model`; "
    "the next model call uses it, a resume keeps it while offered), or the configured one.",
    {"provider": Field(str, "the provider"), "model": Field(str, "the model")},
    {"provider": "openai", "model": "gpt-4.1"},
    in_history=always,
)

NOTEBOOK_MOVED = EntryType(
    "notebook_moved",
    "The notebook was renamed; the latest one says where it is now (the header keeps the path "
    "it was created with).",
    {"path": Field(str, "where it is now"), "old_path": Field(str, "where it was")},
    {"path": "b.ipynb", "old_path": "a.ipynb"},
)

MESSAGE_SENT = EntryType(
    "message_sent",
    "This agent sent a message to another agent of its family (docs/agent-tree.md).",
    {
        "turn": TURN,
        "message_id": Field(str, "the message"),
        "to_session_id": Field(str, "the receiver's session"),
        "to_name": Field(str, "the receiver's name"),
        "relationship": Field(str, "the receiver: `parent`, `child` or `sibling`"),
        "mode": Field(str, "`auto`, `steer` or `follow_up`"),
        "delivery_status": Field(str, "how it was delivered"),
        "text": Field(str, "the message"),
    },
    {
        "turn": 1,
        "message_id": "m1",
        "to_session_id": "20260101-000000-abcdef",
        "to_name": "a",
        "relationship": "child",
        "mode": "auto",
        "delivery_status": "delivered",
        "text": "Look at b too.",
    },
    in_history=always,
)


def _child_chat(entry: Entry, context: ChatContext) -> list[ChatItem]:
    child_id = str(entry.get("rlm_child_id", ""))
    item: dict[str, Any] = {
        "type": "child",
        "turn": entry.get("turn"),
        "rlm_child_id": child_id,
        "name": str(entry.get("name", "")),
        "notebook_path": str(entry.get("notebook_path", "")),
        "task": str(entry.get("task", "")),
    }
    if isinstance(entry.get("spawn_cell_id"), str):
        item["spawn_cell_id"] = entry["spawn_cell_id"]
    if context.child_state is not None and child_id:
        status, preview = context.child_state(child_id)
        item["status"] = status
        if preview is not None:
            item["preview"] = preview
    return [item]  # type: ignore[list-item]


CHILD_SPAWNED = EntryType(
    "child_spawned",
    "This agent spawned a sub-agent (`rlm(...)`).",
    {
        "turn": TURN,
        "rlm_child_id": Field(str, "the sub-agent's session"),
        "name": Field(str, "its name"),
        "session_dir": Field(str, "its session folder"),
        "model": Field(str, "`provider/model`"),
        "notebook_path": Field(str, "its notebook"),
        "task": Field(str, "its first task"),
        "spawn_cell_id": Field(str, "the agent cell that called `rlm`"),
    },
    {
        "turn": 1,
        "rlm_child_id": "20260101-000000-abcdef",
        "name": "a",
        "session_dir": ".prime-agent/sessions/20260101-000000-abcdef",
        "model": "anthropic/claude-sonnet-4-5",
        "notebook_path": "a.ipynb",
        "task": "Read the data.",
    },
    chat=_child_chat,
    chat_items=("child",),
    in_history=always,
)


# ---------------------------------------------------------------- goals (core/goals.py)


def _goal_chat(entry: Entry, context: ChatContext) -> list[ChatItem]:
    text = text_of(entry, "text")
    return notice_item(entry, "goal", text) if text else []


GOAL = EntryType(
    "goal",
    "The goal's state after a change (docs/autonomy.md): the latest one on the path is the "
    "goal. The model does not read it; the chat shows `text` (none for a continuation's "
    "progress).",
    {
        "turn": TURN,
        "change": Field(
            str,
            "`created`, `continued`, `budget_limited`, `paused`, `resumed`, `complete`, "
            "`cleared`, `error` or `trusted` (the user trusted a goal from another folder)",
            required=True,
        ),
        "text": Field(str, "the notice line the chat shows (empty: none)"),
        "goal_id": Field(str, "the goal", required=True),
        "objective": Field(str, "what the user (or the agent) set as the goal"),
        "status": Field(
            str,
            "`idle`, `active`, `paused`, `budget_limited`, `complete` or `error`",
            required=True,
        ),
        "token_budget": Field(int, "input + output tokens allowed", nullable=True),
        "tokens_used": Field(int, "input + output tokens since it was set, sub-agents' included"),
        "time_used_seconds": Field(int, "wall time since it was set"),
        "continuations": Field(int, "continuations since it was set or resumed"),
        "created_at": Field(str, "when it was set"),
        "updated_at": Field(str, "when it last changed"),
        "reason": Field(str, "why it paused, ended or failed", nullable=True),
        "set_by": Field(str, "`user` (`/goal`) or `agent` (`goal.create`)", nullable=True),
        "signature": Field(str, "this user's signature of the state (docs/trust.md)"),
    },
    {
        "turn": 1,
        "change": "created",
        "text": "Goal set: reproduce figure 3 of the paper",
        "goal_id": "goal_1a2b3c4d",
        "objective": "reproduce figure 3 of the paper",
        "status": "active",
        "token_budget": 200_000,
        "tokens_used": 0,
        "time_used_seconds": 0,
        "continuations": 0,
        "created_at": "2026-01-01T00:00:00.000+00:00",
        "updated_at": "2026-01-01T00:00:00.000+00:00",
        "reason": None,
        "set_by": "user",
        "signature": "3f7a...",
    },
    chat=_goal_chat,
    chat_items=("notice",),
)


# ---------------------------------------------------------------- MCP calls (core/mcp_ops.py)


def mcp_call_line(entry: Entry) -> str:
    """`MCP papers.search · 0.4 s · 1,204 chars` (a resource: `MCP papers papers://1 · ...`); a
    failure ends with its status and error."""
    server, tool = text_of(entry, "server"), text_of(entry, "tool")
    target = f"{server}.{tool}" if tool else f"{server} {text_of(entry, 'uri')}"
    seconds = entry.get("seconds")
    took = f"{seconds:.1f} s" if isinstance(seconds, float | int) else "?"
    line = f"MCP {target} · {took}"
    status = text_of(entry, "status")
    if status == "ok":
        return f"{line} · {entry.get('chars', 0):,} chars"
    error = text_of(entry, "error")
    return f"{line} · {status}" + (f": {error}" if error else "")


def _mcp_call_chat(entry: Entry, context: ChatContext) -> list[ChatItem]:
    kind = "mcp_call" if entry.get("status") == "ok" else "mcp_call_failed"
    return notice_item(entry, kind, mcp_call_line(entry))


MCP_CALL = EntryType(
    "mcp_call",
    "A cell called an MCP server (docs/mcp.md): which tool or resource, how it ended, how long "
    "it took and how large the result was. Never the arguments nor the result (it lives in the "
    "kernel variable). The model does not read it (the cell's output says what it needs); "
    "`history` lists it.",
    {
        "turn": TURN,
        "server": Field(str, "the server's configured name", required=True),
        "tool": Field(str, "the tool called (absent for a resource read)"),
        "uri": Field(str, "the resource read (absent for a tool call)"),
        "status": Field(str, "`ok`, `error`, `cancelled` or `timeout`", required=True),
        "seconds": Field(float, "how long the call took", required=True),
        "chars": Field(int, "the result's size, serialised, in characters"),
        "error": Field(str, "why it failed (a tool's own error text, a transport failure)"),
    },
    {
        "turn": 1,
        "server": "papers",
        "tool": "search",
        "status": "ok",
        "seconds": 0.4,
        "chars": 1204,
    },
    chat=_mcp_call_chat,
    chat_items=("notice",),
    in_history=always,
)


# ---------------------------------------------------- permission modes (docs/pairing.md 4)


def _permission_seen(entry: Entry, in_turn: bool) -> tuple[Seen, ...]:
    if in_turn:  # in a turn the next cell's result says what the mode did
        return ()
    if entry.get("mode") == "plan":
        return before_next_turn(
            "[notice] This session is now in plan mode: no cell runs. Answer in text and "
            "describe the code you would run."
        )
    if entry.get("mode") == "ask":
        return before_next_turn(
            "[notice] This session is now in ask mode: each cell runs only once the user "
            "approves it (they may edit or skip it)."
        )
    return before_next_turn("[notice] This session is now in auto mode: cells run as written.")


PERMISSION_CHANGE = EntryType(
    "permission_change",
    "The session's permission mode (`plan`, `ask` or `auto`, docs/pairing.md): the latest one "
    "holds, across reloads and resumes.",
    {"mode": Field(str, "`plan`, `ask` or `auto`")},
    {"mode": "ask"},
    seen=_permission_seen,
    summarised=_summary_lines,
    in_history=always,
)


def _approval_chat(entry: Entry, context: ChatContext) -> list[ChatItem]:
    """A skip marks the cell line its `tool_result` makes; an edit is the waiting cell's own line
    (it has no `tool_result`: the edited code's cell has it, and shows the edited code)."""
    call_id = str(entry.get("tool_call_id", ""))
    decision = entry.get("decision")
    if decision == "skip":
        context.decision_by_call[call_id] = "skip"
    if decision != "edit" or not isinstance(entry.get("cell_id"), str):
        return []
    item: ChatItem = {
        "type": "cell",
        "turn": entry.get("turn"),  # type: ignore[typeddict-item]
        "cell_id": entry["cell_id"],
        "code": context.code_by_call.get(call_id) or "",
        "status": "skipped",
        "execution_count": None,
        "preview": "edited: the edited code runs in the next cell",
        "decision": "edit",
    }
    context.code_by_call[call_id] = text_of(entry, "code")
    return [item]


CELL_APPROVAL = EntryType(
    "cell_approval",
    "Ask mode: the user's answer to a waiting agent cell: `run`, `edit` (then `code` is what "
    "ran, in a new cell) or `skip`. The cell's `tool_result` tells the model.",
    {
        "turn": TURN,
        "tool_call_id": Field(str, "the call whose cell waited"),
        "cell_id": Field(str, "the waiting cell"),
        "decision": Field(str, "`run`, `edit` or `skip`"),
        "code": Field(str, "the edited code that ran (edit only)"),
    },
    {"turn": 1, "tool_call_id": "c1", "cell_id": "cell-1", "decision": "edit", "code": "1 + 1"},
    chat=_approval_chat,
    chat_items=("cell",),
    in_history=always,
)


# ---------------------------------------------------- review and revert a turn (docs/pairing.md 5)

TURN_REVERTED = EntryType(
    "turn_reverted",
    "The user reverted an agent turn (its cells removed from the notebook, the kernel restored "
    "to the snapshot taken before it where one could be used) or removed cells of it. The model "
    "reads `text` before its next message.",
    {
        "turn": Field(int, "the turn reverted", required=True),
        "text": Field(str, "what the model reads (after `[notice] `) and the chat shows"),
        "cells_removed": Field(list, "the cell ids removed from the notebook"),
        "cells_kept": Field(list, "`cell_id`, `first_line`, `reason` of the turn's cells kept"),
        "whole_turn": Field(bool, "the whole turn (true) or only the cells named"),
        "kernel": Field(str, "`restored`, `not_restored` or `untouched`"),
        "restored": Field(list, "names brought back from the snapshot"),
        "removed": Field(list, "names the turn created, deleted"),
        "failed": Field(list, "`name`, `reason` of what could not be restored"),
        "reason": Field(str, "why the kernel was not restored", nullable=True),
    },
    {
        "turn": 3,
        "text": "The user reverted your turn 3: its 2 cells were removed from the notebook ...",
        "cells_removed": ["cell-1", "cell-2"],
        "whole_turn": True,
        "kernel": "restored",
        "restored": ["x"],
        "removed": ["y"],
    },
    seen=lambda entry, in_turn: before_next_turn(notice_text(entry)),
    summarised=_summary_lines,
    chat=lambda entry, context: notice_item(entry, "turn_reverted", text_of(entry, "text")),
    chat_items=("notice",),
    in_history=always,
)


# ---------------------------------------------------------------- the table


DECLARED: dict[str, EntryType] = {
    t.name: t
    for t in (
        USER_MESSAGE,
        ASSISTANT_MESSAGE,
        CELL_STARTED,
        TOOL_RESULT,
        AGENT_MESSAGE,
        CONTINUATION,
        NOTICE,
        ERROR,
        TURN_END,
        MODEL_CHANGE,
        NOTEBOOK_MOVED,
        COMPACTION,
        KERNEL_GC,
        REFINEMENT,
        REFINE_REVIEW,
        MESSAGE_SENT,
        CHILD_SPAWNED,
        GATE_RUN,
        AUTONOMY,
        GOAL,
        MCP_CALL,
        PERMISSION_CHANGE,
        CELL_APPROVAL,
        TURN_REVERTED,
    )
}
"""Every entry type a session log holds, by name. Loading tolerates other types (a newer build
wrote them): nothing reads them. Writing one is refused."""

SessionEntryType = Literal[tuple(DECLARED)]  # type: ignore[valid-type]  # the table's keys
"""The `type` of a session log entry."""


def seen(entry: Entry, in_turn: bool) -> tuple[Seen, ...]:
    """What the model reads of `entry` (nothing for a type this build does not know)."""
    declared = DECLARED.get(entry["type"])
    return declared.seen(entry, in_turn) if declared is not None else ()


def turn_boundary(entry: Entry) -> bool | None:
    """True after an entry that opens a turn, False after one that closes it, else None."""
    declared = DECLARED.get(entry["type"])
    return None if declared is None or declared.turn is None else declared.turn == "opens"


def summarised(entry: Entry, in_turn: bool) -> list[str]:
    declared = DECLARED.get(entry["type"])
    if declared is None or declared.summarised is None:
        return []
    return declared.summarised(entry, in_turn)


def chat_items(entry: Entry, context: ChatContext) -> list[ChatItem]:
    declared = DECLARED.get(entry["type"])
    if declared is None or declared.chat is None:
        return []
    return declared.chat(entry, context)


def in_history(entry: Entry) -> bool:
    declared = DECLARED.get(entry["type"])
    return declared is not None and declared.in_history(entry)


def problem(entry: Entry) -> str | None:
    """Why a loaded entry's declared fields cannot be read (None: they can)."""
    return fields_problem(DECLARED.get(entry["type"]), entry)


def check_new(entry_type: str, fields: Entry) -> None:
    """Raises UndeclaredEntry unless `fields` make a declared entry that loads back."""
    found = new_entry_problem(DECLARED.get(entry_type), entry_type, fields)
    if found is not None:
        raise UndeclaredEntry(found)


def main(argv: list[str]) -> int:
    if argv != ["--docs"]:
        print("usage: python -m prime_agent_lab.core.entry_types --docs  (rewrites its table)")
        return 2
    DOCS.write_text(docs_with_table(DOCS.read_text(), DECLARED))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
