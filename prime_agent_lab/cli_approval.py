"""`run --permission ask` on the terminal (docs/pairing.md, section 4): each agent cell waiting
for approval is shown on stderr with `Run this cell? [y]es/[n]o(skip)/[e]dit`, and the answer is
read from stdin. stdin may be a terminal, a pipe or a file (scripts and tests answer that way);
an answer the input cannot give (it ended, also in the middle of an edit: unfinished code never
runs) skips the cell. A stdin that can give no answer at all (closed, or /dev/null) is refused
before the run starts."""

from __future__ import annotations

import asyncio
import os
import stat
import sys
import threading
from typing import Any, TextIO

from .core.agent import Agent
from .core.events import Event
from .core.permission import PermissionRefused

QUESTION = "Run this cell? [y]es/[n]o(skip)/[e]dit: "
EDIT_PROMPT = "Code to run instead; end it with a line holding only '.':"


def stdin_problem(stdin: TextIO | None) -> str | None:
    """Why `stdin` cannot answer approval prompts, or None (a terminal, a pipe, a file)."""
    if stdin is None or stdin.closed:
        return "stdin is closed"
    try:
        fd = stdin.fileno()
    except (OSError, ValueError):
        return None  # not a real file (an in-process test): it can still be read
    if os.isatty(fd):
        return None
    if stat.S_ISCHR(os.fstat(fd).st_mode):  # a character device that is no terminal: /dev/null
        return "stdin is not a terminal, a pipe or a file (it gives no answers)"
    return None


class _Lines:
    """stdin read line by line on a daemon thread (a blocked read never holds the exit up)."""

    def __init__(self, stdin: TextIO) -> None:
        self._stdin = stdin
        self._queue: asyncio.Queue[str | None] | None = None

    async def next(self) -> str | None:
        """The next line without its newline, or None once the input ended."""
        if self._queue is None:
            loop = asyncio.get_running_loop()
            queue: asyncio.Queue[str | None] = asyncio.Queue()
            self._queue = queue

            def read() -> None:
                for line in iter(self._stdin.readline, ""):
                    loop.call_soon_threadsafe(queue.put_nowait, line.rstrip("\r\n"))
                loop.call_soon_threadsafe(queue.put_nowait, None)

            threading.Thread(target=read, name="approval-stdin", daemon=True).start()
        line = await self._queue.get()
        if line is None:
            self._queue.put_nowait(None)  # ended for every later question too
        return line


class TerminalApprover:
    """Answers the cells waiting for approval of `agents` (the run's root and its sub-agents),
    one question at a time."""

    def __init__(self, find: Any, stdin: TextIO = sys.stdin, out: TextIO = sys.stderr) -> None:
        self._find = find  # session id -> the Agent, or None
        self._lines = _Lines(stdin)
        self._out = out
        self._turn = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()

    def watch(self, agent: Agent) -> None:
        agent.events.add_listener(self)

    def __call__(self, event: Event) -> None:
        if event["type"] == "child_spawned":  # its cells ask too
            child = self._find(event["rlm_child_id"])
            if child is not None:
                self.watch(child)
        if event["type"] != "cell_awaiting_approval":
            return
        agent = self._find(event["session_id"])
        if agent is None:
            return
        task = asyncio.ensure_future(self._ask(agent, event))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _say(self, text: str, end: str = "\n") -> None:
        self._out.write(text + end)
        self._out.flush()

    async def _ask(self, agent: Agent, event: Event) -> None:
        call_id = str(event["tool_call_id"])
        async with self._turn:
            while call_id in agent.permission.waiting():
                self._say(QUESTION, end="")
                answer = await self._lines.next()
                if answer is None:
                    self._say("\n(stdin ended: the cell is skipped)")
                    decision: tuple[str, str | None] = ("skip", None)
                elif answer.strip().lower() in ("y", "yes"):
                    decision = ("run", None)
                elif answer.strip().lower() in ("n", "no", "s", "skip"):
                    decision = ("skip", None)
                elif answer.strip().lower() in ("e", "edit"):
                    code = await self._edited()
                    if code is None:  # an unfinished edit is never run
                        self._say(
                            "\n(stdin ended before the edit's closing '.': the cell is skipped)"
                        )
                        decision = ("skip", None)
                    elif not code.strip():
                        self._say("(no code given)")
                        continue
                    else:
                        decision = ("run", code)
                else:
                    self._say(f"(answer y, n or e, not {answer.strip()[:20]!r})")
                    continue
                try:
                    if decision[0] == "run":
                        agent.approve(call_id, decision[1])
                    else:
                        agent.skip(call_id)
                except PermissionRefused:  # stopped meanwhile: nothing waits any more
                    pass
                return

    async def _edited(self) -> str | None:
        """The code typed up to the closing '.' line, or None if the input ended before it."""
        self._say(EDIT_PROMPT)
        lines: list[str] = []
        while (line := await self._lines.next()) != ".":
            if line is None:
                return None
            lines.append(line)
        return "\n".join(lines)
