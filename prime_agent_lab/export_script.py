"""A recorded session as a script for the scripted provider, which replays it offline.

`export_script(session_dir)` reads a session folder (`.prime-agent/sessions/<id>`) and returns
the script (docs/providers.md, "Exporting a session"): one step per model answer of the session's
current branch (its text and the code of each cell it ran), one child script per sub-agent it
spawned (by name, read from the sub-agent's own session folder, recursively), and the answers of
the side calls the session recorded (compaction summaries, kernel clean-ups, refinements and
their reviews). Pure: reads files, writes none. Provider keys and other withheld secrets are
redacted from everything exported (core/redaction.py).

`prime-agent-lab export-script SESSION [-o FILE]` is its command line (`run_cli`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, TextIO

from .core.redaction import Redactor
from .core.sessions import SessionLog

TEMPLATE_MARKS = ("{last_output", "{task}", "{messages}")  # what the provider would fill in
SESSIONS_DIR = Path(".prime-agent") / "sessions"
EDIT_FIELDS = ("title", "content", "path", "reference", "arguments", "metadata")
REFINE_TRIGGERS_NOT_PLANNED = ("rollback",)  # records that no planner call produced


class ExportError(ValueError):
    """A session that cannot be exported; the message is a sentence for the user."""


def export_script(session_dir: str | Path) -> dict[str, Any]:
    """The script that replays the session in `session_dir` (see the module docstring)."""
    redactor = Redactor.from_environ()
    script = _script_of(Path(session_dir), seen=set(), depth=0)
    return redactor.output(script) if redactor else script


MAX_DEPTH = 64
"""Sub-agents below this many levels are not exported (a real tree stops at the `max_depth`
setting long before; a crafted chain of headers would otherwise exhaust the recursion)."""


def _script_of(directory: Path, seen: set[Path], depth: int) -> dict[str, Any]:
    log = _read(directory)
    seen.add(directory.resolve())
    path = log.path()
    script: dict[str, Any] = {
        "exported_from": {
            key: log.header[key]
            for key in ("session_id", "notebook_path", "provider", "model", "name")
            if isinstance(log.header.get(key), str)
        },
        "turns": [_step(entry) for entry in path if entry["type"] == "assistant_message"],
    }
    if log.damage is not None:  # what could be read is exported; the file says what could not
        script["exported_from"]["damage"] = log.damage
    side = _side_calls(path)
    if side:
        script["side"] = side
    children = _children(directory, path, seen, depth + 1)
    if children:
        script["children"] = children
    return script


def _read(directory: Path) -> SessionLog:
    if directory.is_symlink() or not (directory / "session.jsonl").is_file():
        raise ExportError(f"{directory} is not a session folder (no session.jsonl)")
    log = SessionLog.read(directory)
    if log.damage is not None and not log.entries:
        raise ExportError(f"the session in {directory} cannot be read: {log.damage}")
    return log


def _step(entry: dict[str, Any]) -> dict[str, Any]:
    """One model answer as a script step: `code` for the usual one cell, `tool_calls` else."""
    text = entry.get("text") if isinstance(entry.get("text"), str) else ""
    arguments = [
        call.get("arguments") if isinstance(call.get("arguments"), str) else "{}"
        for call in entry.get("tool_calls") or []
        if isinstance(call, dict)
    ]
    step: dict[str, Any] = {"text": text} if text else {}
    codes = [_code_of(raw) for raw in arguments]
    if len(codes) == 1 and codes[0] is not None:
        step["code"] = codes[0]
    elif arguments:
        step["tool_calls"] = [
            {"code": code} if code is not None else {"arguments": raw}
            for code, raw in zip(codes, arguments, strict=True)
        ]
    if any(mark in value for mark in TEMPLATE_MARKS for value in [text, *arguments]):
        step["verbatim"] = True  # recorded text is played as written, never filled in again
    return step


def _code_of(arguments: str) -> str | None:
    """The code of `{"code": "..."}` arguments, or None for anything else (kept raw)."""
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError:
        return None
    if isinstance(value, dict) and set(value) == {"code"} and isinstance(value["code"], str):
        return value["code"]
    return None


def _side_calls(path: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    side: dict[str, list[dict[str, Any]]] = {}
    for entry in path:
        kind = entry["type"]
        if kind == "compaction" and isinstance(entry.get("summary"), str):
            side.setdefault("summary", []).append({"text": entry["summary"]})
        elif kind == "kernel_gc" and isinstance(entry.get("actions"), list):
            answer = {"actions": [_gc_action(a) for a in entry["actions"] if isinstance(a, dict)]}
            side.setdefault("kernel_gc", []).append({"text": json.dumps(answer)})
        elif kind == "refine_review" and isinstance(entry.get("should_refine"), bool):
            answer = {"should_refine": entry["should_refine"], "rationale": entry.get("rationale")}
            side.setdefault("refine_review", []).append({"text": json.dumps(answer)})
        elif kind == "refinement" and isinstance(entry.get("refinement"), dict):
            record = entry["refinement"]
            if record.get("trigger") not in REFINE_TRIGGERS_NOT_PLANNED:
                side.setdefault("refine", []).append({"text": json.dumps(_proposal(record))})
    return side


def _gc_action(action: dict[str, Any]) -> dict[str, Any]:
    return {k: action[k] for k in ("name", "action", "summary", "reason") if k in action}


def _proposal(record: dict[str, Any]) -> dict[str, Any]:
    """The planner's answer as the record kept it: the edits that were applied, rebuilt."""
    edits = []
    for edit in record.get("edits") or []:
        if not isinstance(edit, dict) or not edit.get("applied"):
            continue
        rebuilt = {k: edit.get(k) for k in ("action", "kind", "id")}
        after = edit.get("after")
        if edit.get("action") != "delete" and isinstance(after, dict):
            rebuilt.update({k: after[k] for k in EDIT_FIELDS if k in after})
        edits.append(rebuilt)
    return {
        "summary": record.get("summary") or "",
        "rationale": record.get("rationale") or "",
        "expected_outcome": record.get("expected_outcome") or "",
        "edits": edits,
    }


