"""Take the provider keys out of this process, so no kernel can read them from it.

Removing a variable from `os.environ` keeps it from every process started afterwards, but not from
`/proc/<pid>/environ`: that file shows the environment block the process was started with (the
range `env_start`..`env_end` of `/proc/<pid>/stat`, on the main thread's stack), which `unsetenv`
never touches, and any process of the same user (a kernel) can read it. So on Linux the values are
also overwritten there, in place, and the process is made non-dumpable: then a process of the same
user that is not root cannot read its `/proc/<pid>/environ` or `/proc/<pid>/mem` (where the held
values and the SDK clients live) at all. Root, or a process with CAP_SYS_PTRACE, can still read
any process's memory; nothing in a process can prevent that.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..core.held_keys import HeldKeys
from ..core.installed_providers import installed
from ..core.redaction import redact_withheld

log = logging.getLogger(__name__)

PR_SET_DUMPABLE = 4
PR_GET_DUMPABLE = 3
ENV_START_FIELD, ENV_END_FIELD = 50, 51  # of /proc/<pid>/stat, counted from 1 (Linux 3.5+)


@dataclass
class Withheld:
    """What `withhold_keys` did: the held keys and how far the process could be cleaned."""

    keys: HeldKeys
    wiped: list[str] = field(default_factory=list)  # variables overwritten in the initial block
    wiped_bytes: int = 0
    undumpable: bool = False
    problems: list[str] = field(default_factory=list)  # why a step was skipped

    def summary(self) -> str:
        names = ", ".join(sorted(self.keys)) or "none set"
        parts = [f"provider keys withheld from kernels ({names})"]
        if self.wiped:
            parts.append(f"{self.wiped_bytes} bytes wiped from the initial environment")
        parts.append("process non-dumpable" if self.undumpable else "process still dumpable")
        parts += self.problems
        return "; ".join(parts)


def withhold_keys(names: Iterable[str] | None) -> Withheld:
    """Move `names` (None: the key variables every installed provider declares) out of this
    process's environment into a holder: unset them (no process started from now on inherits
    them), overwrite their values in the initial environment block and make the process
    non-dumpable (Linux). Redaction keeps knowing the values."""
    wanted = list(dict.fromkeys(installed().key_variables() if names is None else names))
    values = {name: os.environ.pop(name) for name in wanted if name in os.environ}
    keys = HeldKeys(values)
    redact_withheld(keys.values())
    done = Withheld(keys)
    if not sys.platform.startswith("linux"):
        done.problems.append(
            f"the initial environment block is not wiped on {sys.platform} (Linux only)"
        )
        return done
    try:
        done.wiped, done.wiped_bytes = wipe_initial_environment(wanted)
    except (OSError, ValueError) as exc:
        done.problems.append(f"the initial environment block could not be wiped: {exc}")
    try:
        done.undumpable = make_undumpable()
    except OSError as exc:
        done.problems.append(f"the process could not be made non-dumpable: {exc}")
    return done


def initial_environment_range(stat: str | None = None) -> tuple[int, int]:
    """(env_start, env_end) of this process, from `/proc/self/stat`."""
    text = Path("/proc/self/stat").read_text() if stat is None else stat
    # Field 2 (the command name) is in parentheses and may hold spaces and parentheses itself.
    fields = text[text.rindex(")") + 2 :].split()
    offset = 3  # fields[0] is field 3
    if len(fields) < ENV_END_FIELD - offset + 1:
        raise ValueError("this kernel's /proc/self/stat has no env_start/env_end (Linux < 3.5)")
    start, end = int(fields[ENV_START_FIELD - offset]), int(fields[ENV_END_FIELD - offset])
    if not 0 < start <= end:
        raise ValueError(f"no initial environment block ({start}..{end})")
    return start, end


def wipe_initial_environment(names: Iterable[str]) -> tuple[list[str], int]:
    """Overwrite the values of `names` with NUL bytes in the environment block this process was
    started with (what `/proc/<pid>/environ` shows); (variables wiped, bytes overwritten).

    The block is checked against `/proc/self/environ` before anything is written, so a process
    whose block moved (setproctitle reuses it) is left alone with an error.
    """
    start, end = initial_environment_range()
    shown = Path("/proc/self/environ").read_bytes()
    block = ctypes.string_at(start, end - start)
    if block != shown:
        raise ValueError("the environment block in memory differs from /proc/self/environ")
    prefixes = [(name, name.encode() + b"=") for name in names]
    wiped: list[str] = []
    total = 0
    offset = 0
    for entry in block.split(b"\0"):
        for name, prefix in prefixes:
            if entry.startswith(prefix) and len(entry) > len(prefix):
                size = len(entry) - len(prefix)
                ctypes.memset(start + offset + len(prefix), 0, size)
                wiped.append(name)
                total += size
        offset += len(entry) + 1
    return wiped, total


def _prctl() -> Callable[..., int]:
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl


def make_undumpable() -> bool:
    """`prctl(PR_SET_DUMPABLE, 0)`: no core dumps, and `/proc/<pid>/{environ,mem,maps,fd,...}`
    belong to root, so processes of the same user that are not root cannot read them (nor attach
    a debugger or py-spy). Children started with exec are dumpable again. True once it holds."""
    prctl = _prctl()
    if prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return is_dumpable() is False


def is_dumpable() -> bool:
    return bool(_prctl()(PR_GET_DUMPABLE, 0, 0, 0, 0))
