"""Bridge operations are declared once (`prime_agent_kernel/operations.py`) and the kernel's
calls and the host's handlers cannot drift from the declarations: every declared operation has a
handler on the host that reads exactly its arguments, every call in the kernel package sends only
declared arguments, every operation a kernel call makes is made by the kernel package and the
others (host tools' only) are not, and docs/bridge.md's table is the declarations'.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import prime_agent_kernel
import pytest
from prime_agent_kernel import operations
from prime_agent_kernel.operations import OPERATIONS, Operation, check_call, docs_with_table

from prime_agent_lab.core.bridge import BridgeService
from prime_agent_lab.core.runtime import AgentRuntime
from prime_agent_lab.core.sessions import SessionRepository
from prime_agent_lab.core.settings import Settings
from prime_agent_lab.core.trust import Signer
from tests.python_source import parse

ROOT = Path(__file__).resolve().parent.parent
KERNEL_PACKAGE = Path(prime_agent_kernel.__file__).parent
CONSTANTS = {name: op for name, op in vars(operations).items() if isinstance(op, Operation)}


@pytest.fixture
def runtime(tmp_path: Path) -> AgentRuntime:
    """A runtime as both hosts build one; its bridge holds every operation the host offers."""
    environment = SimpleNamespace(kernel_key=lambda kernel_id: None)
    signer = Signer.load(tmp_path / "secret")
    return AgentRuntime(SessionRepository(tmp_path / "sessions"), environment, Settings(), signer)


# ---------------------------------------------------------------- the host


def test_the_host_offers_exactly_the_declared_operations(runtime: AgentRuntime) -> None:
    assert sorted(runtime.bridge.operations) == sorted(OPERATIONS)


def test_every_handler_reads_exactly_the_arguments_its_operation_declares(
    runtime: AgentRuntime,
) -> None:
    drift = {}
    for name, op in OPERATIONS.items():
        handler = inspect.unwrap(runtime.bridge.handler(name))
        read = payload_keys(handler)
        if read != set(op.arguments):
            drift[name] = {"declared": sorted(op.arguments), "read by the host": sorted(read)}
    assert drift == {}


def test_an_undeclared_operation_cannot_be_registered(runtime: AgentRuntime) -> None:
    async def handler(caller: Any, payload: dict[str, Any]) -> None:
        return None

    with pytest.raises(ValueError, match=r"'rlm\.undeclared' is not declared in"):
        runtime.bridge.register("rlm.undeclared", handler)
    bare = BridgeService(lambda kernel_id: None, lambda kernel_id: None)  # no table: any name
    bare.register("rlm.undeclared", handler)


# ---------------------------------------------------------------- the kernel


def test_every_kernel_call_sends_only_declared_arguments() -> None:
    calls = list(kernel_calls())
    assert calls, "no call of a declared operation found in the kernel package"
    wrong = [
        f"{where}: {op} sends {sorted(keys)}, declares {sorted(op.arguments)}"
        for where, op, keys in calls
        if not keys <= set(op.arguments)
    ]
    assert wrong == []


def test_the_kernel_makes_every_operation_a_kernel_call_should_and_no_other() -> None:
    used = {CONSTANTS[name] for name in kernel_names_used()}
    should = {op for op in OPERATIONS.values() if op.called_by}
    assert sorted(should - used) == []  # declared for a kernel call that no kernel code makes
    assert sorted(used - should) == []  # made by the kernel, declared as the host tools' only


def test_a_kernel_call_with_an_undeclared_operation_or_argument_fails_before_anything_is_sent() -> (
    None
):
    with pytest.raises(ValueError, match=r"'rlm\.usage' is not declared in"):
        check_call("rlm.usage", {})
    with pytest.raises(ValueError, match="takes prompt, name, model, not task"):
        check_call(operations.SPAWN_SUBAGENT, {"prompt": "p", "task": "t"})
    assert check_call("subagents.list", {}) is operations.LIST_SUBAGENTS


def test_the_docs_table_of_operations_is_current() -> None:
    path = ROOT / "docs" / "bridge.md"
    text = path.read_text(encoding="utf-8")
    assert docs_with_table(text) == text, (
        "docs/bridge.md's table of operations is stale: run "
        "`python -m prime_agent_kernel.operations --docs docs/bridge.md`"
    )


# ---------------------------------------------------------------- reading the code


def payload_keys(
    function: Callable[..., Any], parameter: str = "payload", bound: dict[str, str] | None = None
) -> set[str]:
    """The keys `function` reads from its `parameter` (`p.get("k")`, `p["k"]`, `"k" in p`), also
    through the helpers it hands `parameter` to (`payload_number(payload, "delay", ...)`)."""
    tree = parse(textwrap.dedent(inspect.getsource(function)))
    names = dict(bound or {})  # parameter -> the literal a caller passed for it
    found: set[str] = set()

    def literal(node: ast.expr) -> set[str]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return {node.value}
        if isinstance(node, ast.Name) and node.id in names:
            return {names[node.id]}
        return set()

    def is_payload(node: ast.expr) -> bool:
        return isinstance(node, ast.Name) and node.id == parameter

    for node in ast.walk(tree.body[0]):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and is_payload(node.func.value)
            and node.func.attr in ("get", "pop")
            and node.args
        ):
            found |= literal(node.args[0])
        elif isinstance(node, ast.Subscript) and is_payload(node.value):
            found |= literal(node.slice)
        elif isinstance(node, ast.Compare) and any(is_payload(c) for c in node.comparators):
            found |= literal(node.left)
        elif isinstance(node, ast.Call) and any(is_payload(a) for a in node.args):
            helper = _resolve(node.func, function)
            if helper is None:
                continue
            signature = list(inspect.signature(helper).parameters)
            passed: dict[str, str] = {}
            target = ""
            for position, argument in enumerate(node.args):
                if position >= len(signature):
                    break
                if is_payload(argument):
                    target = signature[position]
                elif keys := literal(argument):
                    passed[signature[position]] = next(iter(keys))
            for keyword in node.keywords:
                if keyword.arg and (keys := literal(keyword.value)):
                    passed[keyword.arg] = next(iter(keys))
            found |= payload_keys(helper, target, passed)
    return found


def _resolve(node: ast.expr, function: Callable[..., Any]) -> Callable[..., Any] | None:
    """The Python function a call in `function` names, from its closure or its module."""
    if not isinstance(node, ast.Name):
        return None
    scope = inspect.getclosurevars(function)
    value = {**scope.builtins, **scope.globals, **scope.nonlocals}.get(node.id)
    if value is None:
        value = function.__globals__.get(node.id)
    return value if inspect.isfunction(value) else None


def kernel_sources() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(KERNEL_PACKAGE.glob("*.py")):
        if path.name != "operations.py":
            yield path, parse(path.read_text(encoding="utf-8"))


def kernel_names_used() -> set[str]:
    """The operation constants the kernel package names outside their declaration."""
    return {
        node.id
        for _, tree in kernel_sources()
        for node in ast.walk(tree)
        if isinstance(node, ast.Name) and node.id in CONSTANTS
    }


def kernel_calls() -> Iterator[tuple[str, Operation, set[str]]]:
    """Each call `f(OPERATION, payload)` in the kernel package with the keys of its payload: a
    dict written in the call, or the dict last assigned to the name it passes."""
    for path, tree in kernel_sources():
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            dicts: dict[str, set[str]] = {}
            for node in sorted(ast.walk(function), key=lambda n: getattr(n, "lineno", 0)):
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
                    for target in node.targets:
                        if isinstance(target, ast.Name):
                            dicts[target.id] = _dict_keys(node.value)
                if not isinstance(node, ast.Call) or len(node.args) < 2:
                    continue
                first, payload = node.args[0], node.args[1]
                if not (isinstance(first, ast.Name) and first.id in CONSTANTS):
                    continue
                if isinstance(payload, ast.Dict):
                    keys = _dict_keys(payload)
                elif isinstance(payload, ast.Name) and payload.id in dicts:
                    keys = dicts[payload.id]
                else:
                    continue
                yield f"{path.name}:{node.lineno}", CONSTANTS[first.id], keys


def _dict_keys(node: ast.Dict) -> set[str]:
    return {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
