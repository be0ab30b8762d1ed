"""The kernel's namespace seen from the host, and the clean-up of the agent's variables.

The host reads the namespace silently (a harness execution, not a cell) through the kernel
executor's own client; a kernel port without that ability (a test double) reads as None. After a
compaction, `KernelGC` asks the model (one short side call, in the background) which of the
variables that agent cells set are no longer needed, and applies the answer at the next step
boundary: deleted, or replaced by a short summary string. The researcher's own variables (last set
by their cells) are never touched; every change is recorded (`kernel_gc` entry) and told to the
model. Design note: docs/compaction.md.
"""

from __future__ import annotations

import ast
import asyncio
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from .agent_view import AgentView
from .jsonfile import parse_json
from .messages import Message, ModelRequest
from .settings import DEFAULTS

NAMESPACE_EXPRESSION = "__import__('prime_agent_kernel.compact').compact.namespace_json()"


def silent_runner(kernel: Any) -> Any:
    """The `run_silently` of the kernel behind a port (a pending kernel once it arrived)."""
    inner = getattr(kernel, "kernel", None)
    if inner is not None and not hasattr(kernel, "run_silently"):
        kernel = inner
    return getattr(kernel, "run_silently", None)


async def evaluate(kernel: Any, expression: str, timeout: float) -> Any:
    """The value of a Python expression (one returning a str) in the kernel, or None when the
    kernel cannot be asked. Raises RuntimeError when the kernel reports an error."""
    run = silent_runner(kernel)
    if run is None:
        return None
    reply = await run("", timeout, {"value": expression})
    result = (reply.get("user_expressions") or {}).get("value") or {}
    if result.get("status") != "ok":
        raise RuntimeError(f"{result.get('ename', 'error')}: {result.get('evalue', '')}")
    text = result.get("data", {}).get("text/plain", "")
    return ast.literal_eval(text)


async def read_namespace(kernel: Any, timeout: float = 10.0) -> list[dict[str, Any]] | None:
    """The user's top-level names in the kernel (see `prime_agent_kernel.compact.namespace`)."""
    text = await evaluate(kernel, NAMESPACE_EXPRESSION, timeout)
    return None if text is None else list(json.loads(text))


# ---------------------------------------------------------------- the clean-up


APPLY_EXPRESSION = "__import__('prime_agent_kernel.compact').compact.apply_cleanup({actions!r})"
PLAN_MAX_TOKENS = 1_024
ACTIONS = ("delete", "summarize")

GC_SYSTEM = """You review the variables an agent left in its Python kernel after its conversation \
was compacted, and say which are no longer needed. Reply with JSON only:
{"actions": [{"name": "...", "action": "delete" | "summarize", "summary": "...", "reason": "..."}]}
- delete: the value is not needed any more (intermediate results, copies, data already reduced).
- summarize: the value is large and only a few facts of it still matter; `summary` is a short \
string (under 300 characters) that replaces it and keeps those facts.
Only name variables from the list. Keep anything the summary or next steps may still need; when \
unsure, keep it (leave it out). An empty list is a fine answer."""


