"""The live harness panel: `rlm.harness.panel()` (docs/harness.md, "The panel").

An ipywidgets widget with one tab per kind (prompt notes, memories, skills, sub-agents) and a
History tab (each refinement with its trigger, rationale, every edit with a diff of before and
after, and a Rollback button). A daemon thread long-polls the host (`harness.wait_for_change`)
and pushes each new state into the widgets; widget updates sent from a background thread reach
the browser. Rollback and delete go to the host, which applies them at the next turn boundary;
the panel shows its answer.

Every colour is a JupyterLab theme variable (`--jp-*`), so the panel reads in light and dark.

A busy kernel: ipykernel 7 routes a comm's incoming messages (the browser's clicks) to the
subshell that last published on that comm, taken from the parent request of the publishing
thread; a thread the panel starts would otherwise publish as the main shell's current request,
and every click would then wait behind the agent's running cell. So the panel's threads run in
a copy of the context it was built in: a panel built in a subshell (the chat panel's Harness
console) keeps answering clicks while the main shell runs a cell.
"""

from __future__ import annotations

import contextvars
import difflib
import html
import json
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import ipywidgets as widgets

from .harness_outcome import QueuedAction, describe_outcome, is_queued
from .operations import (
    DELETE_ENTRY,
    DELETE_ENTRY_BY_REFINEMENT,
    ROLLBACK_REFINEMENT,
    WAIT_FOR_HARNESS_CHANGE,
)

Call = Callable[[str, dict[str, Any]], Any]

KIND_TABS = (
    ("prompt", "Prompt notes"),
    ("memory", "Memories"),
    ("skill", "Skills"),
    ("subagent", "Sub-agents"),
)
DIFF_FIELDS = ("title", "content", "path", "reference", "arguments", "metadata")
WATCH_TIMEOUT = 25.0
"""Seconds one `harness.wait_for_change` call may wait (the host answers sooner on a change)."""
NONE = "-"
UNKNOWN_OPERATION = "unknown bridge operation"
"""How the host refuses an op it does not offer (core/bridge.py)."""
RETRY_DELAY = 5.0
"""Seconds between watch attempts after an error (the host restarting, say)."""

CARD_STYLE = (
    "border:1px solid var(--jp-border-color2);border-radius:4px;padding:6px 8px;"
    "margin:2px 0;background:var(--jp-layout-color1);color:var(--jp-ui-font-color1);"
    "font-family:var(--jp-ui-font-family);font-size:var(--jp-ui-font-size1);"
)
MUTED_STYLE = "color:var(--jp-ui-font-color2);font-size:var(--jp-ui-font-size0);"
PRE_STYLE = (
    "white-space:pre-wrap;margin:4px 0 0;padding:4px 6px;background:var(--jp-layout-color2);"
    "color:var(--jp-content-font-color1);font-family:var(--jp-code-font-family);"
    "font-size:var(--jp-code-font-size);border-radius:2px;max-height:16em;overflow:auto;"
)
LINE_STYLES = {
    "+": "color:var(--jp-success-color1);",
    "-": "color:var(--jp-error-color1);",
    "@": "color:var(--jp-ui-font-color2);",
}


