"""`rlm.harness`: the agent's continual harness (prompt notes, memories, skills, sub-agent
specs), kept by the host in this session's store (`local`) or the machine's (`global_=True`).

rlm.harness.create_memory("flaky test", "retry three times before failing")
rlm.harness.update_memory("flaky_test", content="retry five times")
rlm.harness.list("memory"); rlm.harness.get("memory", "flaky_test").content
rlm.harness.create_skill("fit curve", "Fit a polynomial", reference={"type": "python",
    "import": "fit_tools", "callable": "fit"}, arguments={"x": "list", "y": "list"},
    source="def fit(x, y): ...")

Calls are synchronous: each is one signed request to the host, which owns the stores, checks
every entry and keeps concurrent writers apart. Skill modules live in the stores' `skills/`
directories, which this kernel imports from (a finder at the end of `sys.meta_path`).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import re
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from . import skill_source
from .bridge import BridgeError
from .files import MiB, UnreadableFile, read_bytes
from .operations import (
    CREATE_ENTRY,
    DELETE_ENTRY,
    GET_ENTRY,
    HARNESS_STATE,
    LIST_ENTRIES,
    SKILL_PATHS,
    UPDATE_ENTRY,
)
from .skill_check import SkillCheckError, check_skill_module

SyncCall = Callable[[str, dict[str, Any]], Any]

KINDS = ("prompt", "memory", "skill", "subagent")
_REFUSED = re.compile(r"^host refused the call \(\d+\): ")


class HarnessError(BridgeError):
    """A harness call the host refused; the message says why and what to do instead."""


class HarnessEntry:
    """One entry: `entry.id`, `entry.kind`, `entry.title`, `entry.content`, `entry.version`,
    `entry.scope`, `entry.path`, `entry.reference`, `entry.arguments`, `entry.metadata`,
    `entry.source`, `entry.created_at`, `entry.updated_at`; `entry.to_dict()`."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = dict(data)

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["_data"][name]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, name: str) -> Any:
        return self._data[name]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HarnessEntry) and other._data == self._data

    __hash__ = None  # type: ignore[assignment]

    def to_dict(self) -> dict[str, Any]:
        return dict(self._data)

    def __dir__(self) -> list[str]:
        return [*self._data, "to_dict"]

    def __repr__(self) -> str:
        d = self._data
        content = " ".join(str(d.get("content", "")).split())
        if len(content) > 80:
            content = content[:79] + "…"
        return (
            f"<{d.get('kind')} {d.get('scope')}:{d.get('id')} v{d.get('version')} "
            f"{d.get('title')!r}: {content!r}>"
        )


def _global(global_: bool, extra: dict[str, Any]) -> bool:
    """`global_=True`, or `**{"global": True}` (`global` is a keyword in Python)."""
    unknown = set(extra) - {"global"}
    if unknown:
        raise TypeError(f"unexpected argument(s): {', '.join(sorted(unknown))}")
    flag = extra.get("global", global_)
    if not isinstance(flag, bool):
        raise TypeError("global_ must be True or False")
    return flag


def _module_text(source: str | None, module_file: str | os.PathLike[str] | None) -> str | None:
    if source is not None and module_file is not None:
        raise TypeError("give the skill's module as source= or module_file=, not both")
    if module_file is not None:
        with open(module_file, encoding="utf-8") as handle:
            return handle.read()
    return source


def _check_module_name_free(module: object) -> None:
    """A skill that brings its module needs a name nothing else in this kernel provides: the
    skill finder comes last, so an installed package of that name would always win."""
    if not isinstance(module, str) or "." in module:
        return  # the host explains what is wrong with it
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return
    if (
        spec is None
        or spec.origin is None
        or _finder is None
        or skill_source.from_host(spec.origin)
    ):
        return
    where = os.path.dirname(os.path.abspath(spec.origin))
    if any(os.path.abspath(p) == where for p in _finder.paths()):
        return  # a skill's own module (this skill's, being replaced, or another's)
    raise HarnessError(
        f"module name {module!r} is already importable in this kernel ({spec.origin}); "
        "a skill's own module needs a name nothing else provides"
    )


