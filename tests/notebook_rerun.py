"""Re-run a saved notebook top to bottom with nbclient and compare what it prints with what the
notebook holds (docs/teaching.md, "Notebooks that read on their own").

The comparison is of text: each code cell's streams (consecutive chunks of one stream joined, as
the agent's notebook folds them), `text/plain` of results and displays, and an error's name and
value. Tracebacks, images and execution counts are left out: a traceback's frames name the
kernel's temporary files, an image's bytes differ between matplotlib builds, and an agent turn's
counts start wherever the shared kernel was.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient

RERUN_TIMEOUT = 120  # seconds per cell


def text_outputs(nb: Any) -> list[list[tuple[str, str]]]:
    """Each code cell's outputs as (kind, text) pairs, in order."""
    return [
        _cell_text(cell.get("outputs", [])) for cell in nb["cells"] if cell["cell_type"] == "code"
    ]


def _cell_text(outputs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for output in outputs:
        kind = output["output_type"]
        if kind == "stream":
            text = "".join(output["text"]) if isinstance(output["text"], list) else output["text"]
            name = f"stream:{output['name']}"
            if found and found[-1][0] == name:
                found[-1] = (name, found[-1][1] + text)
            else:
                found.append((name, text))
        elif kind == "error":
            found.append(("error", f"{output['ename']}: {output['evalue']}"))
        else:
            plain = output.get("data", {}).get("text/plain", "")
            found.append((kind, "".join(plain) if isinstance(plain, list) else plain))
    return found


def rerun(path: Path) -> Any:
    """The notebook at `path` executed top to bottom in a fresh kernel, in its own folder (the
    saved file is left as it is)."""
    nb = nbformat.read(path, as_version=4)
    fresh = copy.deepcopy(nb)
    for cell in fresh.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    client = NotebookClient(
        fresh,
        timeout=RERUN_TIMEOUT,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    return fresh


def assert_reruns_to_same_outputs(path: Path) -> None:
    saved = nbformat.read(path, as_version=4)
    again = rerun(path)
    assert text_outputs(again) == text_outputs(saved), path
