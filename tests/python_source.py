"""Parsing the project's own Python source in tests that read it."""

from __future__ import annotations

import ast
import gc


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """`ast.parse` with the garbage collector held off. On CPython 3.11 a collection during
    the parse can run a finalizer that formats a traceback, which parses again (for its `^^^`
    marks) and resets the parser's shared recursion counter: the outer parse then fails with
    "SystemError: AST constructor recursion depth mismatch" (CPython gh-106905). Finalizers of
    earlier tests' leftovers are not what these tests check."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(source, filename)
    finally:
        if enabled:
            gc.enable()