def _children(
    directory: Path, path: list[dict[str, Any]], seen: set[Path], depth: int
) -> dict[str, dict[str, Any]]:
    """Each spawned sub-agent's script, by its name; its session is a sibling folder."""
    children: dict[str, dict[str, Any]] = {}
    for entry in path:
        if entry["type"] != "child_spawned":
            continue
        name, child_id = entry.get("name"), entry.get("rlm_child_id")
        if not isinstance(name, str) or not isinstance(child_id, str) or name in children:
            continue
        folder = directory.parent / Path(child_id).name
        if folder.resolve() in seen:
            continue
        if depth > MAX_DEPTH:
            children[name] = {"turns": [], "missing": f"nested deeper than {MAX_DEPTH} levels"}
            continue
        try:
            children[name] = _script_of(folder, seen, depth)
        except ExportError:
            children[name] = {"turns": [], "missing": f"no session folder {folder.name}"}
    return children


# ---------------------------------------------------------------- the command line


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    command = commands.add_parser(
        "export-script",
        help="write a script for the scripted provider that replays a session offline",
        description="Write a script for the scripted provider (docs/providers.md) that replays "
        "SESSION offline with the same cells: the model's text and code per step, its "
        "sub-agents as child scripts, its recorded side calls. Provider keys are redacted.",
    )
    command.add_argument(
        "session",
        metavar="SESSION",
        help="a session id under .prime-agent/sessions of this folder, or a session folder",
    )
    command.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")


def session_folder(ref: str, cwd: Path) -> Path:
    """The folder of SESSION: a session folder, else an id under `.prime-agent/sessions`."""
    given = cwd / ref
    if (given / "session.jsonl").is_file():
        return given
    by_id = cwd / SESSIONS_DIR / Path(ref).name
    if Path(ref).name == ref and (by_id / "session.jsonl").is_file():
        return by_id
    raise ExportError(
        f"no session {ref!r}: give a session id from `prime-agent-lab sessions` (under "
        f"{SESSIONS_DIR}) or a session folder"
    )


def run_cli(args: argparse.Namespace, out: TextIO, err: TextIO, cwd: Path | None = None) -> int:
    cwd = cwd or Path.cwd()
    try:
        script = export_script(session_folder(args.session, cwd))
    except ExportError as exc:
        err.write(f"prime-agent-lab export-script: {exc}\n")
        return 1
    text = json.dumps(script, indent=1) + "\n"  # ASCII: no character acts on a terminal
    if args.output is None:
        out.write(text)
        return 0
    target = cwd / args.output
    try:
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        err.write(f"prime-agent-lab export-script: cannot write {target}: {exc.strerror}\n")
        return 1
    err.write(f"prime-agent-lab export-script: wrote {args.output}\n")
    return 0
