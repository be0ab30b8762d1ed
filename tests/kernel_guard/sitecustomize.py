"""Makes folders out of reach of a kernel process, as a gateway kernel on another machine is out
of reach of the host's disk (tests/test_snapshots_bridge.py puts this folder first on the
kernels' PYTHONPATH).

`PRIME_AGENT_TEST_GUARD`: folders (os.pathsep-separated); any open, listing, rename, removal or
creation under them raises PermissionError in this process, and is recorded, one line each, in
the file `PRIME_AGENT_TEST_GUARD_LOG`. Processes without the variable are not touched."""

import os
import sys

_folders = [
    os.path.realpath(f) for f in os.environ.get("PRIME_AGENT_TEST_GUARD", "").split(os.pathsep) if f
]
_EVENTS = frozenset(
    {
        "open",
        "os.listdir",
        "os.scandir",
        "os.rename",
        "os.remove",
        "os.mkdir",
        "os.rmdir",
        "os.chmod",
        "os.truncate",
        "os.symlink",
        "os.link",
        "shutil.copyfile",
        "shutil.rmtree",
    }
)


def _guarded(path: str) -> bool:
    full = os.path.realpath(path)
    return any(full == f or full.startswith(f + os.sep) for f in _folders)


if _folders:
    _log = os.open(
        os.environ["PRIME_AGENT_TEST_GUARD_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600
    )

    def _guard(event: str, args: tuple) -> None:
        if event not in _EVENTS:
            return
        for arg in args[:2]:
            if isinstance(arg, (str, bytes, os.PathLike)) and _guarded(os.fsdecode(arg)):
                os.write(_log, f"{os.getpid()} {event} {os.fsdecode(arg)}\n".encode())
                raise PermissionError(f"{os.fsdecode(arg)} is out of this kernel's reach")

    sys.addaudithook(_guard)
