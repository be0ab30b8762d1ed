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

from ..core.atomic_file import write_text_atomically

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


def output_from_msg(msg: dict[str, Any]) -> dict[str, Any]:
    """The notebook output of a kernel's iopub output message (as nbformat builds it)."""
    kind = msg["header"]["msg_type"]
    content = msg["content"]
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
    """A notebook file as format 4.5 (cells get ids, which agent cells need)."""
    with path.open(encoding="utf-8") as f:
        notebook: Notebook = json.load(f)
    if not isinstance(notebook, dict) or notebook.get("nbformat") != 4:
        import nbformat  # an old format: let nbformat upgrade it (slow, and rare)

        notebook = json.loads(nbformat.writes(nbformat.read(path, as_version=4)))
    if notebook.get("nbformat_minor", 0) < 5:
        notebook["nbformat_minor"] = 5
        for cell in notebook.get("cells", []):
            cell.setdefault("id", uuid.uuid4().hex[:12])
    return notebook


def write_notebook(notebook: Notebook, path: Path) -> None:
    """Write atomically: a reader (or a crash) never sees half a notebook."""
    write_text_atomically(
        path, json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    )
