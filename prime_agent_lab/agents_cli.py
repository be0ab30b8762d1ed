"""`prime-agent-lab agents` and `prime-agent-lab send`: the Agents View of a running server, from
a terminal (docs/agents-view.md).

    prime-agent-lab agents [--json] [--state running|idle|waiting] [--server URL]
    prime-agent-lab send AGENT "text" [--server URL]

The server and its token are found as `jupyter server list` finds them: jupyter_server's runtime
files (`list_running_servers`). With several servers running, `--server URL` picks one. AGENT is
a session id, a unique prefix of one, or a unique name. Names and models come from session files
that may be someone else's: they are printed through `printable`.
"""

from __future__ import annotations

import argparse
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TextIO

from .core.agents_overview import STATES
from .core.text import printable
from .core.wire import AgentRow, AgentsOverview

TIMEOUT = 30.0  # seconds for one request to the server


class AgentsCommandError(Exception):
    """What the command says on stderr, exit status 1."""


@dataclass(frozen=True)
class Server:
    url: str  # ends with "/"
    token: str


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    agents = commands.add_parser(
        "agents",
        help="list every agent of a running server as a tree (the Agents View)",
        description="Every agent the running Jupyter server knows, roots and sub-agents, as a "
        "tree: name, state, last outcome, residency, model, tokens (own/total), cost (with "
        "sub-agents) and last activity.",
    )
    agents.add_argument("--json", action="store_true", help="print the AgentsOverview JSON")
    agents.add_argument("--state", choices=STATES, default=None, help="only agents in this state")
    agents.add_argument("--server", default=None, help="the server's URL, when several run")
    send = commands.add_parser(
        "send",
        help="message an agent of a running server (a root as chat, its sub-agents as mail)",
        description="Send a message to an agent of the running server, as the root's owner: a "
        "root takes it as a chat message, the root's sub-agents as a message from the root; "
        "deeper sub-agents are out of reach (their parent reaches them).",
    )
    send.add_argument("agent", help="a session id, a unique prefix of one, or a unique name")
    send.add_argument("text", help="the message")
    send.add_argument("--server", default=None, help="the server's URL, when several run")


def run(args: argparse.Namespace, out: TextIO) -> int:
    server = find_server(args.server, running_servers())
    if args.command == "agents":
        query = f"?state={args.state}" if args.state else ""
        overview: AgentsOverview = request(server, "GET", f"prime-agent/api/agents{query}")
        if args.json:
            out.write(json.dumps(overview) + "\n")  # ASCII: no character acts on a terminal
        else:
            out.write(tree_text(overview["agents"]))
        return 0
    overview = request(server, "GET", "prime-agent/api/agents")
    row = resolve_agent(overview["agents"], args.agent)
    path = f"prime-agent/api/agents/{row['session_id']}/message"
    sent = request(server, "POST", path, {"text": args.text})
    how = "as a chat message" if sent["delivered"] == "chat" else "as a message from its root"
    out.write(f"sent to {printable(row['name'])} ({row['session_id']}) {how}\n")
    return 0


# ---------------------------------------------------------------- the server


def running_servers() -> list[Server]:
    from jupyter_server.serverapp import list_running_servers

    found = []
    for info in list_running_servers():
        url = str(info.get("url") or "")
        if url:
            found.append(
                Server(url if url.endswith("/") else url + "/", str(info.get("token", "")))
            )
    return found


def find_server(wanted: str | None, running: list[Server]) -> Server:
    """The one running server, or the one at `wanted`; a clear error listing them otherwise."""
    listed = ", ".join(s.url for s in running)
    if wanted is not None:
        key = wanted if wanted.endswith("/") else wanted + "/"
        for server in running:
            if server.url == key or _same_place(server.url, key):
                return server
        raise AgentsCommandError(
            f"no running Jupyter server at {wanted}"
            + (f"; running: {listed}" if running else " (none is running)")
        )
    if not running:
        raise AgentsCommandError(
            "no running Jupyter server found (start one with `jupyter lab`; servers are found "
            "by their runtime files, as `jupyter server list` finds them)"
        )
    if len(running) > 1:
        raise AgentsCommandError(f"several Jupyter servers run: pick one with --server ({listed})")
    return running[0]


