"""Stream text as JupyterLab keeps it: a backspace erases the character before it, a carriage
return goes back to the start of the line and what follows overwrites it ("abc\\rXY" is "XYc").

A port of JupyterLab's `removeOverwrittenChars` (outputarea model). JupyterLab applies it when it
adds a kernel's stream output to a cell, but not when a shared document's text grows, so the
live document must hold the result: a progress bar written with `\\r` then shows its last state,
as in a cell the user runs, not one line per step. The model's observation has its own rule
(core/observation.py) and the CLI's `.ipynb` keeps the text as nbclient does.
"""

from __future__ import annotations

import re

_DOT = r"[^\n\r\u2028\u2029]"  # JavaScript's `.`: no line terminator
_ERASED = re.compile(r"[^\n]\x08")
_CR_NEWLINE = re.compile(r"\r+\n")
_CR_THEN_ANY = re.compile(r"\r[^$]")
_BASE = re.compile(rf"^({_DOT}*)\r+", re.MULTILINE)
_INSERT = re.compile(rf"\r+({_DOT}*)(?=[\n\r\u2028\u2029]|\Z)")
_TAIL = re.compile(rf"\r+{_DOT}*(?=[\n\r\u2028\u2029]|\Z)")
_HEAD = re.compile(rf"^{_DOT}*\r", re.MULTILINE)


def overwritten(text: str) -> str:
    """`text` with backspaces and carriage returns applied as JupyterLab shows them."""
    if "\r" not in text and "\x08" not in text:
        return text
    return _carriage_returns(_backspaces(text))


def _backspaces(text: str) -> str:
    while True:
        shorter = _ERASED.sub("", text)
        if len(shorter) >= len(text):
            return text
        text = shorter


def _carriage_returns(text: str) -> str:
    text = _CR_NEWLINE.sub("\n", text)
    while _CR_THEN_ANY.search(text):
        base_match, insert_match = _BASE.search(text), _INSERT.search(text)
        if base_match is None or insert_match is None:  # cannot happen; never loop for ever
            return text
        base, insert = base_match.group(1), insert_match.group(1)
        insert = insert + base[len(insert) :]
        text = _TAIL.sub("\r", text, count=1)
        head = _HEAD.search(text)
        if head is None:
            return text
        text = text[: head.start()] + insert + text[head.end() :]
    return text
