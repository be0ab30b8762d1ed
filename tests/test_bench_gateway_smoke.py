"""The gateway benchmark runs at small size against a real Kernel Gateway as another Unix user
(it must run, not meet a time): every measurement has its samples on both sides, a ratio, and the
gateway started the kernels of its side. Marker `gateway`; it skips, saying why, only where the
gateway tests cannot run at all (not root, no `useradd`/`su`), as they do."""

from __future__ import annotations

import re

import pytest

from .bench_runs import run_bench
from .gateway_fixtures import cannot_run_reason

pytestmark = [pytest.mark.gateway, pytest.mark.timeout(600)]

MEASURES = (
    "first turn",
    "warm turn",
    "cell",
    "bare cell",
    "spawn, warm pool",
    "spawn, pool disabled",
)
# --smoke: 2 rounds; per round and side 1 first turn, 2 warm turns (so 2 cells after the
# first) and 2 bare cells, 1 spawn with the pool and 1 without
SAMPLES = dict(zip(MEASURES, (2, 4, 4, 4, 2, 2), strict=True))
# per round on the gateway: a root (a); a root, the pool of 2 and its refill (b, warm); a root
# and its child (b, pool disabled)
KERNELS_PER_ROUND = 1 + 4 + 2


def test_gateway_benchmark_smoke_run_measures_both_sides() -> None:
    reason = cannot_run_reason()
    if reason is not None:
        pytest.skip(reason)
    out = run_bench("bench_gateway.py", "--smoke", timeout=560)
    rows = {
        label: line[len(label) :].split()
        for line in out.splitlines()
        for label in MEASURES
        if line.startswith(label + " ")
    }
    assert set(rows) == set(MEASURES), out
    for label, fields in rows.items():
        n, local, local_spread, gateway, gateway_spread, ratio, per_round = fields
        assert int(n) == SAMPLES[label], out
        assert int(local) > 0 and int(gateway) > 0, out
        assert re.fullmatch(r"\d+-\d+", local_spread) and re.fullmatch(r"\d+-\d+", gateway_spread)
        low, high = (
            (int(gateway) - 0.5) / (int(local) + 0.5),
            (int(gateway) + 0.5) / (int(local) - 0.5),
        )
        assert low - 0.005 <= float(ratio) <= high + 0.005, out  # of the medians, rounded to ms
        assert re.fullmatch(r"[\d.]+-[\d.]+", per_round), out
    started = re.search(r"as the user (\S+); (\d+) kernels started on it", out)
    assert started is not None, out
    # the gateway side's kernels were the gateway's (the bench checks each root's), and only
    # those: the local side's started none there (the pool may refill once more at the end)
    assert 2 * KERNELS_PER_ROUND <= int(started[2]) <= 2 * KERNELS_PER_ROUND + 2, out
    assert re.search(r"load average \(1 min\) [\d.]+ to [\d.]+", out), out
