"""The whole agent loop per cell, as a user waits for it, measured from outside.

A local model server (`tests/fake_llm_server.py`) speaks the OpenAI Chat Completions and Anthropic
Messages wire formats, streamed (SSE) and not, and answers instantly: one `python` tool call with
the trivial cell `x = 1` per request until the turn has run the cells its prompt asks for
("run N cells"), then a final text. The real `openai` and `anthropic` SDKs reach it through
`OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL`. The server stamps each request's arrival and the end of
its answer, so per cell k (the k-th tool call):

- gap: from the arrival of request k to the arrival of request k+1 (what a user waits per cell);
- harness: from the end of answer k to the arrival of request k+1 (the harness's own time: parse,
  write the cell, run it, observe, record, build and send the next request).

Cell 1 also waits for the kernel to boot, so medians cover cells 2..N. For a long turn, "early"
and "late" are the harness medians over cells 2-21 and the last 20 cells (181-200 of 200).

The baseline, measured in the same run right before each turn so machine noise hits both: a bare
`jupyter_client` `execute_interactive("x = 1")` round trip on a warm kernel. "added" is the gap
median minus that.

Paths:
- headless: the real CLI as a subprocess (`prime-agent-lab run --provider ...` in a temp dir).
  Also: process start to the first model request, and a whole 3-step run (three cells, then the
  final text) against a bare process that starts a kernel and runs the same three cells
  (median of `--startup-runs`, alternating).
- server: a real `jupyter server` subprocess with the extension, a temp root and a token. A
  collaboration room is opened for each notebook by a real websocket client (pycrdt `Provider` over
  `httpx-ws`, as a JupyterLab tab does), so the live document the agent writes into has a client
  to sync; the agent is attached with `POST prime-agent/api/sessions` and the turn is sent with
  `POST .../messages`.

Context: a session that already holds `--context-turns` earlier turns (one cell each) before the
measured turn. Headless: built in this process with the product's `HeadlessRun`, then the CLI
continues it (`--continue`); server: the earlier turns are sent through the REST API.

Run: `python bench/bench_loop.py [--cells 20,200] [--paths headless,server]
[--providers openai,anthropic] [--stream both|on|off] [--context-turns 100]`;
`--smoke` runs tiny sizes (headless/openai streamed, server/anthropic not streamed) for CI.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import re
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from httpx_ws import aconnect_ws
from jupyter_client.manager import AsyncKernelManager
from jupyter_ydoc import YNotebook
from pycrdt import Provider
from pycrdt.websocket.websocket import HttpxWebsocket

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "kernel_ext")]

from tests.fake_llm_server import FakeLLMServer, RecordedRequest, Reply  # noqa: E402

CELL_CODE = "x = 1"
MODEL = "fake-model"
NOTEBOOK = "bench.ipynb"
PROMPT_PATTERN = re.compile(r"run (\d+) cells")
TURN_TIMEOUT = 900.0
WINDOW = 20  # cells in the "early" and "late" windows of a long turn

GAP_HEADER = (
    "path      provider   stream  context  cells  gap med  harness med   bare  added  "
    "early  late  late/early  loop cpu"
)
STARTUP_HEADER = "provider   stream  start->1st request  3-step run  bare process  ratio"

BARE_PROCESS = """
from jupyter_client.manager import start_new_kernel
km, kc = start_new_kernel(kernel_name="python3")
for _ in range(3):
    kc.execute_interactive("x = 1", timeout=60)
