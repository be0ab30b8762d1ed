"""One way to read a file or a body whose content nobody vouches for.

Every file the host reads (session logs and headers, mailboxes, harness stores and their
refinement records, snapshot manifests, image blobs, notebooks) and every REST or bridge request
body goes through here, so any content ends in one of two exceptions that say what is wrong:
`UnreadableFile` (the file, and why) or `BadJson` (a document or line, and why). Never a
RecursionError, a UnicodeDecodeError, a read that blocks, or a gigabyte in memory:

- A file is opened with O_NONBLOCK and checked with fstat, so a named pipe, socket, device or
  directory is refused at once (opening a FIFO without O_NONBLOCK waits for a writer forever),
  and read up to a cap per kind of file (the `MAX_*_BYTES` below; docs/sessions.md, "Damaged
  files").
- JSON is refused when it is nested deeper than MAX_DEPTH (json's C decoder recurses once per
  level and raises RecursionError somewhere near 1000 levels, depending on the caller's stack;
  copying, encoding or comparing a document recurses too), holds a number that is not finite
  (`1e999999` decodes to inf, which JSON cannot carry back out) or an integer longer than Python
  converts, holds NaN or Infinity, or a lone surrogate (a string that cannot be written as UTF-8).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

from .text import json_type

MiB = 2**20
MAX_DEPTH = 100
"""Deepest nesting of arrays and objects read; nothing the product writes comes near it."""

MAX_SESSION_LOG_BYTES = 256 * MiB
"""A session log is indexed in memory whole (about 5 KB per agent cell: 50,000 cells)."""
MAX_SESSION_HEADER_BYTES = MiB
"""The first line of a log, as the agent tree reads it (a header is a few hundred bytes)."""
MAX_MAILBOX_BYTES = 64 * MiB
MAX_HARNESS_BYTES = 64 * MiB
"""A harness store: entries of at most 100,000 characters, modules of 200,000."""
MAX_REFINEMENTS_BYTES = 64 * MiB
MAX_MANIFEST_BYTES = 16 * MiB
"""A snapshot manifest or restore report: a few lines per variable."""
MAX_BLOB_BYTES = 64 * MiB
"""An image of a cell's output (the notebook keeps at most 10 M characters of output)."""
MAX_NOTEBOOK_BYTES = 256 * MiB
MAX_COPIED_FILE_BYTES = 512 * MiB
"""One file of a fork or clone (kernel state, local harness): above the 256 MiB default cap of
a whole snapshot."""

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_SPECIAL_FILES = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a device"),
    (stat.S_ISBLK, "a device"),
)


