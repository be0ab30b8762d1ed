"""Gates: the checks an autonomous run must pass before it may end (docs/autonomy.md).

A gate is a shell command, run in the run's folder in a session (process group) of its own, or a
`py:EXPR` check run in the agent's own kernel (one `assert ...` statement, or one expression that
must be truthy: nothing that changes the kernel). Either way the result is an exit status, the
output (stdout and stderr merged, or the Python error) cut to a bound keeping its head and tail,
and the seconds it took. A gate is cancellable: cancelling a shell gate kills what it started, as
its timeout and its end do (`_kill_tree`: its process group, every process descending from its
shell, and every process carrying its mark in the environment; one that detaches itself and
also clears its environment escapes, as from any job control).
"""

from __future__ import annotations

import ast
import asyncio
import codecs
import contextlib
import os
import secrets
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .observation import strip_ansi
from .ports import ExecutionResult, KernelPort, OutputEvent

PYTHON_PREFIX = "py:"
READ_CHUNK = 64 * 1024
NOT_STARTED = 127  # the shell's own status for a command that could not be run
EXIT_POLL = 0.05  # longest pause between looks at whether a shell gate exited
KILL_ROUNDS = 3  # looks for a gate's processes (one may fork while the others are killed)
DRAIN_SECONDS = 5.0  # to read what a gate wrote before it exited (or was killed)
GateKind = Literal["shell", "python"]
GATE_MARK = "PRIME_AGENT_LAB_GATE"
"""The environment variable that marks a shell gate's processes (a token per run), so the ones
that left its process group and its process tree (`setsid` in a subshell) are found and killed."""


@dataclass(frozen=True)
class Gate:
    command: str  # as the user gave it (`pytest -q`, `py:assert x == 1`)

    @property
    def kind(self) -> GateKind:
        return "python" if self.command.startswith(PYTHON_PREFIX) else "shell"

    @property
    def source(self) -> str:
        """The shell command, or the Python check without its `py:` prefix."""
        return (
            self.command.removeprefix(PYTHON_PREFIX).strip()
            if self.kind == "python"
            else (self.command)
        )


def parse_gate(text: str) -> Gate:
    """A gate from the user's text; ValueError for an empty one or a Python check that is not
    one `assert` statement or one expression (SyntaxError: it does not parse)."""
    if not text.strip():
        raise ValueError("a gate must be a shell command or py:EXPR, not empty")
    gate = Gate(text.strip())
    if gate.kind == "python":
        if not gate.source:
            raise ValueError(f"the gate {text!r} has no Python check after py:")
        python_check(gate.source)  # a SyntaxError is the user's mistake: said at once
    return gate


@dataclass(frozen=True)
class GateResult:
    gate: Gate
    exit_status: int | None  # None: killed at its timeout (or the kernel gave no status)
    output: str  # cut to the bound
    seconds: float
    timed_out: bool = False

    @property
    def passed(self) -> bool:
        return self.exit_status == 0 and not self.timed_out

    @property
    def first_line(self) -> str:
        return next((line.strip() for line in self.output.splitlines() if line.strip()), "")