kc.stop_channels()
km.shutdown_kernel()
"""


def prompt(cells: int) -> str:
    return f"run {cells} cells"


# ---------------------------------------------------------------- the local model


def _user_texts(request: RecordedRequest) -> list[str]:
    texts: list[str] = []
    for message in request.messages:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        else:
            texts.extend(
                str(part.get("text", "")) for part in content or [] if part.get("type") == "text"
            )
    return texts


def cells_asked(request: RecordedRequest) -> int:
    """The N of the newest "run N cells" prompt in the request (0 when there is none)."""
    for text in reversed(_user_texts(request)):
        match = PROMPT_PATTERN.search(text)
        if match:
            return int(match.group(1))
    return 0


class LoopModel:
    """Answers instantly: a trivial cell per request until the turn has its cells, then text."""

    def __init__(self) -> None:
        self.server = FakeLLMServer(self.policy)
        self.finals = 0  # final (text-only) answers given so far
        self._lock = threading.Lock()
        self.watched: int | None = None  # pid of the process under test
        self.loop_cpu: dict[int, float] = {}  # id(request) -> its main thread's CPU time, s

    def policy(self, request: RecordedRequest) -> Reply:
        if self.watched is not None:
            cpu = main_thread_cpu(self.watched)
            if cpu is not None:
                self.loop_cpu[id(request)] = cpu
        done = len(request.turn_tool_results())
        if done < cells_asked(request):
            return Reply.code(CELL_CODE)
        with self._lock:
            self.finals += 1
        return Reply(text=f"Ran {done} cells.")

    def mark(self) -> int:
        return len(self.server.requests)

    def since(self, mark: int) -> list[RecordedRequest]:
        return list(self.server.requests[mark:])

    async def wait_finals(self, count: int, alive: Any, timeout: float = TURN_TIMEOUT) -> None:
        """Wait until `count` final answers were given; `alive()` False means give up."""
        deadline = time.monotonic() + timeout
        while self.finals < count:
            if not alive():
                raise RuntimeError("the process under test exited before the turn ended")
            if time.monotonic() > deadline:
                raise TimeoutError(f"no final answer within {timeout:.0f} s")
            await asyncio.sleep(0.02)


def main_thread_cpu(pid: int) -> float | None:
    """Seconds the main thread of `pid` (the event loop, for the CLI and the server) has run on a
    CPU, in nanosecond resolution (Linux `schedstat`); None where that is not available."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


# ---------------------------------------------------------------- figures


@dataclass
class Row:
    path: str
    provider: str
    stream: bool
    context: int  # earlier turns in the session
    cells: int
    gap: float  # ms, median over cells 2..N
    harness: float
    bare: float
    early: float
    late: float
    loop_cpu: float  # ms per cell (cells 2..N) the product's event-loop thread ran on a CPU
    gaps: list[float] = field(default_factory=list, repr=False)  # per cell 1..N, for --json
    harness_cells: list[float] = field(default_factory=list, repr=False)

    @property
    def added(self) -> float:
        return self.gap - self.bare

    @property
    def ratio(self) -> float:
        return self.late / self.early if self.early else float("nan")

    def line(self) -> str:
        stream = "on" if self.stream else "off"
        return (
            f"{self.path:<9} {self.provider:<10} {stream:<7} {self.context:>7} {self.cells:>6} "
            f"{self.gap:>8.1f} {self.harness:>12.1f} {self.bare:>6.1f} {self.added:>6.1f} "
            f"{self.early:>6.1f} {self.late:>5.1f} {self.ratio:>11.2f} {self.loop_cpu:>9.2f}"
        )


@dataclass
class StartupRow:
    provider: str
    stream: bool
    first_request: float  # s, median
    run: float  # s, median of the whole 3-step CLI run
    bare: float  # s, median of the bare kernel-plus-three-cells process

    def line(self) -> str:
        stream = "on" if self.stream else "off"
        return (
            f"{self.provider:<10} {stream:<7} {self.first_request:>18.3f} {self.run:>11.3f} "
            f"{self.bare:>13.3f} {self.run / self.bare:>6.2f}"
        )


