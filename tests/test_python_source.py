"""The tests that read the project's source parse it safely while other tests' leftovers are
collected."""

from __future__ import annotations

import ast
import gc
from pathlib import Path

from tests.python_source import parse

SOURCE = (Path(__file__).parents[1] / "prime_agent_lab" / "core" / "schedules.py").read_text()


class _Litter:
    """A cycle whose finalizer parses, deep in a stack, as a traceback being logged does."""

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        def deeper(levels: int) -> ast.Module:
            return deeper(levels - 1) if levels else ast.parse("x = 1")

        deeper(40)


def test_parsing_survives_a_collection_whose_finalizers_parse_too() -> None:
    thresholds = gc.get_threshold()
    try:
        for _ in range(5):
            litter = [_Litter() for _ in range(200)]
            del litter
            gc.set_threshold(1)  # the collection runs inside the parse
            tree = parse(SOURCE)
            gc.set_threshold(*thresholds)
            gc.collect()
            assert ast.get_docstring(tree)
    finally:
        gc.set_threshold(*thresholds)
        gc.collect()
