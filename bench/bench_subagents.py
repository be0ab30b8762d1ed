"""Sub-agents and messages through the real agent-tree runtime (headless, scripted provider).

Four measurements, each through `HeadlessRun` in this process (the CLI's runtime, real kernels,
the real bridge over loopback HTTP), with the scripted provider answering at once:

(a) admission: the kernel's `await rlm(...)`, timed in the parent's kernel with
    `time.perf_counter()` around the call, one spawn per cell with the machine quiet;
(b) spawn to the child's first executed cell with the warm pool (size 2, full before each
    spawn), against a cold kernel start to the first executed cell measured in the same run,
    alternating (cold: `AsyncKernelManager.start_kernel` plus the agent's `KernelExecutor`
    connecting, loading the kernel package and running the same cell). The parts: admission,
    the pool's `take()`, the hand-out (the kernel moves to the child's folder), the wait from
    the child's cell being written until the kernel runs it, and the cell's run. Also spawns
    with the pool disabled (size 0), as the product's own cold path;
(c) 16 children spawned from one cell, each runs a cell and replies to its parent: time until
    all 16 replies are in the parent's log, and the peak memory of the process tree (this
    process, which is the host, plus every kernel), read from /proc;
(d) messages from a child to its idle parent: latency from `send` in the child's kernel to the
    message's entry in the parent's log (its `turn_started` / `agent_message` event), paced under
    the default rate limit (3 per second per pair); and messages per second from one sender to
    one target sent back to back, with the rate and pending limits raised through
    the runtime's settings (the defaults would cap one pair at 3 per second and 20 waiting).

Times across processes use `time.perf_counter()`, which is CLOCK_MONOTONIC on Linux and so the
same clock in the kernels and in this process. Run: `python bench/bench_subagents.py [--smoke]`.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "kernel_ext")]

from jupyter_client.manager import AsyncKernelManager  # noqa: E402
from scripted_run import scripted_run  # noqa: E402

from prime_agent_lab.adapters.kernel_executor import KernelExecutor, bridge_setup_code  # noqa: E402
from prime_agent_lab.adapters.local_kernels import kernel_spec_manager  # noqa: E402
from prime_agent_lab.core.events import Event  # noqa: E402
from prime_agent_lab.core.messages import ModelRequest  # noqa: E402
from prime_agent_lab.core.ports import ProviderEvent  # noqa: E402
from prime_agent_lab.core.redaction import kernel_environment  # noqa: E402
from prime_agent_lab.core.settings import Settings  # noqa: E402
from prime_agent_lab.headless import HeadlessRun  # noqa: E402

FIRST_CELL = "x = 6 * 7\nprint(x)"
now = time.perf_counter


@dataclasses.dataclass(frozen=True)
class Sizes:
    spawns: int = 15  # warm spawns for (a) and (b), each alternated with a cold start
    cold_spawns: int = 5  # spawns with the pool disabled
    fanout: int = 16
    messages: int = 20  # paced messages for the latency
    burst: int = 200  # back-to-back messages for the throughput


SMOKE = Sizes(spawns=2, cold_spawns=1, fanout=3, messages=3, burst=10)


# ------------------------------------------------------------------ measuring helpers


class Recorder:
    """Host-side times of events: the root's, and each child's from the moment it is spawned."""

    def __init__(self, run: HeadlessRun) -> None:
        self.run = run
        self.events: list[tuple[float, Event]] = []

    def __call__(self, event: Event) -> None:
        self.events.append((now(), event))
        if event["type"] == "child_spawned":
            child = self.run.runtime.agents[event["rlm_child_id"]]
            child.events.add_listener(lambda e: self.events.append((now(), e)))

    def first(self, session_id: str, event_type: str) -> float:
        return next(
            t for t, e in self.events if e["session_id"] == session_id and e["type"] == event_type
        )

    def arrivals(self, session_id: str) -> dict[str, float]:
        """message id -> when the message entered `session_id`'s log."""
        return {
            e["message_id"]: t
            for t, e in self.events
            if e["session_id"] == session_id
            and e["type"] in ("turn_started", "agent_message")
            and str(e.get("message_id", "")).startswith("msg_")
        }


