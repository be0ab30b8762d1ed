"""`prime-agent-lab sessions`: the sessions in the current folder's `.prime-agent/sessions` (where
`run` writes them), newest first, read from disk (no server needed; core/session_list.py).

    prime-agent-lab sessions [--notebook PATH] [--json]

Text mode prints a table (id, updated, model, status, cost, title); `--json` prints the same
answer as `GET /prime-agent/api/sessions?notebook=` (`{"sessions": [...]}`). Without a server
nothing is loaded, so a session is `inactive` or `broken`. Titles and reasons come from files
that may be someone else's: they are printed through `printable`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TextIO

from .core.session_list import SessionCatalog
from .core.text import printable
from .core.wire import SessionListItem

SESSIONS_DIR = Path(".prime-agent") / "sessions"
TITLE_COLUMN = 60


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sessions = commands.add_parser(
        "sessions",
        help="list the sessions of this folder (or of one notebook), newest first",
        description="List the sessions in .prime-agent/sessions of the current folder, newest "
        "first: id, last change, model, status, cost (with sub-agents) and title (the first "
        "message). Read from disk; no server needed.",
    )
    sessions.add_argument("--notebook", default=None, help="only the sessions of this notebook")
    sessions.add_argument("--json", action="store_true", help='print {"sessions": [...]}')


def run(args: argparse.Namespace, out: TextIO, cwd: Path | None = None) -> int:
    cwd = cwd or Path.cwd()
    notebook = None if args.notebook is None else notebook_key(args.notebook, cwd)
    items = SessionCatalog(cwd / SESSIONS_DIR).listing(notebook)
    if args.json:
        out.write(json.dumps({"sessions": items}) + "\n")  # ASCII: no character acts on a terminal
        return 0
    if not items:
        where = f" of {args.notebook}" if notebook is not None else ""
        out.write(f"no sessions{where} in {SESSIONS_DIR}\n")
        return 0
    out.write(table(items))
    return 0


def notebook_key(given: str, cwd: Path) -> str:
    """A notebook as sessions name it: relative to the folder, with `/` (headless.py)."""
    path = (cwd / given).resolve()
    try:
        return path.relative_to(cwd.resolve()).as_posix()
    except ValueError:
        return str(path)


def table(items: list[SessionListItem]) -> str:
    rows = [("ID", "UPDATED", "MODEL", "STATUS", "COST", "TITLE")]
    for item in items:
        rows.append(
            (
                item["session_id"],
                printable(_time(item["updated"])),
                printable(_model(item)),
                item["status"],
                _dollars(item["cost_total"]),
                printable(_title(item)),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = [
        "  ".join([*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), row[-1]])
        for row in rows
    ]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _time(iso: str | None) -> str:
    """`2026-01-01 09:30` (UTC, as the logs write it)."""
    return (iso or "")[:16].replace("T", " ") or "-"


def _model(item: SessionListItem) -> str:
    provider, model = item["provider"] or "", item["model"] or ""
    return f"{provider}/{model}" if provider and model else model or provider or "-"


def _dollars(cost: float | None) -> str:
    if cost is None:
        return "-"
    return f"${cost:.4f}" if cost < 1 else f"${cost:,.2f}"


def _title(item: SessionListItem) -> str:
    if item["status"] == "broken":
        return f"(broken: {item.get('reason', '')})"[:TITLE_COLUMN]
    title = item["title"] or "(no message yet)"
    return title if len(title) <= TITLE_COLUMN else title[: TITLE_COLUMN - 1] + "…"
