"""Reading the kernel's namespace from the host (for compaction summaries and the kernel clean-up).

The host asks the kernel package silently (a harness execution, not a cell) through the kernel
executor's own client; a kernel port without that ability (a test double) reads as None.
"""

from __future__ import annotations

import ast
from typing import Any

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
    import json

    text = await evaluate(kernel, NAMESPACE_EXPRESSION, timeout)
    return None if text is None else list(json.loads(text))