class GatedProvider:
    """The root's provider, made to wait for `gate()` before each model call: the benchmark
    settles the machine (and runs its baseline) between the parent's cells, outside the
    measured windows."""

    def __init__(self, inner: Any, gate: Callable[[], Awaitable[None]]) -> None:
        self.inner, self.gate = inner, gate
        self.name, self.model = inner.name, inner.model

    async def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        await self.gate()
        async for event in self.inner.stream(request):
            yield event

    async def aclose(self) -> None:
        await self.inner.aclose()


@contextmanager
def timed_calls(marks: list[tuple[str, float, float]], run: HeadlessRun) -> Any:
    """Record the start and end of each pool `take()` and kernel hand-out of the run."""
    pool, backend = run.fleet.pool, run.backend

    def wrap(name: str, call: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def timed(*args: Any, **kwargs: Any) -> Any:
            start = now()
            result = await call(*args, **kwargs)
            marks.append((name, start, now()))
            return result

        return timed

    original_take, original_hand_out = pool.take, backend.hand_out
    pool.take = wrap("take", original_take)  # type: ignore[method-assign]
    backend.hand_out = wrap("hand-out", original_hand_out)  # type: ignore[method-assign]
    try:
        yield
    finally:
        pool.take, backend.hand_out = original_take, original_hand_out  # type: ignore[method-assign]


class TreeMemory:
    """Peak RSS of this process and all its descendants, sampled from /proc in a thread.

    Cheap on purpose (it shares the cores and this process's GIL with what it measures): `statm`
    of each process of the tree every 0.2 s. PSS (`smaps_rollup`) costs far more; it is read once
    by the caller when the tree is complete."""

    def __init__(self, interval: float = 0.2) -> None:
        self.interval = interval
        self.peak_rss = 0  # KiB
        self.peak_processes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample_until_stopped, daemon=True)

    def __enter__(self) -> TreeMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample_until_stopped(self) -> None:
        while not self._stop.is_set():
            pids = tree_pids(os.getpid())
            rss = tree_rss_kib(pids)
            if rss > self.peak_rss:
                self.peak_rss, self.peak_processes = rss, len(pids)
            self._stop.wait(self.interval)


