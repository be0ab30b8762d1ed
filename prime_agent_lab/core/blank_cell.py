"""The empty code cell at the end of a notebook the server writes for an agent (a sub-agent's,
a fork's, a clone's): where the user types next. It belongs to no agent (no `prime_agent`
metadata), and agent cells go in above it (`insert_before_trailing_blank` in
jupyter/live_cell.py, `FileNotebook.append_code_cell`), so it stays last."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any


def blank_code_cell() -> dict[str, Any]:
    """A valid nbformat 4.5 code cell with nothing in it."""
    return {
        "id": f"blank-{secrets.token_hex(4)}",
        "cell_type": "code",
        "source": "",
        "metadata": {},
        "outputs": [],
        "execution_count": None,
    }


def is_blank_code_cell(cell: Mapping[str, Any]) -> bool:
    """A code cell without source (whitespace aside) and without outputs."""
    source = cell.get("source")
    text = "".join(str(part) for part in source) if isinstance(source, list) else str(source or "")
    return cell.get("cell_type") == "code" and not text.strip() and not cell.get("outputs")


def with_blank_cell(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`cells` ending in one blank code cell: one is added unless the last cell is blank."""
    if cells and is_blank_code_cell(cells[-1]):
        return cells
    return [*cells, blank_code_cell()]