def cut_output(text: str, limit: int) -> str:
    """`text` within `limit` characters: its head and tail, with a line saying what was cut."""
    if len(text) <= limit:
        return text
    half = max(limit // 2, 1)
    cut = len(text) - 2 * half
    return f"{text[:half]}\n[... {cut:,} characters of the gate's output cut ...]\n{text[-half:]}"


class _Bounded:
    """Output kept within memory: the first and the last `limit` characters, and the count."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.head = ""
        self.tail = ""
        self.total = 0

    def add(self, text: str) -> None:
        self.total += len(text)
        room = self.limit - len(self.head)
        if room > 0:
            self.head += text[:room]
            text = text[room:]
        if text:
            self.tail = (self.tail + text)[-self.limit :]

    def text(self) -> str:
        whole_len = len(self.head) + len(self.tail)
        if self.total == whole_len:
            return cut_output(self.head + self.tail, self.limit)
        half = max(self.limit // 2, 1)
        cut = self.total - 2 * half
        head, tail = self.head[:half], self.tail[-half:]
        return f"{head}\n[... {cut:,} characters of the gate's output cut ...]\n{tail}"


# ---------------------------------------------------------------- shell gates


def _kill_tree(pid: int, mark: str) -> None:
    """Kill what the gate started: its process group (the session its shell leads), every
    process still descending from its shell (found before any is killed, as a killed parent's
    children are reparented) and every process whose environment carries `mark` (one that
    detached itself: `setsid` in a subshell that exited). Again until none is left, as one may
    have forked meanwhile."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    for _ in range(KILL_ROUNDS):
        found = _gate_processes(pid, mark.encode())
        if not found:
            return
        for each in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(each, signal.SIGKILL)


def _gate_processes(root: int, mark: bytes) -> set[int]:
    """The live processes below `root` and those whose environment holds `mark` (from /proc;
    none where there is no /proc)."""
    children: dict[int, list[int]] = {}
    marked: set[int] = set()
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            pid = int(entry.name)
            try:
                state, parent = (
                    Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[:2]
                )
                environ = Path(f"/proc/{pid}/environ").read_bytes()
            except (OSError, ValueError):
                continue  # gone, or not ours to read (nor to kill)
            if state == b"Z":
                continue  # dead already, waiting to be reaped
            children.setdefault(int(parent), []).append(pid)
            if mark in environ.split(b"\0"):
                marked.add(pid)
    below: set[int] = set()
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in below:
                below.add(child)
                stack.append(child)
    return (below | marked) - {os.getpid(), root}


async def run_shell_gate(gate: Gate, cwd: Path, timeout: float, limit: int) -> GateResult:
    """Run `gate` with `cwd` as its folder. At `timeout` seconds, or when cancelled, what it
    started is killed (`_kill_tree`); whatever it left running when the shell exits is killed
    too (a gate must not leave processes behind, nor hold its output open)."""
    started = time.monotonic()
    mark = f"{GATE_MARK}={secrets.token_hex(12)}"
    try:
        process = await asyncio.create_subprocess_shell(
            gate.source,
            cwd=str(cwd),
            env={**os.environ, GATE_MARK: mark.split("=", 1)[1]},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:  # the folder is gone, no shell: a failed gate the model can read
        text = f"the gate could not start in {cwd}: {exc.strerror or exc}"
        return GateResult(gate, NOT_STARTED, text, time.monotonic() - started)
    output = _Bounded(limit)
    assert process.stdout is not None
    stdout = process.stdout

    async def read_all() -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        while chunk := await stdout.read(READ_CHUNK):
            output.add(decoder.decode(chunk))
        output.add(decoder.decode(b"", final=True))

    async def exited() -> int:
        # The exit status, as soon as the shell exits: `process.wait()` may also wait for the
        # output to close, which a process the gate left behind keeps open.
        pause = 0.002
        while process.returncode is None:
            await asyncio.sleep(pause)
            pause = min(pause * 2, EXIT_POLL)
        return process.returncode

    reading = asyncio.ensure_future(read_all())
    timed_out = False
    status: int | None = None
    try:
        status = await asyncio.wait_for(exited(), timeout)
    except TimeoutError:
        timed_out = True
    except BaseException:  # cancelled (Stop, a budget): the tree goes with it
        _kill_tree(process.pid, mark)
        reading.cancel()
        with contextlib.suppress(BaseException):
            await _let_go(process, reading)
        raise
    _kill_tree(process.pid, mark)  # what it left running, or all of it at its timeout
    if not await _let_go(process, reading):
        output.add("\n[the rest of the output was not read: a process the gate started holds it]")
    text = strip_ansi(output.text())
    if timed_out:
        text += f"\n[the gate was killed after {timeout:g} s, its timeout]"
    seconds = time.monotonic() - started
    return GateResult(gate, None if timed_out else status, text, seconds, timed_out)


async def _let_go(process: asyncio.subprocess.Process, reading: asyncio.Future[None]) -> bool:
    """Read what the killed gate left in its output and release the process; False when a
    process that left the gate's session still holds the output open (it is closed here)."""
    done, _ = await asyncio.wait({reading}, timeout=DRAIN_SECONDS)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(process.wait(), DRAIN_SECONDS)
    if not done:
        reading.cancel()
        process._transport.close()  # type: ignore[attr-defined]  # no public way to let go
    return bool(done)


# ---------------------------------------------------------------- Python gates

_FALSY = "the gate's expression is not true"


def python_check(source: str) -> str:
    """The code that runs a `py:` gate in the kernel: the statement as it is (`assert ...`), or
    an expression that must be truthy. SyntaxError: it does not parse; ValueError: it is not
    one `assert` statement or one expression (a gate checks the kernel, it must not change it:
    `auc = 0.91` would pass and set `auc`)."""
    body = ast.parse(source, "<gate>", "exec").body
    if len(body) != 1 or not isinstance(body[0], ast.Assert | ast.Expr):
        what = "nothing" if not body else f"{len(body)} statements"
        if len(body) == 1:
            what = f"an `{type(body[0]).__name__}` statement"
    elif any(isinstance(node, ast.NamedExpr) for node in ast.walk(body[0])):
        what = "an assignment (:=)"
    else:
        what = ""
    if what:
        raise ValueError(
            "a py: gate must be one `assert` statement or one expression (it checks the "
            f"kernel and must not change it); this is {what}"
        )
    if isinstance(body[0], ast.Assert):
        return source
    return f"if not ({source}):\n    raise AssertionError({_FALSY + ': ' + source!r})"


async def run_python_gate(gate: Gate, kernel: KernelPort, timeout: float, limit: int) -> GateResult:
    """Run a `py:` gate in the agent's kernel, which shares it with the user: like any agent
    cell it waits for a user's running cell (KernelPort.execute). It sees the kernel's
    variables. Exit status 0 when it raised nothing, 1 otherwise (the error is the output)."""
    started = time.monotonic()
    events: list[OutputEvent] = []
    result = await kernel.execute(python_check(gate.source), events.append, timeout)
    output = _python_output(result, events)
    status = 0 if result.status == "ok" else 1
    timed_out = result.status == "timeout"
    if timed_out:
        output += f"\n[the gate was interrupted after {timeout:g} s, its timeout]"
    text = cut_output(strip_ansi(output), limit)
    seconds = time.monotonic() - started
    return GateResult(gate, None if timed_out else status, text, seconds, timed_out)


def _python_output(result: ExecutionResult, events: list[OutputEvent]) -> str:
    outputs = result.outputs or [e.output for e in events if e.output is not None]
    parts: list[str] = []
    for output in outputs:
        kind = output.get("output_type")
        if kind == "stream":
            parts.append(str(output.get("text", "")))
        elif kind == "error":
            traceback = output.get("traceback")
            if isinstance(traceback, list) and traceback:
                parts.append("\n".join(str(line) for line in traceback))
            else:
                parts.append(f"{output.get('ename')}: {output.get('evalue')}")
        elif kind in ("execute_result", "display_data"):
            data = output.get("data", {})
            if isinstance(data, dict) and "text/plain" in data:
                parts.append(str(data["text/plain"]))
    if result.note:
        parts.append(result.note)
    if result.status not in ("ok", "error") and not parts:
        parts.append(f"the check did not run to the end ({result.status})")
    return "\n".join(p.rstrip("\n") for p in parts)
