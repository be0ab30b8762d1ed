"""Token usage and cost of an agent and its sub-agents (`rlm.usage()`, the `/usage` command).

Every model call of an agent's turns is an `assistant_message` entry with the provider's reported
`usage` and the `provider` and `model` that answered. An agent's own figures add up its calls (on
every branch: a call abandoned by a branch was still made); its total adds its sub-agents' totals.
Cost is in US dollars at the vendor's list price of the model that answered each call; it is
`None` when a call was answered by a model whose provider declares no price for it
(`ProviderPlugin.prices`) (a model
behind another service's base URL is priced as the vendor's, which it may not be).

Side calls (a compaction's summary, a refinement's planning) are not counted here yet.
"""

from __future__ import annotations

import logging
from typing import TypedDict

from .answer_cost import answer_price
from .caller import TreeRuntime
from .installed_providers import installed
from .ports import Price
from .sessions import SessionError, SessionLog
from .token_counts import counted, described

log = logging.getLogger(__name__)
_named: set[tuple[str, object]] = set()
"""The entries whose ignored usage figures the log named already."""


def price_of(provider: str, model: str) -> Price | None:
    """The list price of `model` answered by `provider`, as the provider declares it (the
    longest matching prefix of its `prices`), or None when it declares none for that model."""
    return installed().price(provider, model)


class AgentUsage(TypedDict):
    """One agent of the tree in `rlm.usage()` and `/usage`: its own model calls and, in the
    `_total` fields, those of its sub-agents too."""

    session_id: str
    name: str
    """A sub-agent's name; empty for a root agent."""
    notebook_path: str | None
    model: str
    """`provider/model` the agent runs on."""
    status: str
    calls: int
    """Its own model calls."""
    usage: dict[str, int]
    """Tokens of its own calls: input, output, cache read, cache write."""
    usage_total: dict[str, int]
    cost: float | None
    """US dollars of its own calls; None when a model without a known price answered one."""
    cost_total: float | None
    children: list[AgentUsage]


def session_usage(session: SessionLog) -> dict[str, int]:
    """Tokens of every model call the session recorded."""
    return _tally(session)[1]


def session_cost(session: SessionLog) -> float | None:
    """US dollars of the session's own model calls; None when one was answered by a model
    without a known price."""
    return _tally(session)[2]


def _tally(session: SessionLog) -> tuple[int, dict[str, int], float | None]:
    """(calls, tokens, cost) of the session's model calls. A figure that is not a token count
    (core/token_counts.py) is left out of the tokens, named in the log, and leaves the call's
    cost unknown."""
    calls, tokens, cost = 0, {}, 0.0
    priced = True
    for entry in session.entries[_copied(session) :]:  # a copy's calls were its origin's
        usage = entry.get("usage")
        if entry["type"] != "assistant_message" or not isinstance(usage, dict):
            continue
        calls += 1
        valid, ignored = counted(usage)
        for key, value in valid.items():
            tokens[key] = tokens.get(key, 0) + value
        if ignored and (session.session_id, entry.get("id")) not in _named:
            _named.add((session.session_id, entry.get("id")))  # once, not at every poll
            log.warning(
                "session %s, entry %s: usage figures that are not token counts ignored: %s",
                session.session_id,
                entry.get("id"),
                described(ignored, usage),
            )
        provider, model = str(entry.get("provider") or ""), str(entry.get("model") or "")
        price = answer_price(provider, model, usage)
        if price is None:
            priced = False
        else:
            cost += price
    return calls, tokens, cost if priced else None


def _copied(session: SessionLog) -> int:
    """How many of a fork's or a clone's first entries it copied from its origin."""
    count = session.header.get("copied_entries")
    return count if isinstance(count, int) and count > 0 else 0


def usage_report(runtime: TreeRuntime, session_id: str) -> AgentUsage:
    """The usage of an agent and of every agent below it in the tree. Raises LookupError for a
    session that is neither attached nor on disk."""
    session = _session(runtime, session_id)
    if session is None:
        raise LookupError(f"no session {session_id!r}")
    agent = runtime.agents.get(session_id)
    status = ("running" if agent.running else "idle") if agent is not None else "inactive"
    member = runtime.family.member(session_id)
    name = member.name if member is not None and member.parent_session_id else ""
    return _node(runtime, session_id, session, name, status, frozenset())


def _node(
    runtime: TreeRuntime,
    session_id: str,
    session: SessionLog | None,
    name: str,
    status: str,
    above: frozenset[str],
) -> AgentUsage:
    calls, tokens, cost = _tally(session) if session is not None else (0, {}, 0.0)
    children = []
    family = runtime.family
    above = above | {session_id}
    for member in family.children(session_id, deleted=True):  # what was spent stays spent
        if member.session_id in above:  # hand-edited headers can make a loop: cut it
            continue
        child_status = (
            "deleted"
            if family.is_deleted(member.session_id)
            else runtime.child_status(member.session_id)
        )
        child_session = _session(runtime, member.session_id)
        children.append(
            _node(runtime, member.session_id, child_session, member.name, child_status, above)
        )
    total = dict(tokens)
    cost_total = cost
    for child in children:
        for key, value in child["usage_total"].items():
            total[key] = total.get(key, 0) + value
        child_cost = child["cost_total"]
        cost_total = None if cost_total is None or child_cost is None else cost_total + child_cost
    provider, model = session.current_model() if session is not None else ("", "")
    return {
        "session_id": session_id,
        "name": name,
        "notebook_path": session.notebook_path if session is not None else None,
        "model": f"{provider}/{model}" if provider else model,
        "status": status,
        "calls": calls,
        "usage": tokens,
        "usage_total": total,
        "cost": cost,
        "cost_total": cost_total,
        "children": children,
    }


def _session(runtime: TreeRuntime, session_id: str) -> SessionLog | None:
    agent = runtime.agents.get(session_id)
    if agent is not None:
        return agent.session
    try:
        return runtime.repository.read(session_id)
    except SessionError:
        return None
