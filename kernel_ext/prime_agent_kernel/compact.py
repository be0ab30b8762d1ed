"""`compact`: the agent's context (status, a compaction on request) and what the host needs to know
about the kernel's variables for a compaction and a kernel clean-up.

await compact.status()   # tokens, context_window, percent, scheduled
await compact.run(instructions="keep the numbers of the fit")

The namespace tracker remembers, per name, the cell that last set it (its execution count and a
hash of its code), so the host can tell the agent's variables from the researcher's own: only
names last set by agent cells are ever cleaned up.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import sys
import types
from collections.abc import Awaitable, Callable
from typing import Any

from .operations import COMPACTION_STATUS, SCHEDULE_COMPACTION

Call = Callable[[str, dict[str, Any]], Awaitable[Any]]

_len, _isinstance, _int = builtins.len, builtins.isinstance, builtins.int  # users shadow builtins


class Compact:
    """Bound as `compact` in an agent's kernel."""

    def __init__(self, call: Call) -> None:
        self._call = call

    async def status(self) -> dict[str, Any]:
        """Tokens in the context now, the context window, percent used, whether a compaction is
        scheduled (and the threshold at which one starts by itself)."""
        result: dict[str, Any] = await self._call(COMPACTION_STATUS, {})
        return result

    async def run(self, instructions: str | None = None) -> dict[str, Any]:
        """Schedule a compaction before the next model call (the turn then goes on):
        `{scheduled: True, note}` or `{scheduled: False, reason}`. `instructions` say what the
        summary must keep."""
        result: dict[str, Any] = await self._call(
            SCHEDULE_COMPACTION, {"instructions": instructions}
        )
        return result

    def __repr__(self) -> str:
        return "compact: await compact.status(), await compact.run(instructions=None)"


def code_hash(code: str) -> str:
    return hashlib.sha1(code.encode("utf-8", "surrogatepass")).hexdigest()[:16]


class NamespaceTracker:
    """Which cell last set each top-level name (post_run_cell; silent harness runs are not cells
    and are not counted)."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self.last_set: dict[str, dict[str, Any]] = {}
        self._before: dict[str, int] = {}

    def register(self) -> None:
        self.shell.events.register("pre_run_cell", self.pre_run_cell)
        self.shell.events.register("post_run_cell", self.post_run_cell)

    def _ids(self) -> dict[str, int]:
        return {k: id(v) for k, v in self.shell.user_ns.items() if not k.startswith("_")}

    def pre_run_cell(self, info: Any) -> None:
        self._before = self._ids()

    def post_run_cell(self, result: Any) -> None:
        now = self._ids()
        raw = getattr(getattr(result, "info", None), "raw_cell", "") or ""
        cell = {"execution_count": getattr(result, "execution_count", None), "code": None}
        for name, ident in now.items():
            if self._before.get(name) != ident:
                self.last_set[name] = {**cell, "code": code_hash(raw)}
        for name in list(self.last_set):
            if name not in now:
                del self.last_set[name]


_trackers: dict[int, NamespaceTracker] = {}


def track(shell: Any) -> NamespaceTracker:
    """The tracker of `shell`, registered once."""
    tracker = _trackers.get(id(shell))
    if tracker is None or tracker.shell is not shell:
        tracker = _trackers[id(shell)] = NamespaceTracker(shell)
        tracker.register()
    return tracker


def size_of(value: Any) -> int:
    """Bytes a value holds, roughly: arrays and frames report their own, containers one level."""
    nbytes = getattr(value, "nbytes", None)
    if _isinstance(nbytes, _int):
        return nbytes
    if type(value).__module__.startswith("pandas"):
        try:
            usage = value.memory_usage(deep=True)
            return _int(usage.sum() if hasattr(usage, "sum") else usage)
        except Exception:
            pass
    size = sys.getsizeof(value, 0)
    if _isinstance(value, dict):
        items = list(value.items())[:10_000]
        size += sum(sys.getsizeof(k, 0) + sys.getsizeof(v, 0) for k, v in items)
    elif _isinstance(value, list | tuple | set | frozenset):
        size += sum(sys.getsizeof(v, 0) for v in list(value)[:10_000])
    return size


def namespace(shell: Any) -> list[dict[str, Any]]:
    """The user's top-level names (not hidden, not private, not modules) with their type, size
    and the cell that last set them (None: set before tracking began, or by a silent run)."""
    tracker = track(shell)
    hidden = getattr(shell, "user_ns_hidden", {})
    out: list[dict[str, Any]] = []
    for name, value in list(shell.user_ns.items()):
        if name.startswith("_") or name in hidden or _isinstance(value, types.ModuleType):
            continue
        out.append(
            {
                "name": name,
                "type": f"{type(value).__module__}.{type(value).__qualname__}".removeprefix(
                    "builtins."
                ),
                "size": size_of(value),
                "id": id(value),
                "set_by": tracker.last_set.get(name),
                "preview": _preview(value),
            }
        )
    return out


def namespace_json() -> str:
    from IPython import get_ipython

    return json.dumps(namespace(get_ipython()))


def _preview(value: Any, limit: int = 120) -> str:
    try:
        text = repr(value)
    except Exception as exc:
        text = f"<repr failed: {type(exc).__name__}>"
    return text if _len(text) <= limit else text[: limit - 3] + "..."


def apply_cleanup(actions_json: str) -> str:
    """Apply a clean-up planned by the host: `[{name, action, summary, id}]`. A name whose
    value changed since it was planned (another id) is left alone. Returns what was done."""
    from IPython import get_ipython

    shell = get_ipython()
    done: list[dict[str, Any]] = []
    for action in json.loads(actions_json):
        name = action["name"]
        if name not in shell.user_ns:
            done.append({**action, "applied": False, "why": "no longer defined"})
        elif id(shell.user_ns[name]) != action.get("id"):
            done.append({**action, "applied": False, "why": "changed since the plan was made"})
        elif action["action"] == "delete":
            del shell.user_ns[name]
            done.append({**action, "applied": True})
        else:
            shell.user_ns[name] = str(action.get("summary") or "")
            done.append({**action, "applied": True})
    tracker = track(shell)
    for item in done:
        if item["applied"] and item["action"] == "delete":
            tracker.last_set.pop(item["name"], None)
    return json.dumps(done)
