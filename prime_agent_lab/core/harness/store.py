"""The harness store: one directory of entries (prompt notes, memories, skills, sub-agent specs)
that several processes may write at once.

Every write takes an exclusive `flock` on the directory's `.lock`, re-reads `harness.json`,
changes it and renames a fsynced temp file over it; readers never lock (a rename is atomic).
So a `create` fails on an id another writer made a moment ago, and an update never loses
another writer's. `revision` rises by one per write; the pair of a session's local and global
revisions is the harness version its prompt was built from. See docs/harness.md.

Size: over 600 lines because the locked read-change-write cycle, the signature of a local store
and the entry kinds' validation must agree on one file format; the CRUD surface the kernel
sees is in `harness_ops.py`.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import functools
import json
import os
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from dataclasses import fields as dataclass_fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..jsonfile import (
    MAX_HARNESS_BYTES,
    MAX_REFINEMENTS_BYTES,
    BadJson,
    UnreadableFile,
    parse_json,
    read_json_object,
    read_jsonl,
)
from ..trust import Signer, canonical
from ..whole_writes import append_whole, replace_whole
from .records import refinement_problem

KINDS = ("prompt", "memory", "skill", "subagent")
KIND_NAMES = {
    "prompt": "prompt note",
    "memory": "memory",
    "skill": "skill",
    "subagent": "sub-agent spec",
}
SCOPES = ("local", "global")
SCHEMA = 1
STATE_FILE = "harness.json"
REFINEMENTS_FILE = "refinements.jsonl"
SKILLS_DIR = "skills"
FORBIDDEN_IDS = frozenset({"base_system_prompt"})
MAX_TITLE = 200
MAX_CONTENT = 100_000
MAX_SOURCE = 200_000
STALE_TEMP_SECONDS = 60.0
SIGNED_FOR = "harness"  # the signature purpose of a local store (core/trust.py)
IGNORED_IN_SKILLS = ("__pycache__",)

FIELDS = ("id", "title", "content", "path", "reference", "arguments", "metadata")
_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,79}")
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_CALLABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


class HarnessError(ValueError):
    """A harness call that cannot be done; the message says why and what to do instead."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def slug(text: str, fallback: str) -> str:
    """Lowercase letters and digits joined by `_`, at most 80 characters."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    return "_".join(words)[:80].strip("_") or fallback


def split_scope(ref: str) -> tuple[str | None, str]:
    """`local:x` / `global:x` (as the prompt shows ids) -> (scope, x); a bare id -> (None, id)."""
    scope, sep, rest = ref.partition(":")
    if sep and scope in SCOPES:
        return scope, rest
    return None, ref


def check_kind(kind: object) -> str:
    if kind not in KINDS:
        raise HarnessError(f"unknown kind {kind!r}; the kinds are {', '.join(KINDS)}")
    return str(kind)


def check_id(entry_id: object) -> str:
    if not isinstance(entry_id, str) or not _ID.fullmatch(entry_id):
        raise HarnessError(
            f"bad id {entry_id!r}: use lowercase letters, digits, '_' and '-' "
            "(at most 80 characters, starting with a letter or digit)"
        )
    if entry_id.replace("-", "_") in FORBIDDEN_IDS:
        raise HarnessError("the base system prompt is not editable; add a prompt note instead")
    return entry_id


def entry_id(kind: str, given: object, title: str) -> str:
    """The id of a new entry: the given one (checked), else a slug of the title."""
    if given is not None:
        return check_id(given)
    return check_id(slug(title, kind))


@dataclass(frozen=True)
class Entry:
    """One harness entry. Frozen: a change is a new entry (`dataclasses.replace`), so states
    can share entries and a write only compares and serialises what it must."""

    id: str
    kind: str
    title: str
    content: str
    path: str = "general"
    scope: str = "local"
    reference: dict[str, Any] = field(default_factory=dict)
    arguments: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    source: str = "agent"
    created_at: str = ""
    updated_at: str = ""
    version: int = 1

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self.plain())

    def plain(self) -> dict[str, Any]:
        """The fields as a dict that shares this entry's dicts (for serialising, not editing)."""
        return {name: getattr(self, name) for name in ENTRY_FIELDS}

    @functools.cached_property
    def encoded(self) -> str:
        """The entry as JSON, encoded once: a write re-encodes only the entries it changed."""
        return json.dumps(self.plain(), ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Entry:
        """An entry as stored; raises HarnessError when a field has the wrong type."""
        if not isinstance(data, dict):
            raise HarnessError("an entry must be an object")
        values: dict[str, Any] = {}
        for name in ("id", "kind", "title", "content"):
            if not isinstance(data.get(name), str):
                raise HarnessError(f"field {name!r} must be a string")
            values[name] = data[name]
        for name in ("path", "scope", "source", "created_at", "updated_at"):
            value = data.get(name, "")
            values[name] = value if isinstance(value, str) else str(value)
        values["path"] = values["path"] or "general"
        for name in ("reference", "arguments", "metadata"):
            value = data.get(name, {})
            values[name] = copy.deepcopy(value) if isinstance(value, dict) else {}
        version = data.get("version", 1)
        try:
            values["version"] = max(1, int(version))
        except (TypeError, ValueError):
            raise HarnessError("field 'version' must be an integer") from None
        return cls(**values)

    @property
    def call(self) -> str:
        """A skill's call as the prompt shows it: `module.callable(arg, ...)`."""
        ref = self.reference
        args = ", ".join(str(name) for name in self.arguments)
        return f"{ref.get('import', '?')}.{ref.get('callable', '?')}({args})"


ENTRY_FIELDS = tuple(f.name for f in dataclass_fields(Entry))


@dataclass
class State:
    revision: int = 0
    entries: dict[str, dict[str, Entry]] = field(default_factory=lambda: {k: {} for k in KINDS})
    problems: list[str] = field(default_factory=list)

    def get(self, kind: str, entry_id: str) -> Entry | None:
        return self.entries[check_kind(kind)].get(entry_id)

    def put(self, entry: Entry) -> None:
        self.entries[check_kind(entry.kind)][entry.id] = entry

    def remove(self, kind: str, entry_id: str) -> Entry | None:
        return self.entries[check_kind(kind)].pop(entry_id, None)

    def all(self, kind: str | None = None) -> list[Entry]:
        kinds = KINDS if kind is None else (check_kind(kind),)
        found = [entry for k in kinds for entry in self.entries[k].values()]
        return sorted(found, key=lambda e: (KINDS.index(e.kind), e.path, e.title, e.id))

    def copy(self) -> State:
        """A state to change freely (entries are frozen, so they are shared)."""
        return State(self.revision, {k: dict(v) for k, v in self.entries.items()}, [*self.problems])


def _check_dict(name: str, value: object) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise HarnessError(f"{name} must be a dict")
    try:
        parse_json(json.dumps(value, allow_nan=False))  # what the store's reader will take
    except BadJson as exc:
        raise HarnessError(f"{name} must be plain JSON data: it {exc.reason}") from None
    except (TypeError, ValueError, RecursionError) as exc:
        raise HarnessError(f"{name} must be plain JSON data: {exc}") from None
    return copy.deepcopy(value)


def check_skill_contract(reference: object, arguments: object) -> None:
    """A skill is callable Python: `reference={"type": "python", "import": module, "callable":
    name}` plus an `arguments` schema (a dict; `{}` for none)."""
    example = '{"type": "python", "import": "my_module", "callable": "my_function"}'
    if not isinstance(reference, dict) or reference.get("type") != "python":
        raise HarnessError(f'a skill needs reference={example} (type must be "python")')
    module = reference.get("import")
    if not isinstance(module, str) or not _MODULE.fullmatch(module):
        raise HarnessError(f"a skill's reference needs an importable module name: {example}")
    name = reference.get("callable")
    if not isinstance(name, str) or not _CALLABLE.fullmatch(name):
        raise HarnessError(f"a skill's reference needs the name of a callable: {example}")
    source = reference.get("source")
    if source is not None:
        if not isinstance(source, str) or len(source) > MAX_SOURCE:
            raise HarnessError(f"a skill's module source must be text under {MAX_SOURCE} chars")
        if "." in module:
            raise HarnessError("a skill that brings its module needs a top-level module name")
        if module in sys.stdlib_module_names or module == "prime_agent_kernel":
            raise HarnessError(f"module name {module!r} is taken; choose another for the skill")
        try:
            compile(source, f"{module}.py", "exec")
        except SyntaxError as exc:
            raise HarnessError(f"the skill's module does not compile: {exc}") from None
    if not isinstance(arguments, dict):
        raise HarnessError(
            "a skill needs an arguments schema: a dict of name -> description ({} for none)"
        )


def build_entry(
    kind: str, fields: dict[str, Any], scope: str, source: str, base: Entry | None = None
) -> Entry:
    """The entry `fields` describe: a new one (`base` None) or `base` updated (omitted fields
    stay). Raises HarnessError on anything a stored entry must not have."""
    kind = check_kind(kind)
    unknown = sorted(set(fields) - set(FIELDS))
    if unknown:
        raise HarnessError(f"unknown field(s) {', '.join(unknown)}; fields are {', '.join(FIELDS)}")
    values = base.to_dict() if base is not None else {}
    for name in ("title", "content", "path"):
        value = fields.get(name)
        if value is None:
            continue
        if not isinstance(value, str):
            raise HarnessError(f"{name} must be a string")
        values[name] = value
    for name in ("reference", "arguments", "metadata"):
        if fields.get(name) is not None:
            values[name] = _check_dict(name, fields[name])
    title, content = values.get("title"), values.get("content")
    if not isinstance(title, str) or not title.strip():
        raise HarnessError("an entry needs a non-empty title")
    if len(title) > MAX_TITLE:
        raise HarnessError(f"the title is longer than {MAX_TITLE} characters")
    if not isinstance(content, str):
        raise HarnessError("an entry needs content (a string)")
    if len(content) > MAX_CONTENT:
        raise HarnessError(
            f"the content is longer than {MAX_CONTENT:,} characters; keep big data in a file "
            "and name the file in the entry"
        )
    path = values.get("path") or ("policy" if kind == "prompt" else "general")
    if "\n" in path or len(path) > 80:
        raise HarnessError("path is a short grouping name (one line, at most 80 characters)")
    if kind == "skill":
        check_skill_contract(values.get("reference"), values.get("arguments", {}))
    stamp = now_iso()
    if base is None:
        return Entry(
            id=entry_id(kind, fields.get("id"), title),
            kind=kind,
            title=title,
            content=content,
            path=path,
            scope=scope,
            reference=values.get("reference", {}),
            arguments=values.get("arguments", {}),
            metadata=values.get("metadata", {}),
            source=source,
            created_at=stamp,
            updated_at=stamp,
            version=1,
        )
    return _updated(values, path, scope, source, stamp, base.version + 1)


def _updated(
    values: dict[str, Any], path: str, scope: str, source: str, stamp: str, version: int
) -> Entry:
    values = {**values, "path": path, "scope": scope, "source": source}
    values["updated_at"], values["version"] = stamp, version
    return Entry.from_dict(values)


def _module_files(state: State) -> dict[str, str]:
    """module name -> source, for the skills that bring their own module (raises HarnessError
    when two skills bring the same module)."""
    owners: dict[str, str] = {}
    modules: dict[str, str] = {}
    for entry in state.entries["skill"].values():
        source = entry.reference.get("source")
        if not isinstance(source, str):
            continue
        module = str(entry.reference.get("import"))
        if module in owners and owners[module] != entry.id:
            raise HarnessError(
                f"module {module!r} is already brought by skill {owners[module]!r}; "
                "give this skill's module another name",
                409,
            )
        owners[module], modules[module] = entry.id, source
    return modules


def encode(state: State, signer: Signer | None = None) -> bytes:
    """The store file: valid JSON with one entry per line, so it stays readable and diffable
    while each entry is encoded by the fast (C) encoder. With `signer`, the first line carries
    the signature over the rest of the object (a session's local store)."""
    data = _encode(state, "")
    if signer is None:
        return data
    signature = signer.sign(SIGNED_FOR, canonical(json.loads(data)))
    return _encode(state, f' "signature": {json.dumps(signature)},')


def _encode(state: State, signature: str) -> bytes:
    lines = [f'{{"schema": {SCHEMA}, "revision": {state.revision},{signature} "entries": {{']
    for k, kind in enumerate(KINDS):
        items = sorted(state.entries[kind].items())
        lines.append(f"  {json.dumps(kind)}: {{")
        lines.extend(
            f"    {json.dumps(key)}: {entry.encoded}" + ("," if i < len(items) - 1 else "")
            for i, (key, entry) in enumerate(items)
        )
        lines.append("  }" + ("," if k < len(KINDS) - 1 else ""))
    lines.append("}}")
    return ("\n".join(lines) + "\n").encode("utf-8")


class HarnessStore:
    """One store directory (`local`: a session's, `global`: shared by every session)."""

    def __init__(
        self, directory: str | os.PathLike[str], scope: str, signer: Signer | None = None
    ) -> None:
        """`signer`: the store must carry this user's signature to be read (a session's local
        store, which may come from someone else's folder: docs/trust.md)."""
        if scope not in SCOPES:
            raise ValueError(f"scope must be one of {SCOPES}")
        self.directory = Path(directory)
        self.scope = scope
        self.signer = signer
        self.file = self.directory / STATE_FILE
        self.history_file = self.directory / REFINEMENTS_FILE
        self.skills_dir = self.directory / SKILLS_DIR
        self._cache: tuple[tuple[int, int, int], State] | None = None

    def __repr__(self) -> str:
        return f"HarnessStore({str(self.directory)!r}, {self.scope!r})"

    # ---------------------------------------------------------------- reading

    def read(self) -> State:
        """The store as it is on disk now (a copy the caller may change freely)."""
        return self._current().copy()

    def revision(self) -> int:
        return self._current().revision

    def _current(self) -> State:
        try:
            stat = self.file.stat()
        except FileNotFoundError:
            return State()
        except OSError as exc:  # a symlink loop, a directory we may not search
            raise HarnessError(self._damaged(f"it cannot be read ({exc.strerror})"), 500) from None
        key = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        try:
            data = read_json_object(self.file, MAX_HARNESS_BYTES)
        except UnreadableFile as exc:
            if exc.missing:
                return State()
            raise HarnessError(self._damaged(f"it {exc.reason}"), 500) from None
        state = self._parse(data)
        self._cache = (key, state)
        return state

    def _parse(self, data: dict[str, Any]) -> State:
        if not isinstance(data.get("entries", {}), dict):
            raise HarnessError(self._damaged("it is not a harness object"), 500)
        if self.signer is not None and not self.signer.verify_object(SIGNED_FOR, data):
            raise HarnessError(self.untrusted_reason(), 403)
        revision = data.get("revision", 0)
        state = State(revision=revision if isinstance(revision, int) else 0)
        for kind, entries in data.get("entries", {}).items():
            if kind not in KINDS or not isinstance(entries, dict):
                state.problems.append(f"unknown kind {kind!r} ignored")
                continue
            for key, value in entries.items():
                try:
                    entry = Entry.from_dict(value)
                except HarnessError as exc:
                    state.problems.append(f"{kind} {key!r} ignored: {exc}")
                    continue
                if entry.kind != kind or entry.id != key:
                    state.problems.append(f"{kind} {key!r} ignored: its id or kind does not match")
                    continue
                state.entries[kind][key] = replace(entry, scope=self.scope)
        return state

    def untrusted_reason(self) -> str:
        return (
            f"the harness store {self.directory} was not made here (it is unsigned, or signed "
            "with another user's secret): its notes are not shown to the model and its skill "
            "modules are not importable until the user trusts this session"
        )

    def untrusted(self) -> bool:
        """The store exists and does not carry this user's signature."""
        try:
            self._current()
        except HarnessError as exc:
            return exc.status == 403
        return False

    def sign(self) -> None:
        """The user trusts the store as it is now: sign it and write its skill modules from the
        signed entries. Files in `skills/` that no skill brings are moved aside (to
        `skills-set-aside/`), never imported."""
        if self.signer is None:
            return
        with self._locked():
            if self.file.exists():
                state = self.read_unverified()
                replace_whole(self.file, encode(state, self.signer))
                self._cache = None
                self._write_modules(_module_files(state), {})
            stray = self.stray_modules()
            if stray:
                aside = self.directory / f"skills-set-aside-{int(time.time())}"
                aside.mkdir(exist_ok=True)
                for name in stray:
                    with contextlib.suppress(OSError):
                        os.replace(self.skills_dir / name, aside / name)

    def read_unverified(self) -> State:
        """The store's entries whether or not it carries a signature (to describe it)."""
        signer, self.signer = self.signer, None
        try:
            self._cache = None
            return self._current().copy()
        finally:
            self.signer = signer
            self._cache = None

    def stray_modules(self) -> list[str]:
        """Files in `skills/` that are not a module of a skill this store holds, as it holds it:
        something put there by hand or by someone else. The kernel imports from `skills/`, so a
        local store with one is not offered to it."""
        try:
            names = sorted(os.listdir(self.skills_dir))
        except FileNotFoundError:
            return []
        except OSError as exc:
            return [f"{self.skills_dir} ({exc.strerror or exc})"]
        modules = _module_files(self._current())
        stray = []
        for name in names:
            if name in IGNORED_IN_SKILLS or (name.startswith(".") and name.endswith(".tmp")):
                continue
            module, _, suffix = name.rpartition(".")
            path = self.skills_dir / name
            try:
                same = (
                    suffix == "py"
                    and module in modules
                    and path.is_file()
                    and (path.read_bytes() == modules[module].encode("utf-8"))
                )
            except OSError:
                same = False
            if not same:
                stray.append(name)
        return stray

    def _damaged(self, why: str) -> str:
        return (
            f"the harness file {self.file} is damaged: {why}. Nothing was changed; fix the file "
            "or move it aside (the store then starts empty)."
        )

    def get(self, kind: str, entry_id: str) -> Entry | None:
        return self._current().get(kind, entry_id)

    def list(self, kind: str | None = None) -> list[Entry]:
        return self._current().all(kind)

    # ---------------------------------------------------------------- writing

    def linked(self) -> bool:
        """The store's folder or its `skills/` is a symbolic link (a folder from someone else
        can point it anywhere): the store is neither written nor imported from."""
        return self.directory.is_symlink() or self.skills_dir.is_symlink()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        if self.linked():
            raise HarnessError(
                f"the harness store {self.directory} (or its skills/) is a symbolic link: it is "
                "not written through it; replace the link with a folder",
                409,
            )
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / ".lock", "a+b") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[State]:
        """The store, locked against every other writer, to change in place; written (one new
        revision) when the block ends without an exception and something changed."""
        with self._locked():
            before = self._current()
            state = before.copy()
            yield state
            if state.entries == before.entries:
                return
            modules = _module_files(state)
            state.revision = before.revision + 1
            state.problems = []
            for kind in KINDS:
                for key, entry in state.entries[kind].items():
                    if entry.scope != self.scope:
                        state.entries[kind][key] = replace(entry, scope=self.scope)
            replace_whole(self.file, encode(state, self.signer))
            stat = self.file.stat()
            self._cache = ((stat.st_ino, stat.st_mtime_ns, stat.st_size), state.copy())
            self._write_modules(modules, _module_files(before))
            self._remove_stale_temps()

    def _write_modules(self, modules: dict[str, str], previous: dict[str, str]) -> None:
        if modules:
            self.skills_dir.mkdir(exist_ok=True)
        for module, source in modules.items():
            path = self.skills_dir / f"{module}.py"
            if previous.get(module) != source or not path.exists():
                replace_whole(path, source.encode("utf-8"))
        for module in set(previous) - set(modules):
            with contextlib.suppress(OSError):
                (self.skills_dir / f"{module}.py").unlink()

    def _remove_stale_temps(self) -> None:
        cutoff = time.time() - STALE_TEMP_SECONDS
        for temp in self.directory.glob(f".{STATE_FILE}.*.tmp"):
            with contextlib.suppress(OSError):
                if temp.stat().st_mtime < cutoff:
                    temp.unlink()

    def create(self, kind: str, fields: dict[str, Any], source: str = "agent") -> Entry:
        entry = build_entry(kind, fields, self.scope, source)
        with self.transaction() as state:
            if state.get(kind, entry.id) is not None:
                raise HarnessError(
                    f"a {KIND_NAMES[kind]} with id {entry.id!r} already exists "
                    f"({self.scope}); update it with update_{_method(kind)}({entry.id!r}, ...) "
                    "or choose another id",
                    409,
                )
            state.put(entry)
        return entry

    def update(
        self, kind: str, entry_id: str, fields: dict[str, Any], source: str = "agent"
    ) -> Entry:
        if "id" in fields and fields["id"] not in (None, entry_id):
            raise HarnessError("an entry's id cannot change; create a new entry instead")
        fields = {k: v for k, v in fields.items() if k != "id"}
        with self.transaction() as state:
            base = state.get(kind, entry_id)
            if base is None:
                raise self.missing(kind, entry_id)
            entry = build_entry(kind, fields, self.scope, source, base)
            state.put(entry)
        return entry

    def delete(self, kind: str, entry_id: str) -> Entry:
        with self.transaction() as state:
            removed = state.remove(kind, entry_id)
            if removed is None:
                raise self.missing(kind, entry_id)
        return removed

    def missing(self, kind: str, entry_id: str) -> HarnessError:
        return HarnessError(
            f"no {KIND_NAMES[check_kind(kind)]} with id {entry_id!r} in the {self.scope} store; "
            f"rlm.harness.list({kind!r}) lists them",
            404,
        )

    # ---------------------------------------------------------------- refinement records

    def append_refinement(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
        with self._locked():
            append_whole(self.history_file, line.encode())

    def refinements(self) -> list[dict[str, Any]]:
        """Every refinement recorded in this store, oldest first (unreadable lines skipped)."""
        return self.read_refinements()[0]

    def read_refinements(self) -> tuple[list[dict[str, Any]], list[str]]:
        """The refinement records, and what could not be read (a problem per file)."""
        try:
            lines = read_jsonl(self.history_file, MAX_REFINEMENTS_BYTES)
        except UnreadableFile as exc:
            return [], [] if exc.missing else [f"{exc}: no refinement records read"]
        records, unreadable = [], 0
        for _, record in lines:
            if refinement_problem(record) is None:
                records.append(record)
            else:
                unreadable += 1
        problems = []
        if unreadable:
            problems.append(
                f"{self.history_file}: {unreadable} unreadable line(s) skipped (not a JSON record)"
            )
        return records, problems

    def stamp(self) -> str:
        """Changes whenever the entries or the refinement records change (for watchers)."""
        parts = []
        for path in (self.file, self.history_file):
            try:
                stat = path.stat()
                parts.append(f"{stat.st_ino}.{stat.st_mtime_ns}.{stat.st_size}")
            except OSError:  # missing, or a symlink loop (reading it says why)
                parts.append("-")
        return ":".join(parts)


def _method(kind: str) -> str:
    return "prompt_note" if kind == "prompt" else kind


class Harness:
    """The two stores one session sees: its own (`local`, None without a session directory)
    and the machine's (`global`)."""

    def __init__(self, local: HarnessStore | None, global_: HarnessStore) -> None:
        self.local = local
        self.global_ = global_

    def store(self, global_: bool = False) -> HarnessStore:
        if global_:
            return self.global_
        if self.local is None:
            raise HarnessError(
                "this agent has no session directory for local entries; use global_=True", 409
            )
        return self.local

    def route(self, ref: str, global_: bool = False) -> tuple[HarnessStore, str]:
        """The store and bare id for `ref` (`local:x` / `global:x` override `global_`)."""
        scope, bare = split_scope(ref)
        return self.store(scope == "global" if scope else global_), bare

    def version(self) -> dict[str, int]:
        """Each store's revision: 0 without a local store, -1 for a store that cannot be read."""
        version = {"local": 0, "global": 0}
        for store in self.stores():
            try:
                version[store.scope] = store.revision()
            except HarnessError:
                version[store.scope] = -1
        return version

    def stores(self) -> list[HarnessStore]:
        return [s for s in (self.local, self.global_) if s is not None]

    def read_all(self, kind: str | None = None) -> tuple[list[Entry], list[str]]:
        """The entries of every store that can be read, and why each other one cannot (its
        file is damaged): a damaged global file must not hide the session's own entries."""
        entries: list[Entry] = []
        unavailable: list[str] = []
        for store in self.stores():
            try:
                entries.extend(store.list(kind))
            except HarnessError as exc:
                unavailable.append(str(exc))
        return entries, unavailable

    def list(self, kind: str | None = None) -> list[Entry]:
        """The entries of every store that can be read (`read_all` also says why not)."""
        return self.read_all(kind)[0]

    def get(self, kind: str, ref: str) -> Entry | None:
        """`ref` in its scope; a bare id looks in the local store first, then the global one."""
        scope, bare = split_scope(ref)
        stores = [self.store(scope == "global")] if scope else self.stores()
        for store in stores:
            entry = store.get(kind, bare)
            if entry is not None:
                return entry
        return None

    def stamp(self) -> str:
        return "|".join(store.stamp() for store in self.stores())

    def skill_paths(self) -> list[str]:
        """The `skills/` directories the kernel may import from: a local store only when it is
        trusted and its `skills/` holds nothing but its own modules."""
        paths = []
        for store in self.stores():
            if store.signer is not None and store.linked():
                continue
            if store.signer is not None:
                try:
                    if store.stray_modules():
                        continue
                except HarnessError:  # unsigned or damaged
                    continue
            paths.append(str(store.skills_dir))
        return paths