class BadJson(ValueError):
    """A document (a file, a line, a body) that is not JSON this product reads.

    `reason` completes a sentence about the document ("is not JSON (...)"). `torn`: the text is
    not JSON at all (bad UTF-8, a syntax error), as a write cut by a crash leaves it, rather than
    JSON past a limit (too deep, a number out of range), which no crash produces.
    """

    def __init__(self, reason: str, torn: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.torn = torn


class UnreadableFile(Exception):
    """A file that cannot be read, whatever the cause: `str()` names the file and says why.

    `reason` completes a sentence about the file ("is missing", "is not a regular file (a named
    pipe)"). `missing`: there is no file at all, which many readers treat as empty.
    """

    def __init__(self, path: str | os.PathLike[str], reason: str, missing: bool = False) -> None:
        super().__init__(f"{os.fspath(path)} {reason}")
        self.path = Path(path)
        self.reason = reason
        self.missing = missing


# ---------------------------------------------------------------- JSON text


def parse_json(data: bytes | str, allow_nan: bool = False) -> Any:
    """The JSON value of `data`; raises BadJson for anything this module refuses.
    `allow_nan`: NaN, Infinity and numbers out of range come back as floats (for a caller that
    checks its numbers itself, as the bridge does its timestamp)."""
    if isinstance(data, bytes | bytearray):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            byte = data[exc.start]
            raise BadJson(
                f"is not valid UTF-8 (byte {byte:#04x} at offset {exc.start:,})", torn=True
            ) from None
    else:
        text = data
    try:
        value = (_LENIENT if allow_nan else _STRICT).decode(text)
    except BadJson:
        raise
    except json.JSONDecodeError as exc:
        raise BadJson(
            f"is not JSON ({exc.msg}: line {exc.lineno} column {exc.colno})", torn=True
        ) from None
    except RecursionError:
        raise BadJson(_too_deep()) from None
    except ValueError:  # int() of a number with too many digits
        limit = sys.get_int_max_str_digits()
        raise BadJson(f"holds an integer of more than {limit:,} digits") from None
    _check_nesting_and_text(value, text)
    return value


def parse_json_object(data: bytes | str) -> dict[str, Any]:
    """A JSON object; raises BadJson for anything else."""
    value = parse_json(data)
    if not isinstance(value, dict):
        raise BadJson(f"is {json_type(value)}, not a JSON object")
    return value


def _finite_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        shown = literal if len(literal) <= 24 else literal[:21] + "..."
        raise BadJson(f"holds a number out of range ({shown})")
    return value


def _no_constant(literal: str) -> Any:
    raise BadJson(f"holds {literal}, which is not JSON")


_STRICT = json.JSONDecoder(parse_float=_finite_float, parse_constant=_no_constant)
_LENIENT = json.JSONDecoder()


def _too_deep() -> str:
    return f"is nested deeper than {MAX_DEPTH} levels"


def _check_nesting_and_text(value: Any, text: str) -> None:
    """Refuse nesting past MAX_DEPTH and lone surrogates. Looks at the value only when the text
    could hold either (enough brackets, a surrogate escape), and then level by level at its
    arrays and objects alone."""
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
                raise BadJson(_too_deep())
    maybe = ("\\ud" in text or "\\uD" in text) and _SURROGATE_ESCAPE.search(text) is not None
    if maybe and _has_lone_surrogate(value):
        raise BadJson("holds a lone surrogate (\\ud800 to \\udfff), which is not text")


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


# ---------------------------------------------------------------- files


def read_bytes(path: str | os.PathLike[str], max_bytes: int) -> bytes:
    """The whole file, refused (UnreadableFile) past `max_bytes` or when it is not a regular
    file. Never blocks: a named pipe is refused, not read."""
    return _read(path, max_bytes, whole=True)


def read_prefix(path: str | os.PathLike[str], max_bytes: int) -> bytes:
    """The file's first `max_bytes` bytes (all of a shorter file), with the same refusals."""
    return _read(path, max_bytes, whole=False)


def read_json(path: str | os.PathLike[str], max_bytes: int) -> Any:
    """The file's JSON value; UnreadableFile names the file and says why not."""
    data = read_bytes(path, max_bytes)
    try:
        return parse_json(data)
    except BadJson as exc:
        raise UnreadableFile(path, exc.reason) from None


def read_json_object(path: str | os.PathLike[str], max_bytes: int) -> dict[str, Any]:
    """The file's JSON object; UnreadableFile for anything else (an array, a string, ...)."""
    value = read_json(path, max_bytes)
    if not isinstance(value, dict):
        raise UnreadableFile(path, f"is {json_type(value)}, not a JSON object")
    return value


def read_jsonl(path: str | os.PathLike[str], max_bytes: int) -> list[tuple[int, Any]]:
    """(line number, value) for each non-blank line; a line that is not JSON this module reads
    gives its BadJson as the value (the caller decides: a torn line is usually skipped). Only
    "\\n" ends a line: JSON leaves U+2028 and U+2029 unescaped inside strings."""
    lines = []
    for number, line in enumerate(read_bytes(path, max_bytes).split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            lines.append((number, parse_json(line)))
        except BadJson as exc:
            lines.append((number, exc))
    return lines


def open_regular(path: str | os.PathLike[str]) -> tuple[int, os.stat_result]:
    """A file descriptor on a regular file (the caller closes it) and its stat; UnreadableFile
    for anything else, at once."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise UnreadableFile(path, "is missing", missing=True) from None
    except OSError as exc:
        raise UnreadableFile(path, f"cannot be read ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        for test, kind in _SPECIAL_FILES:
            if test(info.st_mode):
                raise UnreadableFile(path, f"is not a regular file ({kind})")
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def _read(path: str | os.PathLike[str], max_bytes: int, whole: bool) -> bytes:
    fd, info = open_regular(path)
    with contextlib.closing(_Fd(fd)):
        if whole and info.st_size > max_bytes:
            raise UnreadableFile(path, too_large(info.st_size, max_bytes))
        limit = max_bytes + 1 if whole else max_bytes
        chunks: list[bytes] = []
        total = 0
        want = min(info.st_size + 1, limit)  # one read for a file that did not grow meanwhile
        while total < limit:
            try:
                chunk = os.read(fd, max(1, min(want, limit - total)))
            except OSError as exc:
                raise UnreadableFile(path, f"cannot be read ({exc.strerror or exc})") from None
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            want = MiB
        if whole and total > max_bytes:
            raise UnreadableFile(path, too_large(total, max_bytes))
        return b"".join(chunks)


def too_large(size: int, max_bytes: int) -> str:
    return f"is {size:,} bytes, more than the {_size(max_bytes)} read from such a file"


def copy_file(
    source: str | os.PathLike[str], target: str | os.PathLike[str], max_bytes: int
) -> None:
    """Copy a regular file of at most `max_bytes` (streamed, never whole in memory);
    UnreadableFile when the source is anything else. The target is written fresh."""
    fd, info = open_regular(source)
    with contextlib.closing(_Fd(fd)):
        if info.st_size > max_bytes:
            raise UnreadableFile(source, too_large(info.st_size, max_bytes))
        copied = 0
        with open(target, "wb") as out:
            while chunk := os.read(fd, MiB):
                copied += len(chunk)
                if copied > max_bytes:
                    raise UnreadableFile(source, too_large(copied, max_bytes))
                out.write(chunk)


def _size(count: int) -> str:
    if count >= MiB and count % MiB == 0:
        return f"{count // MiB:,} MiB"
    return f"{count:,} bytes"


class _Fd:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    def close(self) -> None:
        os.close(self.fd)
