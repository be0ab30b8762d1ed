"""Applying a refinement to one harness store, and the edits that roll one back.

`apply_edits` runs every edit of a proposal inside one `store.transaction()`: each edit is
validated on its own, a rejected edit changes nothing, and each one is recorded as
`{action, kind, id, applied, error, before, after}` (before/after: whole entry dicts or None).
Scope is structural: a store is one scope, so a local refinement never sees a global-only id
(it is "not found"). An entry whose value differs from the plan-time `baseline` is not
overwritten ("changed during planning"), unless an earlier edit of the same proposal touched it.

A rollback is the applied edits inverted in reverse order and applied the same way, with the
recorded `after` values as its baseline: an entry changed since the refinement is left alone.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .store import (
    FIELDS,
    FORBIDDEN_IDS,
    KINDS,
    Entry,
    HarnessError,
    HarnessStore,
    State,
    build_entry,
    entry_id,
    now_iso,
    slug,
    split_scope,
)

ACTIONS = ("create", "update", "delete")
SOURCE = "refine"
NOT_EDITABLE = "the base system prompt is not editable"
CHANGED_DURING_PLANNING = (
    "entry changed during planning (another writer edited it after the plan was made); "
    "left as it is"
)

Key = tuple[str, str]
Baseline = Mapping[Key, dict[str, Any] | None]
"""(kind, id) -> the entry as it was when the plan was made (None: it did not exist). A key
that is not in the mapping did not exist either."""


class EditRejected(Exception):
    """Why one edit was not applied (recorded on the edit; the store is unchanged by it)."""


@dataclass(frozen=True)
class Restore:
    """An edit of a rollback: put `entry` back (None: remove it)."""

    entry: dict[str, Any] | None


def baseline_of(state: State) -> dict[Key, dict[str, Any] | None]:
    return {(e.kind, e.id): e.to_dict() for e in state.all()}


def apply_edits(
    store: HarnessStore,
    edits: list[Any],
    baseline: Baseline,
    changed_message: str = CHANGED_DURING_PLANNING,
) -> list[dict[str, Any]]:
    """Apply `edits` to `store` in one transaction; one record per edit, in order. A store
    that cannot be read or written raises HarnessError (nothing is applied then)."""
    records: list[dict[str, Any]] = []
    with store.transaction() as state:
        touched: set[Key] = set()
        for edit in edits:
            records.append(_apply_one(state, store.scope, edit, baseline, touched, changed_message))
    return records


def _apply_one(
    state: State,
    scope: str,
    edit: Any,
    baseline: Baseline,
    touched: set[Key],
    changed_message: str,
) -> dict[str, Any]:
    record = _describe(edit, scope)
    try:
        key, before, after = _change(state, scope, edit, baseline, touched, changed_message)
    except (EditRejected, HarnessError) as exc:
        return {**record, "applied": False, "error": str(exc), "before": None, "after": None}
    touched.add(key)
    return {
        **record,
        "id": key[1],
        "applied": True,
        "error": None,
        "before": before,
        "after": after,
    }


def _describe(edit: Any, scope: str) -> dict[str, Any]:
    if not isinstance(edit, dict):
        return {"action": None, "kind": None, "id": None}
    raw_id = edit.get("id")
    bare = split_scope(raw_id)[1] if isinstance(raw_id, str) else raw_id
    title = edit.get("title")
    if bare is None and edit.get("action") == "create" and isinstance(title, str):
        bare = slug(title, str(edit.get("kind")))  # the id the create would have made
    record = {"action": edit.get("action"), "kind": edit.get("kind"), "id": bare}
    if isinstance(edit.get("reason"), str) and edit["reason"]:
        record["reason"] = edit["reason"]
    return record


def _change(
    state: State,
    scope: str,
    edit: Any,
    baseline: Baseline,
    touched: set[Key],
    changed_message: str,
) -> tuple[Key, dict[str, Any] | None, dict[str, Any] | None]:
    """Apply one edit to `state`: ((kind, id), before, after), or raise why not."""
    if not isinstance(edit, dict):
        raise EditRejected("an edit must be an object with action, kind and id")
    action, kind = edit.get("action"), edit.get("kind")
    if action not in ACTIONS:
        raise EditRejected(f"unsupported action {action!r}; use create, update or delete")
    if kind not in KINDS:
        raise EditRejected(f"unsupported kind {kind!r}; the kinds are {', '.join(KINDS)}")
    target = _target_id(edit, kind, scope)
    key = (kind, target)
    current = state.get(kind, target)
    restore = edit.get("restore")
    if action == "create":
        if current is not None:
            raise EditRejected(f"entry already exists: {kind} {target!r} in the {scope} store")
    elif current is None:
        if key not in touched and baseline.get(key) is not None:
            raise EditRejected(changed_message)  # deleted by another writer since
        raise EditRejected(f"entry not found: no {kind} {target!r} in the {scope} store")
    if key not in touched and _differs(current, baseline.get(key)):
        raise EditRejected(changed_message)
    before = current.to_dict() if current is not None else None
    if action == "delete":
        state.remove(kind, target)
        return key, before, None
    if isinstance(restore, Restore):
        entry = _restored(restore.entry, scope, current)
    else:
        _check_module_free(edit)
        entry = _built(edit, kind, target, scope, current)
    state.put(entry)
    return key, before, entry.to_dict()


def _target_id(edit: dict[str, Any], kind: str, scope: str) -> str:
    """The bare id the edit names (a `local:`/`global:` prefix must name this store's scope);
    a create without an id takes a slug of its title."""
    raw = edit.get("id")
    if raw is None or raw == "":
        if edit.get("action") != "create":
            raise EditRejected(f"{edit.get('action')} needs the id of the entry")
        title = edit.get("title")
        if not isinstance(title, str) or not title.strip():
            raise EditRejected("a create needs a title (or an id)")
        candidate = slug(title, kind)
    elif not isinstance(raw, str):
        raise EditRejected(f"the id must be a string, not {raw!r}")
    else:
        named, candidate = split_scope(raw)
        if named is not None and named != scope:
            raise EditRejected(
                f"a {scope} refinement cannot edit {named} entries ({raw!r}); "
                f"refine with global_={named == 'global'} for that"
            )
    if candidate in FORBIDDEN_IDS:
        raise EditRejected(NOT_EDITABLE)
    return entry_id(kind, candidate, "")


def _built(
    edit: dict[str, Any], kind: str, target: str, scope: str, current: Entry | None
) -> Entry:
    fields = {name: edit[name] for name in FIELDS if name in edit and name != "id"}
    if current is None:
        if kind == "skill" and not isinstance(edit.get("arguments"), dict):
            raise EditRejected(
                "a skill needs its call contract: reference={type: python, import, callable} "
                "and an arguments schema ({} for none)"
            )
        return build_entry(kind, {**fields, "id": target}, scope, SOURCE)
    if not fields:
        raise EditRejected("an update needs at least one field to change")
    return build_entry(kind, fields, scope, SOURCE, current)


def _check_module_free(edit: dict[str, Any]) -> None:
    """A skill that brings its module needs a name no installed package has: the kernel's
    skill finder comes last, so the package would always win and the skill never run. The
    kernel checks its own environment when it writes a skill; a refinement is applied by the
    host, which checks its own (the same Python for local kernels)."""
    reference = edit.get("reference")
    if not isinstance(reference, dict) or "source" not in reference:
        return
    module = reference.get("import")
    if not isinstance(module, str) or not module.isidentifier():
        return  # the skill contract says what is wrong with it
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return
    if spec is not None and spec.origin is not None:
        raise EditRejected(
            f"module name {module!r} is already importable ({spec.origin}); a skill's own "
            "module needs a name nothing else provides"
        )


def _restored(entry: dict[str, Any] | None, scope: str, current: Entry | None) -> Entry:
    """The recorded entry exactly, with a version above every one it had (never reset)."""
    if entry is None:
        raise EditRejected("nothing recorded to restore")
    previous = max(int(entry.get("version", 1)), current.version if current else 0)
    return Entry.from_dict(
        {**entry, "scope": scope, "version": previous + 1, "updated_at": now_iso()}
    )


def _differs(current: Entry | None, planned: dict[str, Any] | None) -> bool:
    if current is None or planned is None:
        return (current is None) != (planned is None)
    return current.to_dict() != planned


# ---------------------------------------------------------------- rollback


def rollback_edits(record: Mapping[str, Any]) -> tuple[list[dict[str, Any]], Baseline]:
    """The applied edits of `record` inverted, in reverse order, and the baseline they expect
    (each entry as the refinement left it)."""
    edits: list[dict[str, Any]] = []
    baseline: dict[Key, dict[str, Any] | None] = {}
    for edit in reversed([e for e in record.get("edits") or [] if e.get("applied")]):
        before, after = edit.get("before"), edit.get("after")
        kind, target = str(edit.get("kind")), str(edit.get("id"))
        baseline.setdefault((kind, target), after)
        if before is not None and after is not None:
            edits.append(_inverse("update", kind, target, Restore(before)))
        elif before is not None:
            edits.append(_inverse("create", kind, target, Restore(before)))
        elif after is not None:
            edits.append(_inverse("delete", kind, target, None))
    return edits, baseline


def _inverse(action: str, kind: str, target: str, restore: Restore | None) -> dict[str, Any]:
    edit: dict[str, Any] = {"action": action, "kind": kind, "id": target}
    if restore is not None:
        edit["restore"] = restore
    return edit
