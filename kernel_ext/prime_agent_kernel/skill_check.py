"""A skill is checked in this kernel before it is saved: its module imports and names a callable.

The prompt advertises every skill to later turns and sessions, so one whose module cannot import
(a missing dependency, an error at import time, a syntax error) or lacks its callable would fail
whoever calls it. `create_skill` and `update_skill` refuse it instead, and nothing is saved. A
module the skill brings (`source=`) runs once for the check, as a scratch module imported from a
temporary file; a module of that name imported already stays as it is.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import tempfile
from types import ModuleType
from typing import Any

SHOWN_NAMES = 10


class SkillCheckError(Exception):
    """The skill's module does not import here, or does not name a callable; says which."""


def check_skill_module(reference: object) -> None:
    """Raise SkillCheckError unless `reference` (a skill's) imports here and names a callable.
    A reference that is not a well-formed python contract is left to the host, which says what
    is wrong with it."""
    if not isinstance(reference, dict) or reference.get("type") != "python":
        return
    name, target, source = (reference.get(k) for k in ("import", "callable", "source"))
    if not isinstance(name, str) or not name or not isinstance(target, str) or not target:
        return
    if source is not None and not isinstance(source, str):
        return
    if source is not None:
        try:
            compile(source, f"{name}.py", "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            return  # the host refuses it, naming the line
    try:
        module = importlib.import_module(name) if source is None else _scratch_import(name, source)
    except Exception as exc:
        raise SkillCheckError(
            f"the skill's module {name!r} does not import in this kernel "
            f"({type(exc).__name__}: {exc}); nothing was saved. Fix the module, or install "
            "what it needs, and try again"
        ) from None
    _callable_in(module, name, target)


def _scratch_import(name: str, source: str) -> ModuleType:
    """Run `source` as module `name` from a temporary file, without keeping it. While it runs
    it is `sys.modules[name]`, as in any import (dataclasses and pickle look modules up there)."""
    previous = sys.modules.get(name)
    with tempfile.TemporaryDirectory(prefix="prime-agent-skill-") as folder:
        path = os.path.join(folder, f"{name}.py")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(source)
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        finally:
            if previous is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = previous
    return module


def _callable_in(module: ModuleType, name: str, target: str) -> None:
    found: Any = module
    for part in target.split("."):
        if not hasattr(found, part):
            defined = sorted(
                key
                for key, value in vars(module).items()
                if callable(value) and not key.startswith("_")
                and getattr(value, "__module__", name) == name
            )  # fmt: skip
            has = ", ".join(defined[:SHOWN_NAMES]) or "no callables of its own"
            raise SkillCheckError(
                f"module {name!r} has no callable {target!r} (it has: {has}); nothing was saved"
            )
        found = getattr(found, part)
    if not callable(found):
        raise SkillCheckError(
            f"{name}.{target} is {_a(type(found).__name__)}, not a callable; nothing was saved"
        )


def _a(noun: str) -> str:
    return f"an {noun}" if noun[:1].lower() in "aeiou" else f"a {noun}"
