"""`history`: the session's full record as Python objects the model can slice and search."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Entry:
    """One record of the session log.

    `type` is one of user_message, assistant_message, tool_result, agent_message, message_sent,
    child_spawned, notice, model_change, turn_end, error, compaction (its `text` is the summary),
    kernel_gc (a clean-up of the kernel's variables) or mcp_call (an MCP tool call or resource
    read: `text` names it, `status` is ok, error, cancelled or timeout).
    `text` is the message text, or the observation the model saw for a tool_result; `code` is the
    cell source of a tool call (on the tool_result that ran it).
    """

    id: str
    type: str
    ts: str
    turn: int | None = None
    text: str = ""
    code: str | None = None
    cell_id: str | None = None
    status: str | None = None
    parent_id: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __str__(self) -> str:
        head = f"[{self.type} turn={self.turn}]"
        body = self.code if self.type == "tool_result" and self.code else self.text
        return f"{head} {body}"


def _entry(raw: dict[str, Any], code_by_call: dict[str, str]) -> Entry:
    kind = raw.get("type", "")
    if kind == "tool_result":
        text = raw.get("observation", "")
    elif kind in ("turn_end",):
        text = raw.get("final_text", "")
    elif kind == "error":
        text = raw.get("message", "")
    elif kind == "model_change":
        text = f"{raw.get('provider')}/{raw.get('model')}"
    elif kind == "compaction":
        text = raw.get("summary", "")
    elif kind == "mcp_call":  # `papers.search`, `papers papers://1` (and why it failed)
        target = (
            f"{raw.get('server')}.{raw['tool']}"
            if raw.get("tool")
            else (f"{raw.get('server')} {raw.get('uri')}")
        )
        text = f"{target}: {raw['error']}" if raw.get("error") else target
    else:
        text = raw.get("text", "")
    return Entry(
        id=raw.get("id", ""),
        type=kind,
        ts=raw.get("ts", ""),
        turn=raw.get("turn"),
        text=text,
        code=code_by_call.get(raw.get("tool_call_id", "")),
        cell_id=raw.get("cell_id"),
        status=raw.get("status"),
        parent_id=raw.get("parent_id"),
        raw=raw,
    )


Fetch = Callable[[str | None], dict[str, Any]]
"""`history.read` with `since`: `{"base", "records", "last"}` (see the host's `history_since`)."""


class History:
    """A live view of the session record, compacted parts included; every access asks the host
    only for what was appended since the previous one (the whole record again after a branch),
    so it stays cheap on a long session."""

    def __init__(self, fetch: Fetch) -> None:
        self._fetch = fetch
        self._entries: list[Entry] = []
        self._code_by_call: dict[str, str] = {}
        self._last: str | None = None

    def entries(self) -> list[Entry]:
        answer = self._fetch(self._last)
        if answer.get("base") is None or answer.get("base") != self._last:
            self._entries, self._code_by_call = [], {}
        for raw in answer.get("records", []):
            if raw.get("type") == "assistant_message":
                for call in raw.get("tool_calls", []):
                    self._code_by_call[call.get("id", "")] = call.get(
                        "code", call.get("arguments", "")
                    )
            self._entries.append(_entry(raw, self._code_by_call))
        self._last = answer.get("last")
        return list(self._entries)

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.entries())

    def __len__(self) -> int:
        return len(self.entries())

    def __getitem__(self, index: int | slice) -> Entry | list[Entry]:
        return self.entries()[index]

    def of_type(self, kind: str) -> list[Entry]:
        return [e for e in self.entries() if e.type == kind]

    def cells(self) -> list[Entry]:
        """Each cell the agent ran, with its code, notebook cell id and observation."""
        return self.of_type("tool_result")

    def turn(self, number: int) -> list[Entry]:
        return [e for e in self.entries() if e.turn == number]

    def search(
        self, pattern: str, flags: int = re.IGNORECASE, type: str | None = None
    ) -> list[Entry]:
        """Entries (of one `type`, if given) whose text or code matches a regular expression."""
        regex = re.compile(pattern, flags)
        return [
            e
            for e in self.entries()
            if (type is None or e.type == type)
            and (regex.search(e.text) or (e.code and regex.search(e.code)))
        ]

    def last(self, count: int = 10) -> list[Entry]:
        """The newest `count` entries."""
        return self.entries()[-count:] if count > 0 else []

    def compactions(self) -> list[Entry]:
        """Each compaction: its `text` is the summary that replaced the earlier part."""
        return self.of_type("compaction")

    def since_compaction(self) -> list[Entry]:
        """What the model still sees verbatim: the entries from the latest compaction's first
        kept entry on (everything when the session never compacted)."""
        entries = self.entries()
        compacted = [e for e in entries if e.type == "compaction"]
        if not compacted:
            return entries
        first = compacted[-1].raw.get("first_kept_entry_id")
        ids = [e.id for e in entries]
        start = ids.index(first) if first in ids else ids.index(compacted[-1].id)
        return [e for e in entries[start:] if e.type != "compaction"]

    def __repr__(self) -> str:
        try:
            entries = self.entries()
        except Exception as exc:  # the repr must never raise in a notebook
            return f"<history: unavailable ({exc})>"
        turns = max((e.turn or 0 for e in entries), default=0)
        cells = sum(1 for e in entries if e.type == "tool_result")
        return (
            f"<history: {len(entries)} entries, {turns} turns, {cells} cells; "
            "iterate, index or .search(pattern)>"
        )
