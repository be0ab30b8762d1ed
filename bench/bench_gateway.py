"""What a user waits for with the agent's kernels on a Jupyter Kernel Gateway, against local
kernels in the same run (issue 20, docs/gateway.md part 3 step 9).

The gateway is a real `jupyter kernelgateway` started as another Unix user on loopback, as the
gateway tests start it (`tests/gateway_fixtures.py`: `.ci/gateway-setup`, then the gateway as
`PRIME_AGENT_GW_USER`, default `gwtest`, from `PRIME_AGENT_GW_VENV`); needs root. Both sides run
through `HeadlessRun` in this process (the CLI's runtime, the scripted provider answering at
once, the real bridge over loopback HTTP); the only difference is `gateway_url`. The two are
interleaved, the order swapped every round, so the machine's noise hits both:

(a) per-cell cost: an agent turn whose one cell is `x = 1` (model call, cell, model call,
    final text), timed from `run_turn` to its end; inside it, the cell from its `cell_started`
    to its `cell_finished` event (it waits for the snapshot each turn takes at its start, which
    crosses the bridge in chunks on the gateway); and after each turn the same cell through the
    kernel's executor alone (`bare cell`: the kernel's round trip, local ZMQ or the gateway's
    websocket). Each round opens a fresh run per side, times
    its first turn (which also waits for the kernel to boot and be set up), then alternates
    `--turns` warm turns between the two sides;
(b) spawn to a child's first cell: a root cell does `await rlm("...", name=...)`, timed from the
    call in the root's kernel to the host's `cell_finished` event of the child's first cell
    (the kernels' `time.perf_counter()` is CLOCK_MONOTONIC, one clock for the whole machine, so
    this holds for a gateway on this host only). With the pool of 2 full before each spawn,
    and with the pool disabled (the child's kernel started for it).

Reported per measurement: the median over all samples of each side, the spread (the 10th to
90th percentile of the samples) and the ratio gateway/local of the medians, with the spread of
the per-round ratios. Run: `python bench/bench_gateway.py [--rounds 5] [--turns 10]
[--spawns 3]`; `--smoke` runs tiny sizes.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "kernel_ext")]

from bench_subagents import (  # noqa: E402
    CHILD_ONE_CELL,
    SPAWN_ONE,
    Recorder,
    children_quiet,
    cpu_name,
    play,
    pool_of,
    printed,
    until,
)
from scripted_run import scripted_run  # noqa: E402

from prime_agent_lab.core.events import Event  # noqa: E402
from prime_agent_lab.core.settings import Settings  # noqa: E402
from prime_agent_lab.headless import HeadlessRun  # noqa: E402
from tests.gateway_fixtures import (  # noqa: E402
    GATEWAY_USER,
    KernelGateway,
    cannot_run_reason,
    run_setup,
    started_kernel_gateway,
)

SIDES = ("gateway", "local")
now = time.perf_counter


@dataclasses.dataclass(frozen=True)
class Sizes:
    rounds: int = 5
    turns: int = 10  # warm one-cell turns per side and round
    spawns: int = 3  # spawns per side, pool setting and round


SMOKE = Sizes(rounds=2, turns=2, spawns=1)


@dataclasses.dataclass
class Samples:
    """Seconds, per side, each sample tagged with its round."""

    values: dict[str, list[tuple[int, float]]] = dataclasses.field(
        default_factory=lambda: {side: [] for side in SIDES}
    )

    def add(self, side: str, round_no: int, seconds: float) -> None:
        self.values[side].append((round_no, seconds))

    def of(self, side: str, round_no: int | None = None) -> list[float]:
        return [v for r, v in self.values[side] if round_no is None or r == round_no]


def make_run(
    workdir: Path, script: dict[str, Any], gateway: KernelGateway | None, pool_size: int
) -> HeadlessRun:
    workdir.mkdir(parents=True)
    settings = Settings(cell_timeout=120, max_iterations=10_000)
    on_gateway = {}
    if gateway is not None:
        on_gateway = {"gateway_url": gateway.url, "gateway_auth_token": gateway.token}
    return scripted_run(workdir, script, settings, kernel_pool_size=pool_size, **on_gateway)


# ------------------------------------------------------------------ (a) per-cell cost

ONE_CELL_TURN = [{"code": "x = 1"}, {"text": "done"}]


class CellTimes:
    """Host times of the root's `cell_started` / `cell_finished` events."""

    def __init__(self) -> None:
        self.started = 0.0
        self.cells: list[float] = []

    def __call__(self, event: Event) -> None:
        if event["type"] == "cell_started":
            self.started = now()
        elif event["type"] == "cell_finished":
            self.cells.append(now() - self.started)


