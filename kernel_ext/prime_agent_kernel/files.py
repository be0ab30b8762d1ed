"""Reading the files the kernel loads by itself (a snapshot's manifest and variable files) so
that any content fails as one `UnreadableFile` naming the file, never blocks and never reads
past a cap.

The in-kernel twin of the host's `prime_agent_lab.core.jsonfile` (the kernel package never
imports the host): same refusals, same reasons; tests/test_file_fuzz.py checks that the two
agree on every hostile file it makes.
"""

from __future__ import annotations

import json as _json
import math as _math
import os as _os
import re as _re
import stat as _stat
import sys as _sys
from typing import Any

MiB = 2**20
MAX_DEPTH = 100
MAX_MANIFEST_BYTES = 16 * MiB

_SURROGATE_ESCAPE = _re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = _re.compile("[\ud800-\udfff]")
_SPECIAL_FILES = (
    (_stat.S_ISDIR, "a directory"),
    (_stat.S_ISFIFO, "a named pipe"),
    (_stat.S_ISSOCK, "a socket"),
    (_stat.S_ISCHR, "a device"),
    (_stat.S_ISBLK, "a device"),
)
_JSON_TYPES = {dict: "an object", list: "an array", str: "a string"}


class UnreadableFile(Exception):
    """`str()` names the file and says why; `reason` alone completes a sentence about it."""

    def __init__(self, path: str, reason: str, missing: bool = False) -> None:
        super().__init__(f"{path} {reason}")
        self.path = path
        self.reason = reason
        self.missing = missing


class _Refused(ValueError):
    pass


def read_bytes(path: str, max_bytes: int) -> bytes:
    """The whole regular file, at most `max_bytes`; a named pipe is refused, never read."""
    try:
        fd = _os.open(path, _os.O_RDONLY | _os.O_NONBLOCK | _os.O_CLOEXEC)
    except FileNotFoundError:
        raise UnreadableFile(path, "is missing", missing=True) from None
    except OSError as exc:
        raise UnreadableFile(path, f"cannot be read ({exc.strerror or exc})") from None
    try:
        info = _os.fstat(fd)
        for test, kind in _SPECIAL_FILES:
            if test(info.st_mode):
                raise UnreadableFile(path, f"is not a regular file ({kind})")
        if info.st_size > max_bytes:
            raise UnreadableFile(path, _too_large(info.st_size, max_bytes))
        chunks, total, want = [], 0, min(info.st_size + 1, max_bytes + 1)
        while total <= max_bytes:
            try:
                chunk = _os.read(fd, max(1, min(want, max_bytes + 1 - total)))
            except OSError as exc:
                raise UnreadableFile(path, f"cannot be read ({exc.strerror or exc})") from None
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            want = MiB
        if total > max_bytes:
            raise UnreadableFile(path, _too_large(total, max_bytes))
        return b"".join(chunks)
    finally:
        _os.close(fd)


def read_json_object(path: str, max_bytes: int = MAX_MANIFEST_BYTES) -> dict[str, Any]:
    """The file's JSON object; UnreadableFile for anything else."""
    return parse_json_object(path, read_bytes(path, max_bytes))


def parse_json_object(path: str, data: bytes) -> dict[str, Any]:
    """`data`, read from `path`, as a JSON object; UnreadableFile naming `path` otherwise."""
    try:
        value = _parse(data)
    except _Refused as exc:
        raise UnreadableFile(path, str(exc)) from None
    if not isinstance(value, dict):
        raise UnreadableFile(path, f"is {_json_type(value)}, not a JSON object")
    return value


def _parse(data: bytes) -> Any:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Refused(
            f"is not valid UTF-8 (byte {data[exc.start]:#04x} at offset {exc.start:,})"
        ) from None
    try:
        value = _STRICT.decode(text)
    except _Refused:
        raise
    except _json.JSONDecodeError as exc:
        raise _Refused(f"is not JSON ({exc.msg}: line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise _Refused(f"is nested deeper than {MAX_DEPTH} levels") from None
    except ValueError:
        limit = _sys.get_int_max_str_digits()
        raise _Refused(f"holds an integer of more than {limit:,} digits") from None
    _check_nesting_and_text(value, text)
    return value


def _finite_float(literal: str) -> float:
    value = float(literal)
    if not _math.isfinite(value):
        shown = literal if len(literal) <= 24 else literal[:21] + "..."
        raise _Refused(f"holds a number out of range ({shown})")
    return value


def _no_constant(literal: str) -> Any:
    raise _Refused(f"holds {literal}, which is not JSON")


_STRICT = _json.JSONDecoder(parse_float=_finite_float, parse_constant=_no_constant)


def _check_nesting_and_text(value: Any, text: str) -> None:
    if text.count("[") + text.count("{") > MAX_DEPTH:
        level = [value] if type(value) is dict or type(value) is list else []
        for _ in range(MAX_DEPTH):
            level = [
                child
                for item in level
                for child in (item.values() if type(item) is dict else item)
                if type(child) is dict or type(child) is list
            ]
            if not level:
                break
        else:
            if level:
                raise _Refused(f"is nested deeper than {MAX_DEPTH} levels")
    maybe = ("\\ud" in text or "\\uD" in text) and _SURROGATE_ESCAPE.search(text) is not None
    if maybe and _has_lone_surrogate(value):
        raise _Refused("holds a lone surrogate (\\ud800 to \\udfff), which is not text")


def _has_lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) is str:
            if _LONE_SURROGATE.search(item):
                return True
        elif type(item) is dict:
            stack.extend(item.keys())
            stack.extend(item.values())
        elif type(item) is list:
            stack.extend(item)
    return False


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _too_large(size: int, max_bytes: int) -> str:
    whole = max_bytes >= MiB and max_bytes % MiB == 0
    shown = f"{max_bytes // MiB:,} MiB" if whole else f"{max_bytes:,} bytes"
    return f"is {size:,} bytes, more than the {shown} read from such a file"
