"""The shape the code keeps (issue 16): a module of the host package over 600 lines says why at
its top, in a paragraph of its docstring that starts with "Size:"."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.python_source import parse

PACKAGE = Path(__file__).resolve().parents[1] / "prime_agent_lab"
LIMIT = 600


def test_every_module_over_600_lines_says_why_at_its_top() -> None:
    unexplained = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        if source.count("\n") <= LIMIT:
            continue
        docstring = ast.get_docstring(parse(source)) or ""
        if not any(part.startswith("Size:") for part in docstring.split("\n\n")):
            unexplained.append(
                f"{path.relative_to(PACKAGE.parent)} ({source.count(chr(10))} lines)"
            )
    assert not unexplained, "over 600 lines without a 'Size:' reason: " + ", ".join(unexplained)