def windows(cells: int) -> tuple[range, range]:
    """Cell numbers of the early window (from cell 2) and the late window (the last cells)."""
    width = min(WINDOW, max(1, (cells - 1) // 2))
    return range(2, 2 + width), range(cells - width + 1, cells + 1)


def per_cell(requests: Sequence[RecordedRequest], cells: int) -> tuple[list[float], list[float]]:
    """(gap, harness) in ms for cells 1..N, from the N+1 requests of one turn."""
    if len(requests) != cells + 1:
        raise RuntimeError(
            f"expected {cells + 1} model requests for {cells} cells, saw {len(requests)}"
        )
    gaps = [(b.arrived - a.arrived) * 1000 for a, b in itertools.pairwise(requests)]
    harness = [(b.arrived - a.finished) * 1000 for a, b in itertools.pairwise(requests)]
    return gaps, harness


def loop_cpu_per_cell(
    requests: Sequence[RecordedRequest], cpu: dict[int, float], cells: int
) -> float:
    """ms of the product's event-loop thread per cell over cells 2..N (NaN when not measured)."""
    first, last = cpu.get(id(requests[1])), cpu.get(id(requests[-1]))
    if first is None or last is None or cells < 2:
        return float("nan")
    return (last - first) * 1000 / (cells - 1)


def make_row(
    path: str,
    provider: str,
    stream: bool,
    context: int,
    cells: int,
    requests: Sequence[RecordedRequest],
    bare: float,
    loop_cpu: float = float("nan"),
) -> Row:
    gaps, harness = per_cell(requests, cells)
    early, late = windows(cells)
    return Row(
        path=path,
        provider=provider,
        stream=stream,
        context=context,
        cells=cells,
        gap=statistics.median(gaps[1:]),
        harness=statistics.median(harness[1:]),
        bare=bare,
        early=statistics.median(harness[k - 1] for k in early),
        late=statistics.median(harness[k - 1] for k in late),
        loop_cpu=loop_cpu,
        gaps=gaps,
        harness_cells=harness,
    )


# ---------------------------------------------------------------- the bare round trip


class BareKernel:
    """A warm kernel and its own client: the floor every per-cell figure is compared with."""

    def __init__(self) -> None:
        self.km = AsyncKernelManager(kernel_name="python3")
        self.client: Any = None

    async def start(self) -> None:
        await self.km.start_kernel()
        self.client = self.km.client()
        self.client.start_channels()
        await self.client.wait_for_ready(timeout=60)
        await self.median_ms(10)

    async def median_ms(self, runs: int) -> float:
        times: list[float] = []
        for _ in range(runs):
            start = time.perf_counter()
            await self.client.execute_interactive(CELL_CODE, output_hook=lambda m: None, timeout=60)
            times.append((time.perf_counter() - start) * 1000)
        return statistics.median(times)

    async def stop(self) -> None:
        self.client.stop_channels()
        await self.km.shutdown_kernel(now=True)


# ---------------------------------------------------------------- processes


def executable(name: str) -> str:
    """The installed script beside this interpreter (a pyenv shim would add its own start-up)."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        raise SystemExit(f"bench_loop: `{name}` is not installed")
    return found


def py_spy_argv(output: Path) -> list[str]:
    """py-spy sampling a process into `output` as collapsed stacks (one per line)."""
    output.parent.mkdir(parents=True, exist_ok=True)
    return [
        executable("py-spy"),
        "record",
        "--nonblocking",
        "--rate",
        "500",
        "--format",
        "raw",
        "-o",
        str(output),
    ]


def child_env(model: LoopModel) -> dict[str, str]:
    env = dict(os.environ)
    paths = [str(ROOT), str(ROOT / "kernel_ext"), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    env["OPENAI_BASE_URL"] = model.server.openai_base_url
    env["OPENAI_API_KEY"] = "sk-bench-openai"
    env["ANTHROPIC_BASE_URL"] = model.server.base_url
    env["ANTHROPIC_API_KEY"] = "sk-bench-anthropic"
    return env


async def run_process(
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    log: Path,
    on_start: Callable[[int], None] | None = None,
) -> float:
    """Run to the end (`on_start` gets its pid); the wall time in seconds. A failure raises with
    the log's tail."""
    with log.open("wb") as out:
        start = time.perf_counter()
        process = await asyncio.create_subprocess_exec(
            *argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT
        )
        if on_start is not None:
            on_start(process.pid)
        try:
            code = await asyncio.wait_for(process.wait(), TURN_TIMEOUT)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise
        elapsed = time.perf_counter() - start
    if code != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"{' '.join(argv[:3])} … exited {code}:\n{tail}")
    return elapsed


# ---------------------------------------------------------------- headless path


@dataclass
class Combo:
    path: str
    provider: str
    stream: bool


class Headless:
    def __init__(self, model: LoopModel, bare: BareKernel, options: argparse.Namespace) -> None:
        self.model = model
        self.bare = bare
        self.options = options
        self.cli = executable("prime-agent-lab")
        self.env = child_env(model)

    def argv(self, combo: Combo, cells: int, *extra: str) -> list[str]:
        argv = [self.cli, "run", prompt(cells), "--provider", combo.provider, "--model", MODEL]
        argv += ["--notebook", NOTEBOOK, "--max-iterations", str(cells + 5), "--mode", "json"]
        argv += ([] if combo.stream else ["--no-stream"]) + list(extra)
        if self.options.py_spy is None:
            return argv
        name = f"headless-{combo.provider}-{'stream' if combo.stream else 'nostream'}-{cells}"
        return [*py_spy_argv(self.options.py_spy / f"{name}.txt"), "--", *argv]

    def watch(self, pid: int) -> None:
        if self.options.py_spy is None:  # else the pid is py-spy's
            self.model.watched = pid

    async def turn(
        self, combo: Combo, workdir: Path, cells: int, *extra: str
    ) -> tuple[list[RecordedRequest], float, float]:
        """(the turn's requests, start to first request in s, whole run in s)."""
        mark = self.model.mark()
        start = time.perf_counter()
        log = workdir / f"cli-{cells}-{mark}.log"
        argv = self.argv(combo, cells, *extra)
        try:
            elapsed = await run_process(argv, workdir, self.env, log, self.watch)
        finally:
            self.model.watched = None
        requests = self.model.since(mark)
        if not requests:
            raise RuntimeError(f"the CLI sent no model request; see {log}")
        return requests, requests[0].arrived - start, elapsed

    async def measure(self, combo: Combo, cells: int, context: int) -> Row:
        with tempfile.TemporaryDirectory(prefix="bench-loop-") as tmp:
            workdir = Path(tmp)
            extra: tuple[str, ...] = ()
            if context:
                await self.build_context(combo, workdir, context)
                extra = ("--continue",)
            bare = await self.bare.median_ms(self.options.bare_runs)
            requests, _, _ = await self.turn(combo, workdir, cells, *extra)
        cpu = loop_cpu_per_cell(requests, self.model.loop_cpu, cells)
        return make_row(
            "headless", combo.provider, combo.stream, context, cells, requests, bare, cpu
        )

    async def build_context(self, combo: Combo, workdir: Path, turns: int) -> None:
        """Earlier one-cell turns in a session the CLI then continues (built in-process: fast)."""
        from prime_agent_lab.core.settings import Settings
        from prime_agent_lab.headless import HeadlessRun

        run = HeadlessRun(
            cwd=workdir,
            notebook=NOTEBOOK,
            provider=combo.provider,
            model=MODEL,
            script_path=None,
            stream=combo.stream,
            kernel_name="python3",
            settings=Settings(),
        )
        await run.start(lambda event: None)
        try:
            for _ in range(turns):
                outcome = await run.agent.run_turn(prompt(1))
                if outcome.stop_reason != "end_turn":
                    raise RuntimeError(f"a context turn ended with {outcome.stop_reason}")
        finally:
            await run.close()

    async def startup(self, combo: Combo) -> StartupRow:
        """Start to first request and the whole 3-step run, against a bare kernel process."""
        firsts: list[float] = []
        runs: list[float] = []
        bares: list[float] = []
        bare_argv = [sys.executable, "-c", BARE_PROCESS]
        for _ in range(self.options.startup_runs):
            with tempfile.TemporaryDirectory(prefix="bench-loop-") as tmp:
                workdir = Path(tmp)
                _, first, elapsed = await self.turn(combo, workdir, 3)
                firsts.append(first)
                runs.append(elapsed)
                log = workdir / "bare.log"
                bares.append(await run_process(bare_argv, workdir, self.env, log))
        return StartupRow(
            combo.provider,
            combo.stream,
            statistics.median(firsts),
            statistics.median(runs),
            statistics.median(bares),
        )


# ---------------------------------------------------------------- server path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class JupyterServer:
    """A real `jupyter server` subprocess with the extension, on a temp root."""

    def __init__(
        self, root: Path, combo: Combo, env: dict[str, str], profile: Path | None = None
    ) -> None:
        self.root = root
        self.combo = combo
        self.env = env
        self.profile = profile
        self.profiler: subprocess.Popen[bytes] | None = None
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.base = f"http://127.0.0.1:{self.port}/"
        self.process: subprocess.Popen[bytes] | None = None
        self.log = root.parent / "jupyter-server.log"

    def argv(self) -> list[str]:
        state = self.root.parent
        return [
            executable("jupyter"),
            "server",
            "--no-browser",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            "--ServerApp.ip=127.0.0.1",
            f"--IdentityProvider.token={self.token}",
            "--ServerApp.allow_root=True",
            f"--ServerApp.root_dir={self.root}",
            f"--SQLiteYStore.db_path={state / 'ystore.db'}",
            f"--BaseFileIdManager.db_path={state / 'file_id.db'}",
            f"--PrimeAgentLab.provider={self.combo.provider}",
            f"--PrimeAgentLab.model={MODEL}",
            f"--PrimeAgentLab.stream={self.combo.stream}",
            "--PrimeAgentLab.max_iterations=100000",
        ]

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    async def start(self, http: httpx.AsyncClient) -> None:
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                self.argv(), cwd=self.root, env=self.env, stdout=out, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if not self.alive():
                raise RuntimeError(f"jupyter server exited:\n{self.tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if (await http.get(self.base + "prime-agent/api/info")).status_code == 200:
                    self.start_profiler()
                    return
            await asyncio.sleep(0.1)
        raise TimeoutError(f"jupyter server did not answer within 180 s:\n{self.tail()}")

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""

    def start_profiler(self) -> None:
        """py-spy attached once the server is up (start-up is not what is measured here)."""
        if self.profile is None or self.process is None:
            return
        name = f"server-{self.combo.provider}-{'stream' if self.combo.stream else 'nostream'}"
        argv = [*py_spy_argv(self.profile / f"{name}.txt"), "--pid", str(self.process.pid)]
        self.profiler = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)

    def stop(self) -> None:
        if self.process is None:
            return
        if self.profiler is not None:
            self.profiler.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
            self.profiler.wait(60)
        self.process.terminate()  # the server shuts its kernels down on SIGTERM
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def write_notebook(path: Path) -> None:
    notebook = {
        "cells": [],
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(notebook))


@contextlib.asynccontextmanager
async def open_room(http: httpx.AsyncClient, base: str, path: str) -> AsyncIterator[YNotebook]:
    """Join the notebook's collaboration room as a JupyterLab tab does; yields the synced copy."""
    answer = await http.put(
        f"{base}api/collaboration/session/{quote(path)}",
        json={"format": "json", "type": "notebook"},
    )
    answer.raise_for_status()
    session = answer.json()
    room = f"json:notebook:{session['fileId']}"
    url = f"{base}api/collaboration/room/{room}?sessionId={session['sessionId']}"
    doc = YNotebook()
    async with (
        aconnect_ws(url, http, max_message_size_bytes=64 * 1024 * 1024) as websocket,
        Provider(doc.ydoc, HttpxWebsocket(websocket, room)),
    ):
        yield doc


class Server:
    def __init__(self, model: LoopModel, bare: BareKernel, options: argparse.Namespace) -> None:
        self.model = model
        self.bare = bare
        self.options = options
        self.env = child_env(model)

    async def measure_all(self, combo: Combo, sizes: Sequence[int], context: int) -> list[Row]:
        rows: list[Row] = []
        with tempfile.TemporaryDirectory(prefix="bench-loop-") as tmp:
            root = Path(tmp) / "root"
            root.mkdir()
            server = JupyterServer(root, combo, self.env, self.options.py_spy)
            headers = {"Authorization": f"token {server.token}"}
            async with httpx.AsyncClient(headers=headers, timeout=60) as http:
                try:
                    await server.start(http)
                    for cells in sizes:
                        rows.append(await self.measure(server, http, combo, cells, 0))
                    if context:
                        rows.append(await self.measure(server, http, combo, max(sizes), context))
                finally:
                    server.stop()
        return rows

    async def measure(
        self, server: JupyterServer, http: httpx.AsyncClient, combo: Combo, cells: int, context: int
    ) -> Row:
        path = f"loop-{cells}-context-{context}.ipynb"
        write_notebook(server.root / path)
        async with open_room(http, server.base, path) as doc:
            answer = await http.post(
                server.base + "prime-agent/api/sessions", json={"notebook_path": path}
            )
            answer.raise_for_status()
            session_id = answer.json()["session_id"]
            for _ in range(context):
                await self.turn(server, http, session_id, 1)
            bare = await self.bare.median_ms(self.options.bare_runs)
            mark = self.model.mark()
            self.model.watched = server.process.pid if server.process else None
            try:
                await self.turn(server, http, session_id, cells)
            finally:
                self.model.watched = None
            requests = self.model.since(mark)
            await self.wait_cells(doc, context + cells)
        cpu = loop_cpu_per_cell(requests, self.model.loop_cpu, cells)
        return make_row("server", combo.provider, combo.stream, context, cells, requests, bare, cpu)

    async def turn(
        self, server: JupyterServer, http: httpx.AsyncClient, session_id: str, cells: int
    ) -> None:
        finals = self.model.finals
        url = f"{server.base}prime-agent/api/sessions/{session_id}"
        answer = await http.post(url + "/messages", json={"text": prompt(cells)})
        answer.raise_for_status()
        await self.model.wait_finals(finals + 1, server.alive)
        while (await http.get(url)).json()["status"] != "idle":
            await asyncio.sleep(0.02)

    async def wait_cells(self, doc: YNotebook, count: int) -> None:
        """The room's client received every agent cell (the live path really ran)."""
        deadline = time.monotonic() + 30
        while doc.cell_number < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the room client saw {doc.cell_number} cells, not {count}")
            await asyncio.sleep(0.05)


# ---------------------------------------------------------------- main


def combos(options: argparse.Namespace) -> list[Combo]:
    if options.smoke:
        return [Combo("headless", "openai", True), Combo("server", "anthropic", False)]
    streams = {"both": [True, False], "on": [True], "off": [False]}[options.stream]
    return [
        Combo(path, provider, stream)
        for path in options.paths
        for provider in options.providers
        for stream in streams
    ]


async def main(options: argparse.Namespace) -> tuple[list[Row], list[StartupRow], float]:
    model = LoopModel()
    model.server.start()
    os.environ.update(child_env(model))  # the in-process context builder and kernels use it too
    bare = BareKernel()
    await bare.start()
    rows: list[Row] = []
    startups: list[StartupRow] = []
    try:
        headless = Headless(model, bare, options)
        server = Server(model, bare, options)
        for combo in combos(options):
            print(f"# {combo.path} {combo.provider} stream={combo.stream}", file=sys.stderr)
            if combo.path == "headless":
                for cells in options.cells:
                    rows.append(await headless.measure(combo, cells, 0))
                if options.context_turns:
                    turns = options.context_turns
                    rows.append(await headless.measure(combo, max(options.cells), turns))
                if options.startup_runs:
                    startups.append(await headless.startup(combo))
            else:
                rows += await server.measure_all(combo, options.cells, options.context_turns)
        overall_bare = await bare.median_ms(options.bare_runs)
    finally:
        await bare.stop()
        model.server.stop()
    return rows, startups, overall_bare


def report(rows: list[Row], startups: list[StartupRow], bare: float) -> None:
    print(
        "per agent cell (ms): gap = between consecutive model requests; harness = end of one "
        "answer to the next request; bare = execute_interactive round trip on a warm kernel, "
        "measured right before each turn; medians over cells 2..N; added = gap - bare; early/late "
        f"= harness medians over cells 2-{1 + WINDOW} and the last {WINDOW} (fewer in short "
        "turns); loop cpu = CPU time of the CLI's or the server's main (event-loop) thread "
        "per cell, cells 2..N"
    )
    print(GAP_HEADER)
    for row in rows:
        print(row.line())
    if startups:
        print()
        print(
            "start-up of the headless CLI (s), medians: process start to the first model request, "
            "a whole 3-step run (three cells, then the answer), and a bare process that starts a "
            "kernel and runs the same three cells; ratio = 3-step run / bare process"
        )
        print(STARTUP_HEADER)
        for startup in startups:
            print(startup.line())
    print()
    print(f"bare round trip over the whole run (median): {bare:.2f} ms")


def csv_ints(text: str) -> list[int]:
    values = [int(part) for part in text.split(",") if part.strip()]
    if not values or min(values) < 3:
        raise argparse.ArgumentTypeError("cell counts are integers >= 3")
    return values


def csv_choice(allowed: Sequence[str]) -> Any:
    def parse(text: str) -> list[str]:
        values = [part.strip() for part in text.split(",") if part.strip()]
        wrong = [value for value in values if value not in allowed]
        if wrong or not values:
            raise argparse.ArgumentTypeError(f"choose from {', '.join(allowed)}")
        return values

    return parse


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cells", type=csv_ints, default=[20, 200], help="cells per turn")
    parser.add_argument(
        "--paths", type=csv_choice(("headless", "server")), default=["headless", "server"]
    )
    parser.add_argument(
        "--providers", type=csv_choice(("openai", "anthropic")), default=["openai", "anthropic"]
    )
    parser.add_argument("--stream", choices=("both", "on", "off"), default="both")
    parser.add_argument(
        "--context-turns",
        type=int,
        default=100,
        help="earlier one-cell turns before a turn of the largest --cells (0: skip)",
    )
    parser.add_argument("--startup-runs", type=int, default=3, help="headless start-up runs")
    parser.add_argument("--bare-runs", type=int, default=50, help="bare round trips per turn")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument(
        "--py-spy",
        type=Path,
        default=None,
        metavar="DIR",
        help="profile the CLI runs and the servers with py-spy, collapsed stacks into DIR",
    )
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI (not timed)")
    options = parser.parse_args(argv)
    if options.smoke:
        options.cells, options.context_turns = [3], 2
        options.startup_runs, options.bare_runs = 1, 5
    return options


if __name__ == "__main__":
    options = parse_args()
    started = time.perf_counter()
    rows, startups, bare = asyncio.run(main(options))
    report(rows, startups, bare)
    print(f"(took {time.perf_counter() - started:.0f} s)", file=sys.stderr)
    if options.json is not None:
        figures = {
            "rows": [{**asdict(row), "added": row.added, "ratio": row.ratio} for row in rows],
            "startup": [{**asdict(s), "ratio": s.run / s.bare} for s in startups],
            "bare": bare,
        }
        options.json.write_text(json.dumps(figures, indent=2))
