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


class HostModules:
    """Skill modules as the host hands them over. A name the host has no module for is not
    asked again until the next cell or `importlib.invalidate_caches()` (a module that failed to
    import is often tried more than once in a cell); a lookup made while one is under way (the
    request itself may import a module lazily) finds nothing, and an unreachable host finds
    nothing, as a finder without folders would."""

    def __init__(self, call: Callable[[str, dict[str, Any]], Any]) -> None:
        self._call = call
        self._missing: set[str] = set()
        self._asking = False

    def _source(self, name: str) -> dict[str, Any] | None:
        if self._asking:
            raise LookupError("a lookup is under way")
        self._asking = True
        try:
            answer = self._call(SKILL_SOURCE, {"name": name})
        finally:
            self._asking = False
        return answer if isinstance(answer, dict) else None

    def find_spec(self, name: str) -> tuple[importlib.machinery.ModuleSpec, str] | None:
        """The spec of skill module `name` and its sha256, or None."""
        if name in self._missing:
            return None
        try:
            answer = self._source(name)
        except Exception:
            return None
        if answer is None:
            self._missing.add(name)
            return None
        loader = SourceLoader(name, str(answer["source"]))
        spec = importlib.util.spec_from_loader(name, loader, origin=origin(name))
        if spec is None:
            return None
        spec.has_location = True  # `__file__` is the readable `<skill:name>`
        return spec, str(answer["sha256"])

    def current_sha256(self, name: str) -> str | None:
        """The sha256 of the module the host holds now (None: it is gone, or the host is not
        reached: the module keeps running as it is)."""
        try:
            answer = self._source(name)
        except Exception:
            return None
        return None if answer is None else str(answer["sha256"])

    def forget_missing(self) -> None:
        self._missing.clear()