class HarnessPanel(widgets.VBox):
    """The panel widget; `build_panel(call)` makes one and starts its watcher."""

    def __init__(self, call: Call, watch_timeout: float = WATCH_TIMEOUT) -> None:
        self._call = call
        self._watch_timeout = watch_timeout
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._rendered = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        # The request this panel was built in (its subshell): see the module docstring.
        self._context = contextvars.copy_context()
        self._stamp: Any = None
        self.state: dict[str, Any] = {}
        self.renders = 0
        """How many states the panel has shown (tests wait on it)."""
        self._rows: dict[Any, widgets.Widget] = {}
        self._queued: list[QueuedAction] = []  # answered "queued", record not seen yet
        self._header = widgets.HTML()
        self._answer = widgets.HTML()
        self._tab_boxes = [widgets.VBox() for _ in range(len(KIND_TABS) + 1)]
        self._placeholders = [
            widgets.HTML(_empty_html(f"No {label.lower()} yet.")) for _, label in KIND_TABS
        ] + [widgets.HTML(_empty_html("No refinements yet."))]
        self._tabs = widgets.Tab(children=self._tab_boxes)
        super().__init__(children=[self._header, self._answer, self._tabs])
        self.add_class("pal-harness-panel")
        self._show_answer("")

    # ------------------------------------------------------------------ live updates

    def start(self) -> None:
        """Show the current state, then follow changes from a daemon thread."""
        if self._thread is not None:
            return
        self._thread = self._start_thread(self._watch, "harness-panel")

    def _start_thread(self, target: Callable[[], None], name: str) -> threading.Thread:
        """A daemon thread that publishes as the request the panel was built in."""
        context = self._context.copy()
        thread = threading.Thread(target=context.run, args=(target,), name=name, daemon=True)
        thread.start()
        return thread

    def close(self) -> None:
        """Stop following the host, then close the widgets."""
        self._stop.set()
        with self._lock:
            for row in self._rows.values():
                close_tree(row)
            self._rows.clear()
            for placeholder in self._placeholders:
                placeholder.close()
        super().close()

    @property
    def watching(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _watch(self) -> None:
        while not self._stop.is_set():
            try:
                answer = self._call(
                    WAIT_FOR_HARNESS_CHANGE,
                    {"stamp": self._stamp, "timeout": self._watch_timeout},
                )
            except Exception as exc:  # the host is away or refused: say so, try again later
                if not self._stop.is_set():
                    self._show_answer(f"Cannot follow the harness: {exc}", tone="error")
                self._stop.wait(RETRY_DELAY)
                continue
            if self._stop.is_set():
                return
            if answer.get("changed", True) or self._stamp is None:
                # The host sends the state's fields beside `changed` (or under `state`).
                self.show(answer.get("state") or answer)
            self._stamp = answer.get("stamp")

    def show(self, state: dict[str, Any]) -> None:
        """Render one `harness.state` or `harness.wait_for_change` answer (any thread)."""
        with self._lock:
            if self._stop.is_set():
                return
            self.state = state
            self._header.value = _header_html(state)
            self._settle_queued()
            entries = state.get("entries") or []
            keep: set[Any] = set()
            titles = []
            for index, (kind, label) in enumerate(KIND_TABS):
                mine = sorted(
                    (e for e in entries if e.get("kind") == kind),
                    key=lambda e: (e.get("path") or "", e.get("title") or "", e.get("id") or ""),
                )
                rows = self._entry_rows(mine, keep)
                self._tab_boxes[index].children = rows or [self._placeholders[index]]
                titles.append(f"{label} ({len(mine)})")
            records = list(reversed(state.get("refinements") or []))  # newest first
            history = self._history_rows(records, keep)
            self._tab_boxes[-1].children = history or [self._placeholders[-1]]
            titles.append(f"History ({len(records)})")
            self._tabs.titles = tuple(titles)
            for key in set(self._rows) - keep:
                close_tree(self._rows.pop(key))
            self.renders += 1
            self._rendered.notify_all()

    def _settle_queued(self) -> None:
        """Replace a "queued" answer by its outcome once the host has recorded it (lock held)."""
        records = self.state.get("refinements") or []
        for action in list(self._queued):
            record = action.outcome_in(records)
            if record is not None:
                self._queued.remove(action)
                text, tone = describe_outcome(record)
                self._set_answer(f"{action.what}: {text}", tone)

    def wait_for_render(self, count: int, timeout: float = 30.0) -> bool:
        """Block until the panel has shown `count` states (for tests and scripts)."""
        with self._rendered:
            return self._rendered.wait_for(lambda: self.renders >= count, timeout)

    def wait_for_answer(self, text: str, timeout: float = 30.0) -> bool:
        """Block until the answer line contains `text` (an action's outcome)."""
        with self._rendered:
            return self._rendered.wait_for(lambda: text in self.last_answer, timeout)

    def _entry_rows(self, entries: list[dict[str, Any]], keep: set[Any]) -> list[widgets.Widget]:
        rows = []
        for entry in entries:
            key = ("entry", entry.get("scope"), entry.get("kind"), entry.get("id"))
            key += (entry.get("version"), entry.get("updated_at"))
            if key not in self._rows:
                self._rows[key] = self._entry_row(entry)
            keep.add(key)
            rows.append(self._rows[key])
        return rows

    def _history_rows(self, records: list[dict[str, Any]], keep: set[Any]) -> list[widgets.Widget]:
        rows = []
        for record in records:
            key = ("refinement", record.get("scope"), record.get("id"))
            if key not in self._rows:
                self._rows[key] = self._refinement_row(record)
            keep.add(key)
            rows.append(self._rows[key])
        return rows

    # ------------------------------------------------------------------ rows and actions

    def _entry_row(self, entry: dict[str, Any]) -> widgets.Widget:
        card = widgets.HTML(_entry_html(entry))
        card.layout = widgets.Layout(flex="1 1 auto", width="auto")
        delete = widgets.Button(description="Delete", tooltip="Delete this entry (asks first)")
        delete.add_class("pal-harness-delete")
        delete.layout = widgets.Layout(width="auto", flex="0 0 auto")
        delete.on_click(lambda button: self._on_delete(button, entry))
        row = widgets.HBox([card, delete])
        row.add_class("pal-harness-entry")
        return row

    def _on_delete(self, button: widgets.Button, entry: dict[str, Any]) -> None:
        if button.description != "Confirm delete":
            button.description = "Confirm delete"
            button.button_style = "danger"
            return
        button.disabled = True
        payload = {
            "kind": entry.get("kind"),
            "id": entry.get("id"),
            "global": entry.get("scope") == "global",
        }
        what = f"Delete {entry.get('kind')} {entry.get('id')}"

        def try_again() -> None:
            button.description, button.button_style = "Delete", ""
            button.disabled = False

        target = (str(entry.get("kind")), str(entry.get("id")))
        self._act(
            what,
            (DELETE_ENTRY_BY_REFINEMENT, DELETE_ENTRY),
            payload,
            on_failure=try_again,
            awaits={"delete": target},
        )

    def _refinement_row(self, record: dict[str, Any]) -> widgets.Widget:
        card = widgets.HTML(_refinement_html(record))
        card.layout = widgets.Layout(flex="1 1 auto", width="auto")
        children: list[widgets.Widget] = [card]
        if any(edit.get("applied") for edit in record.get("edits") or []):
            rollback = widgets.Button(
                description="Rollback",
                tooltip="Revert this refinement's applied edits (recorded as a new refinement)",
            )
            rollback.add_class("pal-harness-rollback")
            rollback.layout = widgets.Layout(width="auto", flex="0 0 auto")
            rollback.on_click(lambda button: self._on_rollback(button, record))
            children.append(rollback)
        row = widgets.HBox(children)
        row.add_class("pal-harness-refinement")
        return row

    def _on_rollback(self, button: widgets.Button, record: dict[str, Any]) -> None:
        button.disabled = True
        self._act(
            f"Rollback of {record.get('id')}",
            ROLLBACK_REFINEMENT,
            {"id": record.get("id")},
            on_failure=lambda: setattr(button, "disabled", False),
            awaits={"rollback_of": str(record.get("id"))},
        )

    def _act(
        self,
        what: str,
        ops: str | tuple[str, ...],
        payload: dict[str, Any],
        on_failure: Callable[[], None],
        awaits: dict[str, Any] | None = None,
    ) -> None:
        """Ask the host in a thread of its own (the click handler returns at once). With
        several ops, the first one the host offers: `refinement.delete_entry` records a delete
        as a refinement applied at the turn boundary; a host without refine deletes at once. A
        refused or failed request gives the button back (`on_failure`) to try again. An answer
        "queued" stays until the record of the action (`awaits`: what it rolls back or deletes)
        shows up in the state the panel follows; then the line says how it went."""
        self._show_answer(f"{what}: asking the host…")
        with self._lock:
            known = frozenset(
                str(r.get("id")) for r in self.state.get("refinements") or [] if isinstance(r, dict)
            )

        def run() -> None:
            try:
                answer = self._call_first_offered((ops,) if isinstance(ops, str) else ops, payload)
            except Exception as exc:
                on_failure()
                self._show_answer(f"{what} failed: {exc}", tone="error")
                return
            self._show_answer(f"{what}: {describe_answer(answer)}")
            if awaits is not None and is_queued(answer):
                with self._lock:
                    self._queued.append(QueuedAction(what, known, **awaits))
                    self._settle_queued()  # it may have been applied before the answer came

        self._start_thread(run, "harness-panel-action")

    def _call_first_offered(self, ops: tuple[str, ...], payload: dict[str, Any]) -> Any:
        for op in ops[:-1]:
            try:
                return self._call(op, payload)
            except Exception as exc:
                if UNKNOWN_OPERATION not in str(exc):
                    raise
        return self._call(ops[-1], payload)

    def _show_answer(self, text: str, tone: str = "info") -> None:
        with self._rendered:
            self._set_answer(text, tone)

    def _set_answer(self, text: str, tone: str = "info") -> None:
        """The answer line (lock held)."""
        self.last_answer = text
        self._rendered.notify_all()
        colour = "var(--jp-error-color1)" if tone == "error" else "var(--jp-ui-font-color1)"
        self._answer.value = (
            f'<div data-testid="pal-harness-answer" data-tone="{tone}" '
            f'style="color:{colour};min-height:1.2em;">{html.escape(text)}</div>'
        )


def build_panel(call: Call, watch_timeout: float = WATCH_TIMEOUT) -> HarnessPanel:
    """The live panel over a synchronous bridge `call(op, payload)`; it follows the host at
    once and stops when the widget is closed."""
    panel = HarnessPanel(call, watch_timeout=watch_timeout)
    panel.start()
    return panel


ATTACH_WAIT = 60.0
"""Seconds the Harness view waits for the host to attach a kernel it opened on early."""


_views: dict[str, HarnessPanel] = {}
"""The panels of open Harness views, by view id (closed with the view)."""


def harness_view(view_id: str | None = None, timeout: float = ATTACH_WAIT) -> HarnessPanel:
    """The chat panel's Harness view: the panel over this kernel's bridge, once the host has
    attached the kernel (it does that right after the notebook opens, in the main shell; the
    view runs in a subshell and may come first). `close_view(view_id)` stops it."""
    import prime_agent_kernel

    if view_id is not None:
        close_view(view_id)

    deadline = time.monotonic() + timeout
    while True:
        try:
            client = prime_agent_kernel.client()
            break
        except prime_agent_kernel.BridgeError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    panel = build_panel(client.call)
    if view_id is not None:
        _views[view_id] = panel
    return panel


def close_view(view_id: str) -> None:
    """Close the panel of a Harness view (the view was closed); unknown ids are ignored."""
    panel = _views.pop(view_id, None)
    if panel is not None:
        panel.close()


def close_tree(widget: widgets.Widget) -> None:
    """Close a widget and every widget inside it (their comms would live on otherwise)."""
    for child in getattr(widget, "children", ()):
        close_tree(child)
    widget.close()


def describe_answer(answer: Any) -> str:
    """The host's answer to an action in words: its note ("queued: applies at the next turn
    boundary"), or "applied" for an answer that is the result itself (a deleted entry)."""
    if isinstance(answer, dict):
        for key in ("note", "message", "status", "detail"):
            if isinstance(answer.get(key), str) and answer[key]:
                return str(answer[key])
    if isinstance(answer, str) and answer:
        return answer
    return "applied"


# ---------------------------------------------------------------------- HTML


def _header_html(state: dict[str, Any]) -> str:
    version = state.get("version") or {}
    problems = state.get("problems") or []
    parts = [
        "<b>Harness</b>",
        f"version local {html.escape(str(version.get('local', NONE)))} · "
        f"global {html.escape(str(version.get('global', NONE)))}",
    ]
    text = " · ".join(parts)
    if problems:
        items = "".join(f"<li>{html.escape(str(p))}</li>" for p in problems)
        text += (
            f'<div data-testid="pal-harness-problems" style="color:var(--jp-warn-color1);">'
            f"{len(problems)} problem(s):<ul style='margin:2px 0'>{items}</ul></div>"
        )
    local, global_ = (html.escape(str(version.get(scope))) for scope in ("local", "global"))
    return (
        f'<div data-testid="pal-harness-header" data-local="{local}" data-global="{global_}" '
        f'style="color:var(--jp-ui-font-color1);font-family:var(--jp-ui-font-family);">{text}</div>'
    )


def _empty_html(text: str) -> str:
    return f'<div style="{MUTED_STYLE}padding:4px;">{html.escape(text)}</div>'


def _entry_html(entry: dict[str, Any]) -> str:
    esc = html.escape
    meta = " · ".join(
        part
        for part in (
            f"<code>{esc(str(entry.get('id')))}</code>",
            f"v{esc(str(entry.get('version')))}",
            esc(str(entry.get("scope") or "")),
            f"path {esc(str(entry.get('path')))}" if entry.get("path") else "",
            f"by {esc(str(entry.get('source')))}" if entry.get("source") else "",
            f"updated {esc(short_time(entry.get('updated_at')))}",
        )
        if part
    )
    body = f'<pre style="{PRE_STYLE}">{esc(str(entry.get("content") or ""))}</pre>'
    if entry.get("kind") == "skill":
        body += (
            f'<div style="{MUTED_STYLE}margin-top:4px;">call '
            f"<code>{esc(skill_call(entry))}</code> · reference "
            f"<code>{esc(json.dumps(entry.get('reference'), default=str))}</code> · arguments "
            f"<code>{esc(json.dumps(entry.get('arguments'), default=str))}</code></div>"
        )
    return (
        f'<div data-testid="pal-harness-entry" data-kind="{esc(str(entry.get("kind")))}" '
        f'data-id="{esc(str(entry.get("id")))}" data-scope="{esc(str(entry.get("scope")))}" '
        f'data-version="{esc(str(entry.get("version")))}" style="{CARD_STYLE}">'
        f"<b>{esc(str(entry.get('title') or ''))}</b>"
        f'<div style="{MUTED_STYLE}">{meta}</div>{body}</div>'
    )


def skill_call(entry: dict[str, Any]) -> str:
    reference = entry.get("reference") or {}
    arguments = entry.get("arguments") or {}
    names = ", ".join(arguments) if isinstance(arguments, dict) else ""
    return f"{reference.get('import', '?')}.{reference.get('callable', '?')}({names})"


def _refinement_html(record: dict[str, Any]) -> str:
    esc = html.escape
    edits = record.get("edits") or []
    applied = sum(1 for edit in edits if edit.get("applied"))
    version = record.get("harness_version")
    if isinstance(version, dict):
        version_text = f"local {version.get('local', NONE)} · global {version.get('global', NONE)}"
    else:
        version_text = str(version) if version is not None else NONE
    facts = [
        f"<code>{esc(str(record.get('id')))}</code>",
        esc(str(record.get("scope") or "")),
        f"trigger {esc(str(record.get('trigger') or NONE))}",
        f"{applied} applied, {len(edits) - applied} rejected",
        f"produced version {esc(version_text)}",
        esc(short_time(record.get("created_at"))),
    ]
    if record.get("rollback_of"):
        facts.append(f"rollback of <code>{esc(str(record['rollback_of']))}</code>")
    lines = [
        f"<b>{esc(str(record.get('summary') or '(no summary)'))}</b>",
        f'<div style="{MUTED_STYLE}">{" · ".join(f for f in facts if f)}</div>',
    ]
    for label, key in (
        ("Instructions", "instructions"),
        ("Rationale", "rationale"),
        ("Expected outcome", "expected_outcome"),
    ):
        if record.get(key):
            lines.append(f"<div><i>{label}:</i> {esc(str(record[key]))}</div>")
    if record.get("error"):
        lines.append(
            f'<div style="color:var(--jp-error-color1);">Error: {esc(str(record["error"]))}</div>'
        )
    lines.extend(_edit_html(edit) for edit in edits)
    return (
        f'<div data-testid="pal-harness-refinement" data-id="{esc(str(record.get("id")))}" '
        f'data-applied="{applied}" data-rejected="{len(edits) - applied}" style="{CARD_STYLE}">'
        + "".join(lines)
        + "</div>"
    )


def _edit_html(edit: dict[str, Any]) -> str:
    esc = html.escape
    applied = bool(edit.get("applied"))
    outcome = (
        '<span style="color:var(--jp-success-color1);">applied</span>'
        if applied
        else f'<span style="color:var(--jp-error-color1);">rejected: '
        f"{esc(str(edit.get('error') or 'no reason given'))}</span>"
    )
    head = (
        f"{esc(str(edit.get('action')))} {esc(str(edit.get('kind')))} "
        f"<code>{esc(str(edit.get('id')))}</code> · {outcome}"
    )
    diff = edit_diff(edit.get("before"), edit.get("after"))
    body = "".join(_diff_line(line) for line in diff) or esc("(no change)")
    return (
        f'<div data-testid="pal-harness-edit" data-applied="{str(applied).lower()}" '
        f'style="margin-top:6px;">{head}<pre style="{PRE_STYLE}">{body}</pre></div>'
    )


def _diff_line(line: str) -> str:
    style = LINE_STYLES.get(line[:1], "") if not line.startswith(("+++", "---")) else ""
    return f'<span style="{style}">{html.escape(line)}</span>\n'


def edit_diff(before: dict[str, Any] | None, after: dict[str, Any] | None) -> list[str]:
    """A unified diff of an entry's readable fields, before and after an edit."""
    return list(
        difflib.unified_diff(
            list(_field_lines(before)),
            list(_field_lines(after)),
            fromfile="before" if before else "(none)",
            tofile="after" if after else "(deleted)",
            lineterm="",
        )
    )


def _field_lines(entry: dict[str, Any] | None) -> Iterable[str]:
    if not entry:
        return
    for field in DIFF_FIELDS:
        value = entry.get(field)
        if value in (None, "", {}, []):
            continue
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        lines = text.splitlines() or [""]
        yield f"{field}: {lines[0]}"
        for line in lines[1:]:
            yield f"    {line}"


def short_time(value: Any) -> str:
    """`2026-11-30T23:45:12.345+00:00` -> `2026-11-30 23:45 UTC`; anything else as it is."""
    if not isinstance(value, str) or len(value) < 16 or value[10] != "T":
        return str(value or "")
    return f"{value[:10]} {value[11:16]} UTC"