def _same_place(a: str, b: str) -> bool:
    """`localhost` and `127.0.0.1` name the same server."""
    first, second = urllib.parse.urlsplit(a), urllib.parse.urlsplit(b)
    local = {"localhost", "127.0.0.1", "::1"}
    return (
        first.port == second.port
        and first.path == second.path
        and (first.hostname == second.hostname or {first.hostname, second.hostname} <= local)
    )


def request(server: Server, method: str, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    call = urllib.request.Request(
        server.url + path,
        data=data,
        method=method,
        headers={"Authorization": f"token {server.token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(call, timeout=TIMEOUT) as response:
            payload = response.read()
    except urllib.error.HTTPError as exc:
        raise AgentsCommandError(f"the server answered {exc.code}: {_error_text(exc)}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise AgentsCommandError(f"cannot reach the server at {server.url}: {exc}") from None
    return json.loads(payload) if payload else None


def _error_text(exc: urllib.error.HTTPError) -> str:
    try:
        answer = json.loads(exc.read())
    except (ValueError, OSError):
        return str(exc.reason)
    text = answer.get("error") or answer.get("message") if isinstance(answer, dict) else None
    return printable(str(text or exc.reason))


# ---------------------------------------------------------------- naming and printing


def resolve_agent(rows: list[AgentRow], ref: str) -> AgentRow:
    """The row `ref` names: a session id, else a unique id prefix, else a unique name."""
    for row in rows:
        if row["session_id"] == ref:
            return row
    for matches in (
        [r for r in rows if r["session_id"].startswith(ref)],
        [r for r in rows if r["name"] == ref],
    ):
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            ids = ", ".join(f"{printable(r['name'])} ({r['session_id']})" for r in matches)
            raise AgentsCommandError(f"{printable(ref)!r} names several agents: {ids}")
    raise AgentsCommandError(f"no agent {printable(ref)!r} (see `prime-agent-lab agents`)")


HEADER = ("NAME", "STATE", "OUTCOME", "RESIDENCY", "MODEL", "TOKENS", "COST", "LAST ACTIVITY")


def tree_text(rows: Iterable[AgentRow]) -> str:
    """One agent a line, indented by depth under its parent; a row's `problem` (a refused
    session, a folder removed from disk) on a line of its own under it."""
    lines = [HEADER]
    problems: dict[int, str] = {}
    for row in rows:
        if row.get("problem"):
            problems[len(lines)] = "  " * row["depth"] + "  ! " + printable(str(row["problem"]))
        state = row["state"] + (f" ({row['waiting_for']})" if row["waiting_for"] else "")
        lines.append(
            (
                "  " * row["depth"] + printable(row["name"]),
                state,
                row["outcome"] or "-",
                row["residency"],
                printable(row["model"]) or "-",
                f"{_tokens(row['tokens_own'])}/{_tokens(row['tokens_total'])}",
                _dollars(row["cost_total"]),
                row["last_activity"][:19].replace("T", " ") or "-",
            )
        )
    if len(lines) == 1:
        return "no agents\n"
    widths = [max(len(line[i]) for line in lines) for i in range(len(HEADER) - 1)]
    text = []
    for index, line in enumerate(lines):
        text.append(
            "  ".join([*(c.ljust(w) for c, w in zip(line, widths, strict=False)), line[-1]])
        )
        if index in problems:
            text.append(problems[index])
    return "\n".join(t.rstrip() for t in text) + "\n"


def _tokens(pair: dict[str, int] | Any) -> str:
    total = int(pair["input"]) + int(pair["output"])
    return f"{total / 1000:.1f}k" if total >= 1000 else str(total)


def _dollars(cost: float | None) -> str:
    if cost is None:
        return "-"
    return f"${cost:.4f}" if cost < 1 else f"${cost:,.2f}"