async def one_turn(run: HeadlessRun) -> float:
    start = now()
    outcome = await run.agent.run_turn("go")
    took = now() - start
    if outcome.stop_reason != "end_turn":
        raise RuntimeError(f"a measured turn ended {outcome.stop_reason}: {outcome}")
    return took


async def per_cell_round(
    base: Path,
    round_no: int,
    order: tuple[str, str],
    gateway: KernelGateway,
    sizes: Sizes,
    out: dict[str, Samples],
) -> None:
    """One round of (a): a fresh run per side, their first turns, then alternating warm turns."""
    script = {"turns": ONE_CELL_TURN * (sizes.turns + 1)}
    runs: dict[str, HeadlessRun] = {}
    cells: dict[str, CellTimes] = {}
    try:
        for side in order:
            run = make_run(base / f"cell-{round_no}-{side}", script, _gw(side, gateway), 2)
            runs[side], cells[side] = run, CellTimes()
            start = now()
            await run.start(cells[side])
            check_kernel_source(side, run, gateway)
            await one_turn(run)
            out["first turn"].add(side, round_no, now() - start)
        for _ in range(sizes.turns):
            for side in order:
                out["warm turn"].add(side, round_no, await one_turn(runs[side]))
                out["bare cell"].add(side, round_no, await bare_cell(runs[side]))
        for side in order:
            for seconds in cells[side].cells[1:]:  # the first cell waited for the boot
                out["cell"].add(side, round_no, seconds)
    finally:
        for run in runs.values():
            await run.close()


async def bare_cell(run: HeadlessRun) -> float:
    """The same cell on the root's kernel through its executor alone, between turns: no model
    call, no notebook, no session log, no snapshot."""
    start = now()
    result = await run.fleet.executor(run.kernel_id).execute("x = 1", lambda event: None, 60)
    took = now() - start
    if result.status != "ok":
        raise RuntimeError(f"the bare cell did not run: {result}")
    return took


def _gw(side: str, gateway: KernelGateway) -> KernelGateway | None:
    return gateway if side == "gateway" else None


def check_kernel_source(side: str, run: HeadlessRun, gateway: KernelGateway) -> None:
    """The gateway side's root kernel is one the gateway lists; the local side's is not."""
    if (run.kernel_id in gateway.kernel_ids()) != (side == "gateway"):
        raise RuntimeError(f"the {side} run's kernel {run.kernel_id} is not where it should be")


# ------------------------------------------------------------------ (b) spawn to first cell


async def spawn_run(
    workdir: Path, gateway: KernelGateway | None, spawns: int, pool_size: int
) -> list[float]:
    """`spawns` one-at-a-time spawns from the root's cells: each from the `rlm()` call in the
    root's kernel to the child's first `cell_finished` on the host."""
    script = {"turns": [{"code": SPAWN_ONE}] * spawns + [{"text": "done"}], "follow_up": "ok"}
    script["child"] = CHILD_ONE_CELL
    run = make_run(workdir, script, gateway, pool_size)
    recorder = Recorder(run)
    pool = pool_of(run)

    async def settle() -> None:  # before each model call: children done, the pool full
        if pool_size:
            pool.fill()
        await until(lambda: children_quiet(run) and pool.stats().ready >= pool.stats().size)

    try:
        await play(run, recorder, settle)
    finally:
        await run.close()
    return [
        recorder.first(child_id, "cell_finished") - t_call
        for child_id, t_call, _ in printed(run.agent.session, "SPAWN ")
    ]


async def spawn_round(
    base: Path,
    round_no: int,
    order: tuple[str, str],
    gateway: KernelGateway,
    sizes: Sizes,
    out: dict[str, Samples],
) -> None:
    for label, pool_size in (("spawn, warm pool", 2), ("spawn, pool disabled", 0)):
        for side in order:
            workdir = base / f"spawn-{round_no}-{pool_size}-{side}"
            for seconds in await spawn_run(workdir, _gw(side, gateway), sizes.spawns, pool_size):
                out[label].add(side, round_no, seconds)


# ------------------------------------------------------------------ report

MEASURES = (
    "first turn",
    "warm turn",
    "cell",
    "bare cell",
    "spawn, warm pool",
    "spawn, pool disabled",
)


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f}"