def _check_skill(kind: str, fields: dict[str, Any]) -> None:
    """A skill's module must import here and name a callable before the host saves it."""
    if kind != "skill" or fields.get("reference") is None:
        return
    try:
        check_skill_module(fields["reference"])
    except SkillCheckError as exc:
        raise HarnessError(str(exc)) from None


def _current_request() -> str | None:
    """The id of the execute request running this code: the host knows whether it sent it
    (the agent's cell) or another client did (the user's), and records the entry's source."""
    try:
        from IPython import get_ipython

        return str(get_ipython().kernel.get_parent()["header"]["msg_id"])
    except Exception:  # not in a kernel, or no request: the host assumes the agent
        return None


def _method(kind: str) -> str:
    return "prompt_note" if kind == "prompt" else kind


class HarnessWarning(UserWarning):
    """A harness store was skipped (its file is damaged), or a skill module replaced by another
    writer failed to reload; the message says which."""


MAX_MODULE_BYTES = MiB  # a skill's module source is at most 200,000 characters


class SkillLoader(importlib.machinery.SourceFileLoader):
    """Compiles a skill module from its source every time: bytecode caches are keyed on the
    source's mtime in whole seconds and its size, so a module replaced within the same second
    by one of the same size would otherwise run the old code."""

    def get_code(self, fullname: str) -> Any:
        path = self.get_filename(fullname)
        return compile(self.get_data(path), path, "exec", dont_inherit=True)

    def get_data(self, path: str) -> bytes:
        """The module's source, never blocking on a pipe nor read past MAX_MODULE_BYTES."""
        try:
            return read_bytes(path, MAX_MODULE_BYTES)
        except UnreadableFile as exc:
            raise ImportError(f"skill module {exc}", path=path) from None


def _signature(path: str) -> tuple[int, int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_ino, stat.st_mtime_ns, stat.st_size)


class SkillFinder(importlib.abc.MetaPathFinder):
    """Finds skill modules in the harness stores' `skills/` directories. It sits last on
    `sys.meta_path`, so it is only asked about names nothing else provides, and asks the host
    for the directories once."""

    RETRY_AFTER = 30.0

    def __init__(self, call: SyncCall) -> None:
        self._call = call
        self._paths: list[str] | None = None
        self._failed_at = -self.RETRY_AFTER
        self._asking = False
        self.from_host = False  # the host hands modules' source over (its disk is not ours)
        self._host = skill_source.HostModules(call)
        # module name -> (its file, the file's signature, or the source's sha256, when loaded)
        self.loaded: dict[str, tuple[str, object]] = {}

    def paths(self) -> list[str]:
        due = time.monotonic() - self._failed_at > self.RETRY_AFTER
        if self._paths is None and not self._asking and due:
            # The request itself may import optional modules nobody has: those misses come
            # back here and must not ask again.
            self._asking = True
            try:
                answer = self._call(SKILL_PATHS, {})
                self.from_host = bool(answer.get("from_host"))
                self._paths = list(answer["skill_paths"])
            except Exception:  # no host yet: imports go on as if the finder were not there
                self._failed_at = time.monotonic()
            finally:
                self._asking = False
        return self._paths or []

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if path is not None or "." in fullname:
            return None
        paths = self.paths()
        if self.from_host and self._paths is not None:
            found = self._host.find_spec(fullname)
            if found is None:
                return None
            self.loaded[fullname] = (str(found[0].origin), found[1])
            return found[0]
        spec = importlib.machinery.PathFinder.find_spec(fullname, paths)
        if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
            return None  # a skill module is one .py file: never a package, .so or .pyc
        if spec.submodule_search_locations is not None:
            return None
        spec.loader = SkillLoader(fullname, spec.origin)
        spec.cached = None
        self.loaded[fullname] = (spec.origin, _signature(spec.origin))
        return spec

    def refresh(self) -> list[str]:
        """Reload the imported skill modules whose file was replaced since they were loaded
        (another session updated a global skill, a refinement changed one); the names. A module
        that no longer imports is dropped, so the next import raises its error, with a
        warning; a module whose file was deleted keeps running as it is."""
        reloaded: list[str] = []
        self._host.forget_missing()
        for name, (origin, signature) in list(self.loaded.items()):
            module = sys.modules.get(name)
            if module is None or getattr(module, "__file__", None) != origin:
                continue
            now: object = (
                self._host.current_sha256(name)
                if skill_source.from_host(origin)
                else _signature(origin)
            )
            if now is None or now == signature:
                continue
            try:
                importlib.reload(module)
            except Exception as exc:
                sys.modules.pop(name, None)
                self.loaded[name] = (origin, now)
                warnings.warn(
                    f"skill module {name!r} was replaced by another writer and no longer "
                    f"imports ({type(exc).__name__}: {exc}); fix it with update_skill",
                    HarnessWarning,
                    stacklevel=2,
                )
                continue
            reloaded.append(name)
        return reloaded

    def invalidate_caches(self) -> None:
        self._host.forget_missing()

    def owns(self, module: Any) -> bool:
        if skill_source.from_host(getattr(module, "__file__", None)):
            return True
        where = os.path.dirname(os.path.abspath(getattr(module, "__file__", "") or ""))
        return any(os.path.abspath(p) == where for p in self.paths())


