"""Notebook JSON (nbformat 4.5) without importing nbformat on the agent's hot path.

`import nbformat` pulls in jsonschema, whose format checkers build grammars at import time (2 s
and more on a small machine), and `nbformat.write` validates the whole notebook on every call.
The agent only ever appends cells and outputs of known shapes, so it writes the JSON itself;
the tests check every file it writes with `nbformat.validate`. Reading an old (v3 or older)
notebook is the one case that still goes through nbformat, for its upgrade.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from ..core.jsonfile import MAX_NOTEBOOK_BYTES, UnreadableFile, parse_json_object, read_json_object
from ..core.whole_writes import replace_whole

Notebook = dict[str, Any]
Cell = dict[str, Any]


def new_notebook(
    kernel_name: str = "python3",
    display_name: str = "Python 3 (ipykernel)",
    language: str = "python",
) -> Notebook:
    return {
        "cells": [],
        "metadata": {
            "kernelspec": {"name": kernel_name, "display_name": display_name, "language": language},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def new_code_cell(source: str, metadata: dict[str, Any]) -> Cell:
    return {
        "cell_type": "code",
        "execution_count": None,
        "id": uuid.uuid4().hex[:12],
        "metadata": metadata,
        "outputs": [],
        "source": source,
    }


def new_markdown_cell(source: str, metadata: dict[str, Any]) -> Cell:
    return {
        "cell_type": "markdown",
        "id": uuid.uuid4().hex[:12],
        "metadata": metadata,
        "source": source,
    }


def output_from_msg(msg: dict[str, Any]) -> dict[str, Any]:
    """The notebook output of a kernel's iopub output message (as nbformat builds it); an
    `update_display_data` gives the `display_data` it replaces (as nbclient reads it)."""
    kind = msg["header"]["msg_type"]
    content = msg["content"]
    if kind == "update_display_data":
        kind = "display_data"
    if kind == "stream":
        return {"output_type": "stream", "name": content["name"], "text": content["text"]}
    if kind == "error":
        return {
            "output_type": "error",
            "ename": content["ename"],
            "evalue": content["evalue"],
            "traceback": content["traceback"],
        }
    if kind in ("display_data", "execute_result"):
        output = {
            "output_type": kind,
            "data": content.get("data", {}),
            "metadata": content.get("metadata", {}),
        }
        if kind == "execute_result":
            output["execution_count"] = content.get("execution_count")
        return output
    raise ValueError(f"not an output message: {kind}")


def read_notebook(path: Path) -> Notebook:
    """A notebook file as format 4.5 (cells get ids, which agent cells need). Raises
    UnreadableFile, naming the file, for anything that is not a notebook this can continue."""
    notebook = read_json_object(path, MAX_NOTEBOOK_BYTES)
    if notebook.get("nbformat") != 4:
        notebook = _upgraded(path, notebook)
    problem = _shape_problem(notebook)
    if problem is not None:
        raise UnreadableFile(path, f"is not a notebook: {problem}")
    if notebook.get("nbformat_minor", 0) < 5:
        notebook["nbformat_minor"] = 5
        for cell in notebook["cells"]:
            cell.setdefault("id", uuid.uuid4().hex[:12])
    return notebook


def _upgraded(path: Path, old: Notebook) -> Notebook:
    """An old format upgraded by nbformat (slow, and rare)."""
    import nbformat

    try:
        upgraded = nbformat.writes(nbformat.reads(json.dumps(old), as_version=4))
        return parse_json_object(upgraded)
    except Exception as exc:  # nbformat raises many kinds for what it cannot read
        raise UnreadableFile(path, f"is not a notebook nbformat can read ({exc})") from None


def _shape_problem(notebook: Notebook) -> str | None:
    """What the agent relies on: a list of cell objects, a metadata object, a minor version."""
    cells = notebook.get("cells")
    if not isinstance(cells, list) or not all(isinstance(c, dict) for c in cells):
        return "its cells are not a list of objects"
    if not isinstance(notebook.get("metadata", {}), dict):
        return "its metadata is not an object"
    minor = notebook.get("nbformat_minor", 0)
    if not isinstance(minor, int) or isinstance(minor, bool):
        return "its nbformat_minor is not a number"
    return None


def write_notebook(notebook: Notebook, path: Path) -> None:
    """Write atomically: a reader (or a crash) never sees half a notebook, and a failed write
    (a full disk) leaves the previous file as it was and no temporary file."""
    text = json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    replace_whole(path, text.encode("utf-8"), follow_symlinks=True)  # a linked notebook