def row(label: str, samples: Samples, rounds: int) -> str:
    gw, local = samples.of("gateway"), samples.of("local")
    ratio = statistics.median(gw) / statistics.median(local)
    per_round = [
        statistics.median(samples.of("gateway", r)) / statistics.median(samples.of("local", r))
        for r in range(rounds)
    ]

    def side(values: list[float]) -> str:
        spread = f"{ms(quantile(values, 0.1))}-{ms(quantile(values, 0.9))}"
        return f"{ms(statistics.median(values)):>7} {spread:>13}"

    return (
        f"{label:<22}{len(gw):>4} {side(local)} {side(gw)} {ratio:>6.2f} "
        f"{min(per_round):>5.2f}-{max(per_round):.2f}"
    )


def report(sizes: Sizes, out: dict[str, Samples], loads: list[float], kernels: int) -> str:
    lines = [
        f"machine: {os.cpu_count()} cores, {cpu_name()}, Python {platform.python_version()}, "
        f"load average (1 min) {min(loads):.1f} to {max(loads):.1f} during the run",
        f"gateway: jupyter kernelgateway on loopback as the user {GATEWAY_USER}; "
        f"{kernels} kernels started on it",
        f"{sizes.rounds} rounds, gateway and local interleaved; ms, median and 10th-90th "
        "percentile of all samples; ratio gateway/local of the medians, and its range "
        "over the rounds",
        "",
        f"{'measure':<22}{'n':>4} {'local':>7} {'spread':>13} {'gateway':>7} {'spread':>13} "
        f"{'ratio':>6} {'rounds':>9}",
    ]
    lines += [row(label, out[label], sizes.rounds) for label in MEASURES]
    lines += [
        "",
        "first turn: run start to the end of the first one-cell turn (kernel start and set-up, "
        "the cell); warm turn: a later one-cell turn, model calls included; cell: its "
        "cell_started to cell_finished (after the snapshot the turn takes at its start); "
        "bare cell: the same cell through the kernel's executor alone; spawn: rlm() called in "
        "the root's kernel to the child's first cell finished",
    ]
    return "\n".join(lines)


async def measure(
    sizes: Sizes, gateway: KernelGateway, base: Path, sample_load: Callable[[], None]
) -> dict[str, Samples]:
    out = {label: Samples() for label in MEASURES}
    for round_no in range(sizes.rounds):
        order = SIDES if round_no % 2 == 0 else SIDES[::-1]
        await per_cell_round(base, round_no, order, gateway, sizes, out)
        sample_load()
        await spawn_round(base, round_no, order, gateway, sizes, out)
        sample_load()
    return out


def main(sizes: Sizes) -> str:
    reason = cannot_run_reason()
    if reason is not None:
        raise SystemExit(f"bench_gateway: {reason}")
    run_setup()
    loads: list[float] = [os.getloadavg()[0]]
    before = user_pids(GATEWAY_USER)  # a gateway test's gateway, if one runs, is left alone
    try:
        with (
            tempfile.TemporaryDirectory() as tmp,
            started_kernel_gateway(Path(tmp)) as gateway,
        ):
            out = asyncio.run(
                measure(sizes, gateway, Path(tmp), lambda: loads.append(os.getloadavg()[0]))
            )
            kernels = gateway_kernels_started(gateway.log())
    finally:
        end_processes_since(GATEWAY_USER, before)
    return report(sizes, out, loads, kernels)


def user_pids(user: str) -> set[int]:
    found = subprocess.run(["pgrep", "-u", user], capture_output=True, text=True, check=False)
    return {int(pid) for pid in found.stdout.split()}


def end_processes_since(user: str, before: set[int]) -> None:
    """SIGKILL the processes of `user` that were not there before the bench: its gateway and
    the kernels it started (they run in sessions of their own, outside the gateway's group)."""
    for _ in range(20):
        pids = user_pids(user) - before
        if not pids:
            return
        for pid in pids:
            with suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)


def gateway_kernels_started(log: str) -> int:
    return log.count("Kernel started:")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: check that it runs")
    parser.add_argument("--rounds", type=int, default=Sizes.rounds)
    parser.add_argument("--turns", type=int, default=Sizes.turns)
    parser.add_argument("--spawns", type=int, default=Sizes.spawns)
    args = parser.parse_args()
    chosen = SMOKE if args.smoke else Sizes(args.rounds, args.turns, args.spawns)
    print(main(chosen))