_finder: SkillFinder | None = None


def forget_paths() -> None:
    """The next import asks the host again where skill modules are (a store was trusted)."""
    if _finder is not None:
        _finder._paths = None
        _finder._failed_at = -SkillFinder.RETRY_AFTER


def install_finder(call: SyncCall) -> SkillFinder:
    """One finder per kernel (replaced when the kernel is configured again)."""
    global _finder
    finder = SkillFinder(call)
    if _finder is not None:
        finder.loaded.update(_finder.loaded)
        if _finder in sys.meta_path:
            sys.meta_path.remove(_finder)
    _finder = finder
    sys.meta_path.append(finder)
    return finder


def watch_skill_modules(shell: Any) -> None:
    """Before each cell, reload the skill modules another writer replaced (one `stat` per
    imported skill module)."""
    if _refresh_before_cell not in shell.events.callbacks["pre_run_cell"]:
        shell.events.register("pre_run_cell", _refresh_before_cell)


def _refresh_before_cell(info: Any = None) -> None:
    if _finder is not None:
        _finder.refresh()


class Harness:
    """Bound as `rlm.harness`. Kinds: `prompt` (narrow behaviour notes), `memory` (facts,
    decisions, failures), `skill` (a Python procedure: reference + arguments), `subagent` (a
    reusable delegation spec). Every call takes `global_=True` for the store every session
    shares; ids shown as `local:x` / `global:x` work too."""

    def __init__(self, call: SyncCall) -> None:
        self._call_host = call

    def _call(self, op: str, payload: dict[str, Any]) -> Any:
        try:
            return self._call_host(op, payload)
        except BridgeError as exc:
            raise HarnessError(_REFUSED.sub("", str(exc))) from None

    # ---------------------------------------------------------------- generic

    def create(
        self, kind: str, title: str, content: str, *, global_: bool = False, **fields: Any
    ) -> HarnessEntry:
        """A new entry (its id: `id=` or a slug of the title); fails if the id exists."""
        scope = _global(global_, {k: fields.pop(k) for k in list(fields) if k == "global"})
        _check_skill(kind, fields)
        payload = {
            "kind": kind,
            "fields": {"title": title, "content": content, **fields},
            "global": scope,
            "request": _current_request(),
        }
        entry = HarnessEntry(self._call(CREATE_ENTRY, payload))
        self._reload_skill(entry)
        return entry

    def update(self, kind: str, id: str, *, global_: bool = False, **fields: Any) -> HarnessEntry:
        """Change some fields of an existing entry (the others stay); its version rises."""
        scope = _global(global_, {k: fields.pop(k) for k in list(fields) if k == "global"})
        fields = {k: v for k, v in fields.items() if v is not None}
        _check_skill(kind, fields)
        payload = {
            "kind": kind,
            "id": id,
            "fields": fields,
            "global": scope,
            "request": _current_request(),
        }
        entry = HarnessEntry(self._call(UPDATE_ENTRY, payload))
        self._reload_skill(entry)
        return entry

    def delete(self, kind: str, id: str, *, global_: bool = False, **extra: Any) -> HarnessEntry:
        """Remove an entry; returns it as it was."""
        payload = {"kind": kind, "id": id, "global": _global(global_, extra)}
        return HarnessEntry(self._call(DELETE_ENTRY, payload))

    def get(self, kind: str, id: str) -> HarnessEntry | None:
        """The whole entry (`local:`/`global:` prefix, or the local store first), or None."""
        found = self._call(GET_ENTRY, {"kind": kind, "id": id})
        return HarnessEntry(found) if found is not None else None

    def list(self, kind: str | None = None) -> list[HarnessEntry]:
        """Entries of both scopes (of one kind, or all), sorted by kind, path, title, id. A
        store whose file is damaged is skipped with a warning that names the file."""
        answer = self._call(LIST_ENTRIES, {"kind": kind})
        for reason in answer.get("unavailable") or []:
            warnings.warn(f"rlm.harness: {reason}", HarnessWarning, stacklevel=2)
        return [HarnessEntry(e) for e in answer["entries"]]

    # ---------------------------------------------------------------- per kind

    def create_prompt_note(
        self, title: str, content: str, *, id: str | None = None, path: str | None = None,
        metadata: dict[str, Any] | None = None, global_: bool = False, **extra: Any,
    ) -> HarnessEntry:  # fmt: skip
        """A narrow behaviour note the prompt shows you on every call (grouped under `policy`)."""
        return self.create(
            "prompt", title, content, id=id, path=path, metadata=metadata,
            global_=_global(global_, extra),
        )  # fmt: skip

    def create_memory(
        self, title: str, content: str, *, id: str | None = None, path: str | None = None,
        metadata: dict[str, Any] | None = None, global_: bool = False, **extra: Any,
    ) -> HarnessEntry:  # fmt: skip
        """A fact, decision or failure worth remembering."""
        return self.create(
            "memory", title, content, id=id, path=path, metadata=metadata,
            global_=_global(global_, extra),
        )  # fmt: skip

    def create_subagent(
        self, title: str, content: str, *, id: str | None = None, path: str | None = None,
        metadata: dict[str, Any] | None = None, global_: bool = False, **extra: Any,
    ) -> HarnessEntry:  # fmt: skip
        """A reusable delegation spec: who the sub-agent is and how it works. To use it, write
        a task from it and `await rlm(task)`."""
        return self.create(
            "subagent", title, content, id=id, path=path, metadata=metadata,
            global_=_global(global_, extra),
        )  # fmt: skip

    def create_skill(
        self, title: str, content: str, *, reference: dict[str, Any] | None = None,
        arguments: dict[str, Any] | None = None, source: str | None = None,
        module_file: str | os.PathLike[str] | None = None, id: str | None = None,
        path: str | None = None, metadata: dict[str, Any] | None = None, global_: bool = False,
        **extra: Any,
    ) -> HarnessEntry:  # fmt: skip
        """A repeatable procedure backed by Python: `reference={"type": "python", "import":
        module, "callable": function}` and an `arguments` schema ({} for none). The module is
        one the kernel imports already, or the skill brings it: `source=` (its text) or
        `module_file=` (a .py file, copied); it is importable at once. A module that does not
        import in this kernel, or has no such callable, is refused and nothing is saved."""
        text = _module_text(source, module_file)
        if text is not None and isinstance(reference, dict):
            _check_module_name_free(reference.get("import"))
            reference = {**reference, "source": text}
        return self.create(
            "skill", title, content, reference=reference, arguments=arguments, id=id,
            path=path, metadata=metadata, global_=_global(global_, extra),
        )  # fmt: skip

    def update_prompt_note(self, id: str, **fields: Any) -> HarnessEntry:
        return self.update("prompt", id, **fields)

    def update_memory(self, id: str, **fields: Any) -> HarnessEntry:
        return self.update("memory", id, **fields)

    def update_subagent(self, id: str, **fields: Any) -> HarnessEntry:
        return self.update("subagent", id, **fields)

    def update_skill(
        self, id: str, *, source: str | None = None,
        module_file: str | os.PathLike[str] | None = None, **fields: Any,
    ) -> HarnessEntry:  # fmt: skip
        """Change a skill; a new `source=`/`module_file=` replaces its module (reloaded). As
        at create, a module that does not import here is refused and the old one stays."""
        text = _module_text(source, module_file)
        if text is not None:
            reference = fields.get("reference")
            if reference is None:
                current = self.get("skill", id)
                if current is None:
                    raise HarnessError(f"no skill with id {id!r}; rlm.harness.list('skill')")
                reference = current.reference
            _check_module_name_free(reference.get("import"))
            fields["reference"] = {**reference, "source": text}
        return self.update("skill", id, **fields)

    def delete_prompt_note(self, id: str, **extra: Any) -> HarnessEntry:
        return self.delete("prompt", id, **extra)

    def delete_memory(self, id: str, **extra: Any) -> HarnessEntry:
        return self.delete("memory", id, **extra)

    def delete_skill(self, id: str, **extra: Any) -> HarnessEntry:
        return self.delete("skill", id, **extra)

    def delete_subagent(self, id: str, **extra: Any) -> HarnessEntry:
        return self.delete("subagent", id, **extra)

    # ---------------------------------------------------------------- skills, panel

    def skill(self, id: str) -> Callable[..., Any]:
        """The callable a skill names, imported now (`rlm.harness.skill("fit_curve")(x, y)`)."""
        entry = self.get("skill", id)
        if entry is None:
            raise HarnessError(f"no skill with id {id!r}; rlm.harness.list('skill') lists them")
        module = importlib.import_module(entry.reference["import"])
        target: Any = module
        for part in str(entry.reference["callable"]).split("."):
            target = getattr(target, part)
        return target  # type: ignore[no-any-return]

    def _reload_skill(self, entry: HarnessEntry) -> None:
        """A skill that brought its module: importable now, and reloaded if it was imported."""
        if entry.kind != "skill" or "source" not in entry.reference:
            return
        importlib.invalidate_caches()
        name = entry.reference["import"]
        module = sys.modules.get(name)
        if module is None or _finder is None or not _finder.owns(module):
            return
        try:
            importlib.reload(module)
        except Exception as exc:
            sys.modules.pop(name, None)  # the next import raises this again, never the old code
            raise HarnessError(
                f"the skill {entry.scope}:{entry.id} was saved (version {entry.version}), but its "
                f"module {name!r} fails to import: {type(exc).__name__}: {exc}. Fix it with "
                f"update_skill({entry.id!r}, source=...)"
            ) from exc

    def panel(self) -> Any:
        """A live view of the harness and the refinement history (ipywidgets)."""
        from .harness_panel import build_panel

        return build_panel(self._call_host)

    def state(self) -> dict[str, Any]:
        """Both stores as data: version, entries, refinement records, problems."""
        result: dict[str, Any] = self._call(HARNESS_STATE, {})
        return result

    def problems(self) -> list[str]:
        """What a store could not read (a damaged file, an entry dropped from reads)."""
        return list(self.state()["problems"])

    def __repr__(self) -> str:
        counts: dict[str, int] = {}
        try:
            with warnings.catch_warnings():  # a summary line; list() itself warns
                warnings.simplefilter("ignore", HarnessWarning)
                for entry in self.list():
                    counts[entry.kind] = counts.get(entry.kind, 0) + 1
        except BridgeError:
            pass
        summary = ", ".join(f"{counts.get(k, 0)} {k}" for k in KINDS)
        return (
            f"rlm.harness ({summary}): create_<kind>/update_<kind>/delete_<kind> for "
            "prompt_note, memory, skill, subagent; list(kind=None); get(kind, id); panel()"
        )
