"""Bridge operations behind the kernel's `rlm.harness`: create, update, delete, get and list
entries of the calling session's stores, the panel's state and its long-poll watch.

Store calls run in a worker thread: a write waits on the store's file lock, which another
process may hold."""

from __future__ import annotations

import asyncio
from typing import Any

from prime_agent_kernel.operations import (
    CREATE_ENTRY,
    DELETE_ENTRY,
    GET_ENTRY,
    HARNESS_STATE,
    LIST_ENTRIES,
    SKILL_PATHS,
    SKILL_SOURCE,
    UPDATE_ENTRY,
    WAIT_FOR_HARNESS_CHANGE,
)

from .bridge import BridgeError
from .caller import CallerContext, Register
from .harness.store import Harness, HarnessError, check_kind
from .ports import RequestOwner
from .skill_modules import skill_source
from .snapshot_transfer import shares_disk

WATCH_POLL_SECONDS = 0.2
WATCH_MAX_SECONDS = 25.0
SOURCES = ("agent", "user")


def _text(payload: dict[str, Any], name: str) -> str:
    value = payload.get(name)
    if not isinstance(value, str) or not value:
        raise BridgeError(400, f"{name} must be a non-empty string")
    return value


def _flag(payload: dict[str, Any]) -> bool:
    value = payload.get("global", False)
    if not isinstance(value, bool):
        raise BridgeError(400, "global_ must be True or False")
    return value


def _fields(payload: dict[str, Any]) -> dict[str, Any]:
    fields = payload.get("fields", {})
    if not isinstance(fields, dict):
        raise BridgeError(400, "fields must be a dict")
    return fields


def _source(ctx: CallerContext, payload: dict[str, Any]) -> str:
    """Who wrote the entry: named in the call, or told by the cell that made the call (the
    kernel sends its execute request's id): the agent's own cell, else the user's."""
    if "source" in payload:
        source = payload["source"]
        if source not in SOURCES:
            raise BridgeError(400, f"source must be one of {', '.join(SOURCES)}")
        return str(source)
    request, kernel = payload.get("request"), ctx.agent.kernel
    if isinstance(request, str) and isinstance(kernel, RequestOwner):
        return "agent" if kernel.owns_request(request) else "user"
    return "agent"


async def _run(call: Any, *args: Any) -> Any:
    try:
        return await asyncio.to_thread(call, *args)
    except HarnessError as exc:
        raise BridgeError(exc.status, str(exc)) from None


def harness_state(harness: Harness) -> dict[str, Any]:
    """Everything the panel shows: both stores' entries, the refinement records (newest last)
    and whatever a store could not read (a damaged store shows no entries, and says why)."""
    records: list[dict[str, Any]] = []
    problems: list[str] = []
    entries: list[dict[str, Any]] = []
    version: dict[str, int] = {}
    for store in harness.stores():
        found, unreadable = store.read_refinements()
        records.extend({**r, "scope": r.get("scope", store.scope)} for r in found)
        problems.extend(f"{store.scope}: {p}" for p in unreadable)
        try:
            state = store.read()
        except HarnessError as exc:
            problems.append(str(exc))
            version[store.scope] = -1
            continue
        version[store.scope] = state.revision
        problems.extend(f"{store.scope}: {p}" for p in state.problems)
        entries.extend(e.to_dict() for e in state.all())
    records.sort(key=lambda r: str(r.get("created_at", "")))
    return {
        "version": version,
        "stamp": harness.stamp(),
        "entries": entries,
        "refinements": records,
        "problems": problems,
    }


def register_harness_operations(register: Register) -> None:
    def harness(ctx: CallerContext) -> Harness:
        result: Harness = ctx.runtime.harnesses.harness_for(ctx.agent.session_id)
        return result

    async def create(ctx: CallerContext, payload: dict[str, Any]) -> dict[str, Any]:
        kind = _kind(payload)
        store = harness(ctx).store(_flag(payload))
        entry = await _run(store.create, kind, _fields(payload), _source(ctx, payload))
        return dict(entry.to_dict())

    async def update(ctx: CallerContext, payload: dict[str, Any]) -> dict[str, Any]:
        kind = _kind(payload)
        store, entry_id = harness(ctx).route(_text(payload, "id"), _flag(payload))
        entry = await _run(store.update, kind, entry_id, _fields(payload), _source(ctx, payload))
        return dict(entry.to_dict())

    async def delete(ctx: CallerContext, payload: dict[str, Any]) -> dict[str, Any]:
        kind = _kind(payload)
        store, entry_id = harness(ctx).route(_text(payload, "id"), _flag(payload))
        entry = await _run(store.delete, kind, entry_id)
        return dict(entry.to_dict())

    async def get(ctx: CallerContext, payload: dict[str, Any]) -> dict[str, Any] | None:
        kind = _kind(payload)
        entry = await _run(harness(ctx).get, kind, _text(payload, "id"))
        return entry.to_dict() if entry is not None else None

    async def list_entries(ctx: CallerContext, payload: dict[str, Any]) -> dict[str, Any]:
        """The entries of the stores that can be read, and why any other cannot."""
        kind = payload.get("kind")
        if kind is not None:
            kind = _kind(payload)
        entries, unavailable = await _run(harness(ctx).read_all, kind)
        return {"entries": [e.to_dict() for e in entries], "unavailable": unavailable}

    async def paths(ctx: CallerContext, payload: dict[str, Any]) -> dict[str, Any]:
        """Where a kernel that shares the host's disk imports skill modules from; any other
        asks for each module's source (`SKILL_SOURCE`)."""
        if not shares_disk(ctx.agent.kernel):
            return {"skill_paths": [], "from_host": True}
        return {"skill_paths": harness(ctx).skill_paths(), "from_host": False}

    async def source(ctx: CallerContext, payload: dict[str, Any]) -> dict[str, Any] | None:
        paths = harness(ctx).skill_paths()
        return await asyncio.to_thread(skill_source, paths, payload.get("name"))

    async def state(ctx: CallerContext, payload: dict[str, Any]) -> dict[str, Any]:
        return await asyncio.to_thread(harness_state, harness(ctx))

    async def watch(ctx: CallerContext, payload: dict[str, Any]) -> dict[str, Any]:
        """The state once it differs from `stamp` (or after `timeout` seconds, unchanged)."""
        seen = payload.get("stamp")
        timeout = payload.get("timeout", WATCH_MAX_SECONDS)
        if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout < 0:
            raise BridgeError(400, "timeout must be a number of seconds")
        stores = harness(ctx)
        deadline = asyncio.get_running_loop().time() + min(float(timeout), WATCH_MAX_SECONDS)
        while stores.stamp() == seen and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(WATCH_POLL_SECONDS)
        changed = stores.stamp() != seen
        return {"changed": changed, **(await asyncio.to_thread(harness_state, stores))}

    register(CREATE_ENTRY, create)
    register(UPDATE_ENTRY, update)
    register(DELETE_ENTRY, delete)
    register(GET_ENTRY, get)
    register(LIST_ENTRIES, list_entries)
    register(SKILL_PATHS, paths)
    register(SKILL_SOURCE, source)
    register(HARNESS_STATE, state)
    register(WAIT_FOR_HARNESS_CHANGE, watch)


def _kind(payload: dict[str, Any]) -> str:
    try:
        return check_kind(payload.get("kind"))
    except HarnessError as exc:
        raise BridgeError(400, str(exc)) from None