def tree_rss_kib(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        with suppress(OSError, ValueError, IndexError):
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    return total * (os.sysconf("SC_PAGE_SIZE") // 1024)


def tree_pids(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def read_kib(pid: int, file: str, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/{file}").read_text().splitlines():
            if line.startswith(key):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown cpu"


# ------------------------------------------------------------------ runs


def make_run(workdir: Path, script: dict[str, Any], pool_size: int) -> HeadlessRun:
    settings = Settings(cell_timeout=120, max_iterations=10_000)
    return scripted_run(workdir, script, settings, kernel_pool_size=pool_size)


async def play(
    run: HeadlessRun, recorder: Recorder, gate: Callable[[], Awaitable[None]] | None = None
) -> None:
    await run.start(recorder)
    if gate is not None:
        run.agent.provider = GatedProvider(run.agent.provider, gate)  # type: ignore[assignment]
    outcome = await run.settle(await run.agent.run_turn("go"))
    if outcome.stop_reason != "end_turn":
        raise RuntimeError(f"the root's turn ended {outcome.stop_reason}: {outcome}")


def printed(session: Any, marker: str) -> list[Any]:
    """The JSON each cell of `session` printed after `marker`."""
    found = []
    for entry in session.entries:
        if entry["type"] == "tool_result":
            for line in entry["observation"].splitlines():
                if line.startswith(marker):
                    found.append(json.loads(line[len(marker) :]))
            if entry["status"] != "ok":
                raise RuntimeError(f"a benchmark cell failed: {entry['observation']}")
    return found


def pool_of(run: HeadlessRun) -> Any:
    return run.fleet.pool  # the CLI's pool: the benchmark waits for it to be full


async def until(condition: Callable[[], bool], timeout: float = 120) -> None:
    deadline = now() + timeout
    while not condition():
        if now() > deadline:
            raise TimeoutError("the benchmark waited too long for the machine to settle")
        await asyncio.sleep(0.02)


def children_quiet(run: HeadlessRun) -> bool:
    runtime = run.runtime
    return all(
        runtime.child_status(m.session_id) not in ("running",)
        for m in runtime.family.children(run.agent.session_id)
    )


# (a) + (b): one spawn per parent cell; the gate settles the machine and runs a cold start.

SPAWN_ONE = """
import time, json
for old in await rlm.list_subagents():
    await rlm.delete_subagent(old)
spawned = globals().get("spawned", 0) + 1
t_call = time.perf_counter()
handle = await rlm("compute the answer", name=f"w{spawned}")
t_back = time.perf_counter()
print("SPAWN " + json.dumps([handle.rlm_child_id, t_call, t_back]))
"""
CHILD_ONE_CELL = {"turns": [{"code": FIRST_CELL}, {"text": "done"}]}


@dataclasses.dataclass
class Spawn:
    admission: float
    take: float
    hand_out: float
    written: float  # spawn call to the child's cell written (admission + the child's model call)
    kernel_wait: float  # cell written to its kernel handed out (0 when the kernel was first)
    cell: float  # from both to the cell's result recorded (the executor's part)
    total: float  # spawn call to the child's first cell finished


async def cold_start(workdir: Path) -> dict[str, float]:
    """A cold kernel start to the first executed cell: start, connect, load the package, run."""
    manager = AsyncKernelManager(kernel_name="python3", kernel_spec_manager=kernel_spec_manager())
    start = now()
    await manager.start_kernel(cwd=str(workdir), env=kernel_environment())
    started = now()
    bridge = "http://127.0.0.1:9/prime-agent/bridge"  # never called by this cell
    executor = KernelExecutor(manager, "cold", lambda: bridge_setup_code(bridge, "cold"))
    try:
        result = await executor.execute(FIRST_CELL, lambda event: None, 60)
        done = now()
    finally:
        await executor.close()
        await manager.shutdown_kernel(now=True)
    if result.status != "ok":
        raise RuntimeError(f"the cold cell did not run: {result}")
    return {"start": started - start, "first cell": done - started, "total": done - start}


async def spawn_series(
    workdir: Path, spawns: int, pool_size: int, colds: list[dict[str, float]] | None
) -> list[Spawn]:
    """`spawns` one-at-a-time spawns; with `colds`, a cold start before each (alternating)."""
    script = {"turns": [{"code": SPAWN_ONE}] * spawns + [{"text": "done"}], "follow_up": "ok"}
    script["child"] = CHILD_ONE_CELL
    run = make_run(workdir, script, pool_size)
    recorder = Recorder(run)
    marks: list[tuple[str, float, float]] = []
    pool = pool_of(run)

    async def settle_then_baseline() -> None:
        pool.fill()  # the runtime fills its pool at the first spawn; the benchmark, before it
        await until(lambda: children_quiet(run) and pool.stats().ready >= pool.stats().size)
        if colds is not None and len(colds) < spawns:
            colds.append(await cold_start(workdir))

    try:
        with timed_calls(marks, run):
            await play(run, recorder, settle_then_baseline)
    finally:
        await run.close()
    return [
        spawn_parts(recorder, marks, child_id, t_call, t_back)
        for child_id, t_call, t_back in printed(run.agent.session, "SPAWN ")
    ]


def spawn_parts(
    recorder: Recorder,
    marks: list[tuple[str, float, float]],
    child_id: str,
    t_call: float,
    t_back: float,
) -> Spawn:
    written = recorder.first(child_id, "cell_started")
    finished = recorder.first(child_id, "cell_finished")

    def during(name: str) -> tuple[float, float]:
        # the take / hand-out of this spawn: the first that began after the call
        return next((begin, end) for n, begin, end in marks if n == name and t_call <= begin)

    take, hand_out = during("take"), during("hand-out")
    kernel_here = max(written, hand_out[1])  # the cell is written and its kernel handed out
    return Spawn(
        admission=t_back - t_call,
        take=take[1] - take[0],
        hand_out=hand_out[1] - hand_out[0],
        written=written - t_call,
        kernel_wait=kernel_here - written,
        cell=finished - kernel_here,
        total=finished - t_call,
    )


# (c) fan-out

FANOUT = """
import time, json
t_start = time.perf_counter()
admitted = []
for i in range({n}):
    t = time.perf_counter()
    h = await rlm(f"part {{i}}", name=f"part-{{i}}")
    admitted.append([h.rlm_child_id, t, time.perf_counter()])
print("FANOUT " + json.dumps([t_start, admitted]))
"""
CHILD_WORK_AND_REPLY = {
    "turns": [
        {"code": "total = sum(range(200_000))\nprint(total)"},
        {"code": 'await agent_message.send(f"{task}: {total}", receiver_role="parent")'},
        {"text": "replied"},
    ]
}


@dataclasses.dataclass
class Fanout:
    children: int
    admitted_all: float  # cell start to the last handle back
    admission_median: float
    first_cells: list[float]  # per child: its spawn call to its first cell finished
    replies: int
    failures: list[str]  # why children failed (a kernel that could not start), each once
    all_replied: float  # cell start to the last reply in the parent's log
    base_rss_kib: int  # before the spawning cell: host, root kernel, full pool
    peak_rss_kib: int
    peak_processes: int
    quiet_rss_kib: int  # all replies in: every child idle, and the refilled pool
    quiet_pss_kib: int  # the same, shared pages counted once
    pool: dict[str, Any]


async def fanout(workdir: Path, n: int) -> Fanout:
    script = {
        "turns": [{"code": FANOUT.format(n=n)}, {"text": "spawned"}],
        "follow_up": "ok",
        "child": CHILD_WORK_AND_REPLY,
    }
    run = make_run(workdir, script, pool_size=2)
    recorder = Recorder(run)
    pool = pool_of(run)
    base: list[int] = []

    async def settle_once() -> None:
        if not base:
            pool.fill()  # as after an earlier spawn: the runtime fills its pool at the first
            await until(lambda: pool.stats().ready >= pool.stats().size)
            base.append(tree_rss_kib(tree_pids(os.getpid())))

    try:
        with TreeMemory() as memory:
            await play(run, recorder, settle_once)
        pids = tree_pids(os.getpid())
        quiet_rss = tree_rss_kib(pids)
        quiet_pss = sum(read_kib(pid, "smaps_rollup", "Pss:") for pid in pids)
        stats = dataclasses.asdict(pool.stats())
        failed = {
            c["rlm_child_id"]: first_observation(run, c["rlm_child_id"])
            for c in run.runtime.list_children(run.agent.session_id)
            if c["status"] == "error"
        }
    finally:
        await run.close()
    [[t_start, admitted]] = printed(run.agent.session, "FANOUT ")
    arrivals = recorder.arrivals(run.agent.session_id)
    if len(arrivals) + len(failed) != n:
        raise RuntimeError(f"{len(arrivals)} of {n} replies reached the parent")
    return Fanout(
        children=n,
        admitted_all=admitted[-1][2] - t_start,
        admission_median=statistics.median(back - call for _, call, back in admitted),
        first_cells=[
            recorder.first(c, "cell_finished") - call for c, call, _ in admitted if c not in failed
        ],
        replies=len(arrivals),
        failures=sorted(set(failed.values())),
        all_replied=max(arrivals.values()) - t_start,
        base_rss_kib=base[0],
        peak_rss_kib=memory.peak_rss,
        peak_processes=memory.peak_processes,
        quiet_rss_kib=quiet_rss,
        quiet_pss_kib=quiet_pss,
        pool=stats,
    )


def first_observation(run: HeadlessRun, session_id: str) -> str:
    entries = run.repository.read(session_id).entries
    result = next((e for e in entries if e["type"] == "tool_result"), None)
    return result["observation"].splitlines()[0][:160] if result else "no cell ran"


# (d) messages: a child sends to its idle parent

SEND_PACED = """
import time, json, asyncio
sent = []
for i in range({n}):
    t = time.perf_counter()
    r = await agent_message.send(f"ping {{i}}", receiver_role="parent")
    sent.append([r.message_id, t, time.perf_counter(), r.delivery_status])
    await asyncio.sleep({pace})
print("SENT " + json.dumps(sent))
"""
SEND_BURST = """
import time, json
sent = []
for i in range({n}):
    t = time.perf_counter()
    r = await agent_message.send(f"ping {{i}}", receiver_role="parent")
    sent.append([r.message_id, t, time.perf_counter(), r.delivery_status])
print("SENT " + json.dumps(sent))
"""
PACE = 0.4  # under 3 per second: every send finds the parent idle again and the bucket refilled


@dataclasses.dataclass
class Messages:
    sent: int
    latency: list[float]  # send called to the entry in the target's log
    send_call: list[float]  # send called to the receipt back in the sender's kernel
    delivered_at_once: int  # receipts "delivered" (the target was idle)
    span: float  # first send called to the last entry in the target's log


async def messages(workdir: Path, cell: str, n: int, unlimited: bool) -> Messages:
    script = {
        "turns": [{"code": 'await rlm("send messages", name="sender")'}, {"text": "spawned"}],
        "follow_up": "ok",
        "child": {"turns": [{"code": cell}, {"text": "sent"}]},
    }
    run = make_run(workdir, script, pool_size=1)
    if unlimited:  # one pair, as fast as it goes: lift the per-pair rate and pending limits
        run.runtime.settings = dataclasses.replace(
            run.runtime.settings,
            message_rate_per_second=1e9,
            message_rate_burst=10**9,
            message_max_pending=10**9,
        )
    recorder = Recorder(run)
    try:
        await play(run, recorder)
    finally:
        await run.close()
    sender = run.runtime.family.children(run.agent.session_id)[0].session_id
    [sent] = printed(run.repository.read(sender), "SENT ")
    arrivals = recorder.arrivals(run.agent.session_id)
    if len(arrivals) != n or any(m not in arrivals for m, *_ in sent):
        raise RuntimeError(f"{len(arrivals)} of {n} messages reached the parent's log")
    return Messages(
        sent=n,
        latency=[arrivals[m] - t for m, t, _, _ in sent],
        send_call=[back - t for _, t, back, _ in sent],
        delivered_at_once=sum(status == "delivered" for *_, status in sent),
        span=max(arrivals.values()) - sent[0][1],
    )


# ------------------------------------------------------------------ report


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def median_ms(values: list[float]) -> str:
    return ms(statistics.median(values))


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def spawn_row(label: str, spawns: list[Spawn]) -> str:
    def med(field: str) -> str:
        return median_ms([getattr(s, field) for s in spawns])

    parts = " ".join(
        f"{med(f):>8}"
        for f in ("admission", "take", "hand_out", "written", "kernel_wait", "cell", "total")
    )
    return f"{label:<22} {len(spawns):>3}{parts}"


def report(
    sizes: Sizes,
    warm: list[Spawn],
    colds: list[dict[str, float]],
    cold_spawns: list[Spawn],
    fan: Fanout,
    paced: Messages,
    burst: Messages,
) -> str:
    admissions = [s.admission for s in warm]
    cold_total = statistics.median(c["total"] for c in colds)
    warm_total = statistics.median(s.total for s in warm)
    lines = [
        f"machine: {os.cpu_count()} cores, {cpu_name()}, Python {platform.python_version()}, "
        f"load average at the end {os.getloadavg()[0]:.2f}",
        "",
        f"(a) admission of rlm() in the parent's kernel, one spawn per cell, n={len(warm)}",
        f"    median {median_ms(admissions)} ms, p95 {ms(p95(admissions))} ms, "
        f"max {ms(max(admissions))} ms (goal: median < 50 ms); "
        f"in the {fan.children}-child fan-out: median {ms(fan.admission_median)} ms",
        "",
        "(b) spawn to the child's first executed cell (medians, ms)",
        "path                     n admission     take hand-out  written  k.wait     cell   total",
        spawn_row("spawn, warm pool", warm),
        spawn_row("spawn, pool disabled", cold_spawns),
        f"{'cold start (baseline)':<22} {len(colds):>3}      start "
        f"{median_ms([c['start'] for c in colds])}, first cell "
        f"{median_ms([c['first cell'] for c in colds])}, total {ms(cold_total)}",
        f"    warm spawn / cold start: {warm_total / cold_total:.2f} (goal <= 0.2)",
        "",
        f"(c) fan-out of {fan.children} children from one cell, each runs a cell and replies",
        f"    all admitted {ms(fan.admitted_all)} ms after the cell started; "
        f"first cells done {ms(min(fan.first_cells))} to {ms(max(fan.first_cells))} ms after "
        f"their spawn (median {median_ms(fan.first_cells)})",
        f"    all {fan.replies} replies in the parent's log: {fan.all_replied:.2f} s",
        *(
            [f"    {fan.children - fan.replies} failed: {'; '.join(fan.failures)}"]
            if fan.failures
            else []
        ),
        f"    memory of the process tree: {fan.base_rss_kib / 1024:.0f} MiB RSS before the cell "
        f"(host, root kernel, pool of 2); peak {fan.peak_rss_kib / 1024:.0f} MiB RSS "
        f"({fan.peak_processes} processes); when all had replied "
        f"{fan.quiet_rss_kib / 1024:.0f} MiB RSS, {fan.quiet_pss_kib / 1024:.0f} MiB PSS",
        f"    pool: warm hits {fan.pool['warm_hits']}, waits {fan.pool['waits']}, "
        f"cold starts {fan.pool['cold_starts']}",
        "",
        "(d) messages from a child to its idle parent (ms)",
        "run                              n  latency med  latency p95  send call med  "
        "delivered  msg/s",
    ]
    for label, m in (
        (f"paced {PACE} s, default limits", paced),
        ("back to back, limits raised", burst),
    ):
        lines.append(
            f"{label:<31} {m.sent:>3} {median_ms(m.latency):>12} {ms(p95(m.latency)):>12} "
            f"{median_ms(m.send_call):>14} {m.delivered_at_once:>10} {m.sent / m.span:>6.0f}"
        )
    return "\n".join(lines)


async def main(sizes: Sizes) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        for name in ("warm", "cold", "fanout", "paced", "burst"):
            (base / name).mkdir()
        colds: list[dict[str, float]] = []
        warm = await spawn_series(base / "warm", sizes.spawns, 2, colds)
        cold_spawns = await spawn_series(base / "cold", sizes.cold_spawns, 0, None)
        fan = await fanout(base / "fanout", sizes.fanout)
        pace = SEND_PACED.format(n=sizes.messages, pace=PACE)
        paced = await messages(base / "paced", pace, sizes.messages, unlimited=False)
        burst_cell = SEND_BURST.format(n=sizes.burst)
        burst = await messages(base / "burst", burst_cell, sizes.burst, unlimited=True)
    return report(sizes, warm, colds, cold_spawns, fan, paced, burst)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: check that it runs")
    parser.add_argument("--spawns", type=int, default=Sizes.spawns)
    parser.add_argument("--fanout", type=int, default=Sizes.fanout)
    args = parser.parse_args()
    chosen = SMOKE if args.smoke else Sizes(spawns=args.spawns, fanout=args.fanout)
    print(asyncio.run(main(chosen)))
