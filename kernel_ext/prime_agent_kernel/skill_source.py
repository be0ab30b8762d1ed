"""Skill modules from their source as the host reads it, for a kernel that does not share the
host's disk (a gateway kernel, docs/gateway.md section 2.4).

The harness finder asks `harness.skill_source(name)` instead of looking in the stores' folders:
the host picks the module from the stores it offers (the same rules as `skill_paths`: a local
store only when it is trusted), so the kernel cannot name a file outside them. The module gets
`__file__ = "<skill:name>"`, its source is in `linecache` for tracebacks, and a replaced module
is told apart by its sha256.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import linecache
from collections.abc import Callable
from typing import Any

from .operations import SKILL_SOURCE

PREFIX = "<skill:"


def origin(name: str) -> str:
    return f"{PREFIX}{name}>"


def from_host(path: object) -> bool:
    """The module (its `__file__`) came from the host's source."""
    return isinstance(path, str) and path.startswith(PREFIX) and path.endswith(">")


class SourceLoader(importlib.abc.Loader):
    def __init__(self, name: str, source: str) -> None:
        self.name = name
        self.source = source

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None

    def exec_module(self, module: Any) -> None:
        where = origin(self.name)
        lines = self.source.splitlines(keepends=True)
        linecache.cache[where] = (len(self.source), None, lines, where)
        exec(compile(self.source, where, "exec", dont_inherit=True), module.__dict__)

    def get_source(self, fullname: str) -> str:
        return self.source


def _source(call: Callable[[str, dict[str, Any]], Any], name: str) -> dict[str, Any] | None:
    answer = call(SKILL_SOURCE, {"name": name})
    return answer if isinstance(answer, dict) else None


def find_spec(
    call: Callable[[str, dict[str, Any]], Any], name: str
) -> tuple[importlib.machinery.ModuleSpec, str] | None:
    """The spec of skill module `name` and its sha256, or None (no skill module of that name)."""
    answer = _source(call, name)
    if answer is None:
        return None
    loader = SourceLoader(name, str(answer["source"]))
    spec = importlib.util.spec_from_loader(name, loader, origin=origin(name))
    if spec is None:
        return None
    spec.has_location = True  # `__file__` is the readable `<skill:name>`
    return spec, str(answer["sha256"])


def current_sha256(call: Callable[[str, dict[str, Any]], Any], name: str) -> str | None:
    """The sha256 of the module the host holds now (None: it is gone, or the host is not
    reached: the module keeps running as it is)."""
    try:
        answer = _source(call, name)
    except Exception:
        return None
    return None if answer is None else str(answer["sha256"])
