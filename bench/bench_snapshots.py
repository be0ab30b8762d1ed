"""Kernel snapshot and restore throughput: standard pickle first (dill as fallback) vs dill alone.

Both variants run in the same process, alternating, on the same namespaces, through the kernel
package's own `save` / `restore` (files written, manifest and all) into a temp directory:

- `small`: many small objects (variables holding lists of small dicts, tuples and strings);
- `arrays`: a few large numpy arrays.
- `mixed`: a small-object namespace plus a function and a class instance defined in "cells"
  (those go to dill in both variants).

`dill-only` replaces the pickler choice with `dill.dumps(recurse=True)` for every variable, which
is what a snapshot that always uses dill does. Prints the median of each variant and the ratio
dill-only / ours (higher: ours faster). Run: `python bench/bench_snapshots.py [--runs 5]`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "kernel_ext")]

import dill  # noqa: E402
import numpy as np  # noqa: E402
from prime_agent_kernel import snapshot  # noqa: E402

from prime_agent_lab.core.snapshots import commit_snapshot  # noqa: E402
from prime_agent_lab.core.trust import Signer, sha256  # noqa: E402

SIGNER = Signer(b"a benchmark's signing secret, not the user's")


class Shell:
    """What `save` / `restore` read of an IPython shell."""

    def __init__(self, user_ns: dict[str, Any]) -> None:
        self.user_ns = user_ns
        self.user_ns_hidden: dict[str, Any] = {}
        self.execution_count = 1


def small_namespace(variables: int, items: int) -> dict[str, Any]:
    return {
        f"v{i}": [{"id": j, "name": f"item-{j}", "pair": (j, j * 0.5)} for j in range(items)]
        for i in range(variables)
    }


def array_namespace(arrays: int, megabytes: int) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    return {f"a{i}": rng.random(megabytes * 2**20 // 8) for i in range(arrays)}


def mixed_namespace(variables: int, items: int) -> dict[str, Any]:
    main = types.ModuleType("__main__")
    exec(  # a function and a class "defined in a cell"
        "def scale(x, k=3):\n    return x * k\nclass Point:\n    def __init__(self, x):\n"
        "        self.x = x\npoint = Point(2)\n",
        main.__dict__,
    )
    return {
        **small_namespace(variables, items),
        **{k: main.__dict__[k] for k in ("scale", "Point", "point")},
    }


def dill_only(value: Any) -> tuple[bytes, str]:
    return dill.dumps(value, protocol=5, recurse=True), "dill"


def measure(
    namespace: dict[str, Any], dumps: Callable[[Any], tuple[bytes, str]]
) -> tuple[float, float, int]:
    """(save seconds, restore seconds, bytes) of one snapshot and restore."""
    original = snapshot.dumps
    snapshot.dumps = dumps
    try:
        with tempfile.TemporaryDirectory() as directory:
            shell = Shell(dict(namespace))
            started = time.perf_counter()
            snapshot.save(directory, 2**30, 2**32, shell=shell, force=True)
            manifest = commit_snapshot(Path(directory), SIGNER)  # the host checks and signs
            saved = time.perf_counter() - started
            fresh = Shell({})
            started = time.perf_counter()
            digest = sha256((Path(directory) / "manifest.json").read_bytes())
            report = snapshot.restore(directory, shell=fresh, expect=digest)
            restored = time.perf_counter() - started
            assert not report["failed"] and set(fresh.user_ns) == set(namespace), report
            return saved, restored, manifest["total_bytes"]
    finally:
        snapshot.dumps = original


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="small sizes, one run")
    args = parser.parse_args()
    runs = 1 if args.smoke else args.runs
    scale = 10 if args.smoke else 1
    workloads = {
        "small": small_namespace(200 // scale, 500),
        "arrays": array_namespace(4, 10 // scale or 1),
        "mixed": mixed_namespace(200 // scale, 500),
    }
    print(f"runs={runs}  python {sys.version.split()[0]}  dill {dill.__version__}")
    print("workload  MB     save ours  save dill  ratio   restore ours  restore dill  ratio")
    for name, namespace in workloads.items():
        ours: list[tuple[float, float, int]] = []
        dills: list[tuple[float, float, int]] = []
        for _ in range(runs):
            ours.append(measure(namespace, snapshot.dumps))
            dills.append(measure(namespace, dill_only))
        save_ours = statistics.median(r[0] for r in ours) * 1000
        save_dill = statistics.median(r[0] for r in dills) * 1000
        restore_ours = statistics.median(r[1] for r in ours) * 1000
        restore_dill = statistics.median(r[1] for r in dills) * 1000
        megabytes = ours[0][2] / 2**20
        print(
            f"{name:<8}  {megabytes:5.1f}  {save_ours:7.1f} ms  {save_dill:7.1f} ms  "
            f"{save_dill / save_ours:5.2f}   {restore_ours:8.1f} ms  {restore_dill:9.1f} ms  "
            f"{restore_dill / restore_ours:5.2f}"
        )


if __name__ == "__main__":
    main()