def code_hash(code: str) -> str:
    """The hash the kernel package records for the cell that set a name (`compact.code_hash`)."""
    return hashlib.sha1(code.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclass
class CleanupPlan:
    actions: list[dict[str, Any]] = field(default_factory=list)
    oversized: list[dict[str, Any]] = field(default_factory=list)
    problem: str | None = None


class KernelGC:
    """Plans a clean-up in the background after a compaction (one short model call) and applies
    it at the next step boundary (before a model call), when no agent cell runs."""

    def __init__(self, agent: AgentView, cap: int = DEFAULTS.snapshot_variable_cap) -> None:
        # Variables over `cap` are reported: snapshots skip them (the runtime sets its cap).
        self.agent = agent
        self.cap = cap
        self.plan: CleanupPlan | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def state(self) -> str | None:
        """`planning`, `ready` (applied at the next boundary) or None."""
        if self._task is not None and not self._task.done():
            return "planning"
        return "ready" if self.plan is not None else None

    def start(self, turn: int, names: list[dict[str, Any]] | None, summary: str) -> None:
        """Plan a clean-up of `names` (read at the compaction) in the background."""
        if names is None or self.state == "planning":
            return
        self._task = asyncio.ensure_future(self._plan(turn, names, summary))

    async def _plan(self, turn: int, names: list[dict[str, Any]], summary: str) -> None:
        oversized = [
            {"name": n["name"], "type": n["type"], "size": n["size"]}
            for n in names
            if int(n.get("size") or 0) > self.cap
        ]
        candidates = agent_names(names, agent_cell_hashes(self.agent.session.path()))
        plan = CleanupPlan(oversized=oversized)
        if candidates:
            try:
                response = await self.agent.side_call(turn, self._request(candidates, summary))
                actions, plan.problem = parse_plan(response.text, response.stop_reason)
                plan.actions = checked_actions(actions, candidates)
            except Exception as exc:  # a failed review changes nothing; say so
                plan.problem = f"the review call failed: {exc}"
        if plan.actions or plan.oversized or plan.problem:
            self.plan = plan

    def _request(self, candidates: dict[str, dict[str, Any]], summary: str) -> ModelRequest:
        listing = "\n".join(
            f"- {n['name']}: {n['type']}, {n['size']:,} bytes, set by cell "
            f"[{(n.get('set_by') or {}).get('execution_count')}]: {n.get('preview', '')}"
            for n in candidates.values()
        )
        text = (
            f"<summary-of-the-work>\n{summary}\n</summary-of-the-work>\n\n"
            f"<variables>\n{listing}\n</variables>\n\nWhich of these are no longer needed?"
        )
        return ModelRequest(
            system=GC_SYSTEM,
            messages=[Message(role="user", text=text)],
            tools=[],
            max_tokens=PLAN_MAX_TOKENS,
            accepts_images=False,
            purpose="kernel_gc",
        )

    async def apply_ready(self, turn: int) -> dict[str, Any] | None:
        """Apply a finished plan: the entry recorded (None: nothing was ready)."""
        plan, self.plan = self.plan, None
        if plan is None:
            return None
        done: list[dict[str, Any]] = []
        if plan.actions:
            try:
                payload = json.dumps(plan.actions)
                done = json.loads(
                    await evaluate(self.agent.kernel, APPLY_EXPRESSION.format(actions=payload), 30)
                    or "[]"
                )
            except Exception as exc:
                plan.problem = f"applying it failed: {exc}"
        entry_fields = cleanup_fields(done, plan, self.cap)
        entry = self.agent.session.append("kernel_gc", turn=turn, **entry_fields)
        self.agent.events.emit("notice", turn=turn, kind="kernel_gc", text=entry_fields["text"])
        return entry

    def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()


def agent_cell_hashes(path: list[dict[str, Any]]) -> set[str]:
    """Hashes of the code of every cell the agent ran in this session."""
    hashes: set[str] = set()
    for entry in path:
        if entry["type"] != "assistant_message":
            continue
        for call in entry.get("tool_calls", []):
            try:
                code = parse_json(call.get("arguments", "")).get("code")
            except (ValueError, AttributeError):
                continue
            if isinstance(code, str):
                hashes.add(code_hash(code))
    return hashes


def agent_names(names: list[dict[str, Any]], agent_hashes: set[str]) -> dict[str, dict[str, Any]]:
    """The names an agent cell set last (never the researcher's own: a name set by their cell,
    or by none we know of, is never a candidate)."""
    return {
        n["name"]: n
        for n in names
        if isinstance(n.get("set_by"), dict) and n["set_by"].get("code") in agent_hashes
    }


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def parse_plan(text: str, stop_reason: str = "") -> tuple[list[dict[str, Any]], str | None]:
    """The actions of the model's reply, fenced or bare JSON; a cut-off or malformed reply is
    reported as such (no action taken)."""
    body = text.strip()
    fenced = _FENCE.search(body)
    if fenced:
        body = fenced.group(1).strip()
    elif body.startswith("```"):
        return [], "the reply was cut off before its JSON ended (no closing fence)"
    start, end = body.find("{"), body.rfind("}")
    if start < 0:
        return [], "the reply holds no JSON object"
    try:
        data = json.loads(body[start : end + 1] if end > start else body[start:])
    except json.JSONDecodeError as exc:
        if stop_reason == "max_tokens" or end <= start or not body.endswith("}"):
            return [], "the reply was cut off before its JSON ended"
        return [], f"the reply is not valid JSON ({exc.msg})"
    actions = data.get("actions") if isinstance(data, dict) else None
    if not isinstance(actions, list):
        return [], 'the reply has no "actions" list'
    return [a for a in actions if isinstance(a, dict)], None


def checked_actions(
    actions: list[dict[str, Any]], candidates: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """Only known actions on candidate names, each with the value's id as planned (a value that
    changes before it is applied is left alone)."""
    out: list[dict[str, Any]] = []
    for action in actions:
        name, kind = action.get("name"), action.get("action")
        if name not in candidates or kind not in ACTIONS or any(a["name"] == name for a in out):
            continue
        summary = str(action.get("summary") or "")[:300] if kind == "summarize" else None
        out.append(
            {
                "name": name,
                "action": kind,
                "summary": summary,
                "reason": str(action.get("reason") or "")[:200],
                "id": candidates[name]["id"],
            }
        )
    return out


def cleanup_fields(done: list[dict[str, Any]], plan: CleanupPlan, cap: int) -> dict[str, Any]:
    """The `kernel_gc` entry: what was deleted, summarised, left alone and is oversized, and the
    text the model and the chat read."""
    deleted = [d["name"] for d in done if d.get("applied") and d["action"] == "delete"]
    summarized = [d["name"] for d in done if d.get("applied") and d["action"] == "summarize"]
    skipped = [{"name": d["name"], "why": d.get("why", "")} for d in done if not d.get("applied")]
    parts: list[str] = []
    if deleted:
        parts.append(f"deleted {', '.join(deleted)}")
    if summarized:
        parts.append(f"replaced by a short summary string: {', '.join(summarized)}")
    if skipped:
        parts.append("left alone: " + ", ".join(f"{s['name']} ({s['why']})" for s in skipped))
    if plan.oversized:
        big = ", ".join(f"{o['name']} ({o['size']:,} bytes)" for o in plan.oversized)
        parts.append(f"over the snapshot cap of {cap:,} bytes (not snapshotted): {big}")
    if plan.problem:
        parts.append(f"review: {plan.problem}")
    text = "Kernel clean-up after compaction: " + ("; ".join(parts) or "nothing to do") + "."
    return {
        "deleted": deleted,
        "summarized": summarized,
        "skipped": skipped,
        "oversized": plan.oversized,
        "problem": plan.problem,
        "actions": done,
        "text": text,
    }
