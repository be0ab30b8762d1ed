"""Kernel snapshots: saved per variable, restored into a fresh kernel, what is told about them."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.manager import AsyncKernelManager

from prime_agent_lab.adapters.kernel_executor import KernelExecutor
from prime_agent_lab.core.pending_kernel import PendingKernel
from prime_agent_lab.core.snapshots import (
    NOT_RESTORED,
    RESTORED,
    SnapshotFailed,
    SnapshotSettings,
    describe_restore,
    read_manifest,
    restore_snapshot,
    state_directory,
    take_snapshot,
)
from prime_agent_lab.core.trust import Signer
from prime_agent_lab.providers import make_provider

from .bench_runs import run_bench
from .conftest import local_kernel, next_event, run_turn, use_script, wait_for
from .test_messaging import run_in_kernel
from .test_session_resume import restarted_host

SIGNER = Signer(b"the secret of the user running these tests")

SETUP = """
import numpy as np
import pandas as pd
import json as js
from dataclasses import dataclass

count = 42
text = "héllo"
frame = pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]})
array = np.arange(12, dtype=np.float64).reshape(3, 4)

def make_adder(n):
    def add(x):
        return x + n
    return add

adder = make_adder(10)
square = lambda x: x * x

@dataclass
class Point:
    x: int
    y: int

    def norm1(self):
        return abs(self.x) + abs(self.y)

point = Point(3, -4)
gen = (i for i in range(3))
handle = open("snapshot-probe.txt", "w")
_private = 1
"""

CHECK = """
import numpy as _np, pandas as _pd
assert count == 42
assert text == "héllo"
_pd.testing.assert_frame_equal(frame, _pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]}))
assert _np.array_equal(array, _np.arange(12, dtype=_np.float64).reshape(3, 4))
assert adder(5) == 15
assert square(7) == 49
assert point == Point(3, -4) and point.norm1() == 7 and isinstance(point, Point)
assert js.dumps([1]) == "[1]" and pd is _pd and np is _np
assert "gen" not in dir() and "handle" not in dir() and "_private" not in dir()
print("all equal")
"""


@pytest.fixture
def second_kernel(jp_asyncio_loop: Any) -> Iterator[AsyncKernelManager]:
    yield from local_kernel(jp_asyncio_loop)


@pytest.fixture
def executors(
    kernel: AsyncKernelManager, second_kernel: AsyncKernelManager, jp_asyncio_loop: Any
) -> Iterator[tuple[KernelExecutor, KernelExecutor]]:
    first, second = KernelExecutor(kernel, "first"), KernelExecutor(second_kernel, "second")
    yield first, second
    jp_asyncio_loop.run_until_complete(first.close())
    jp_asyncio_loop.run_until_complete(second.close())


async def run_cell(executor: KernelExecutor, code: str) -> str:
    outputs: list[dict[str, Any]] = []
    result = await executor.execute(code, lambda e: outputs.append(e.output or {}), 60)
    text = "".join(str(o.get("text", "")) for o in outputs)
    assert result.status == "ok", (result.status, text, outputs)
    return text


async def test_a_snapshot_round_trip_brings_every_picklable_variable_back_equal(
    executors: tuple[KernelExecutor, KernelExecutor], tmp_path: Path
) -> None:
    first, second = executors
    await run_cell(first, f"import os; os.chdir({str(tmp_path)!r})\n{SETUP}")

    manifest = await take_snapshot(first, tmp_path, SnapshotSettings(), SIGNER)

    saved = {e["name"]: e for e in manifest["saved"]}
    assert set(saved) == {"count", "text", "frame", "array", "make_adder", "adder", "square",
                          "Point", "point", "dataclass"}  # fmt: skip
    assert {(i["name"], i["module"]) for i in manifest["imports"]} == {
        ("np", "numpy"),
        ("pd", "pandas"),
        ("js", "json"),
        ("os", "os"),
    }
    skipped = {e["name"]: e["reason"] for e in manifest["skipped"]}
    assert set(skipped) == {"gen", "handle"}
    assert "generator" in skipped["gen"] and "open file" in skipped["handle"]
    assert saved["count"]["method"] == "pickle" and saved["frame"]["method"] == "pickle"
    assert saved["square"]["method"] == "dill" and saved["point"]["method"] == "dill"
    assert manifest["total_bytes"] == sum(e["bytes"] for e in manifest["saved"])
    assert manifest["version"] == 2 and manifest["python"] and manifest["time"]
    assert SIGNER.verify_object("snapshot", manifest)
    assert all(len(e["sha256"]) == 64 for e in manifest["saved"])

    report = await restore_snapshot(second, tmp_path, SIGNER)

    assert report["refused"] is None and report["failed"] == []
    assert await run_cell(second, CHECK) == "all equal\n"
    kind, text = describe_restore(report)
    assert kind == RESTORED
    assert "frame" in text and "pd (import pandas)" in text
    assert "gen (a generator" in text and "handle (an open file" in text


async def test_helpers_work_when_the_user_shadows_builtins(
    executors: tuple[KernelExecutor, KernelExecutor], tmp_path: Path
) -> None:
    first, second = executors
    shadow = "list = 3\nopen = None\nlen = 'x'\nsorted = 0\nisinstance = 1\ntype = 2\nx = [1, 2]"
    await run_cell(first, shadow)

    manifest = await take_snapshot(first, tmp_path, SnapshotSettings(), SIGNER)
    report = await restore_snapshot(second, tmp_path, SIGNER)

    assert {e["name"] for e in manifest["saved"]} >= {"list", "open", "x"}
    assert report["failed"] == []
    assert await run_cell(second, "print(x, list, open)") == "[1, 2] 3 None\n"


async def test_a_variable_over_the_cap_is_skipped_with_its_size_and_the_total_cap_holds(
    executors: tuple[KernelExecutor, KernelExecutor], tmp_path: Path
) -> None:
    first, _ = executors
    await run_cell(
        first, "import numpy as np\nbig = np.zeros(300_000)\na = b'1' * 4000\nb = b'2' * 4000"
    )

    manifest = await take_snapshot(
        first, tmp_path, SnapshotSettings(variable_cap=1_000_000, total_cap=6_000), SIGNER
    )

    skipped = {e["name"]: e["reason"] for e in manifest["skipped"]}
    assert "over the per-variable cap" in skipped["big"]
    assert {e["name"] for e in manifest["saved"]} == {"a"}
    assert "total cap of 6,000" in skipped["b"]


async def test_a_name_that_disappears_while_the_snapshot_is_taken_does_not_fail_it(
    executors: tuple[KernelExecutor, KernelExecutor], tmp_path: Path
) -> None:
    first, second = executors
    # Pickling `first_value` deletes `later` from the namespace: what a background thread of
    # the user's does to its globals while a snapshot runs, made deterministic.
    await run_cell(
        first,
        "class DeletesLater:\n"
        "    def __reduce__(self):\n"
        "        globals().pop('later', None)\n"
        "        return (int, (7,))\n"
        "first_value = DeletesLater()\n"
        "later = 'still here'\n",
    )

    manifest = await take_snapshot(first, tmp_path, SnapshotSettings(), SIGNER)
    report = await restore_snapshot(second, tmp_path, SIGNER)

    assert {"first_value", "later"} <= {e["name"] for e in manifest["saved"]}
    assert report["failed"] == []
    assert await run_cell(second, "print(first_value, later)") == "7 still here\n"


async def test_nothing_is_written_when_no_cell_ran_since_the_last_snapshot(
    executors: tuple[KernelExecutor, KernelExecutor], tmp_path: Path
) -> None:
    first, _ = executors
    await run_cell(first, "a = 1")
    taken = await take_snapshot(first, tmp_path, SnapshotSettings(), SIGNER)

    again = await take_snapshot(first, tmp_path, SnapshotSettings(), SIGNER)
    await run_cell(first, "a = 2")
    changed = await take_snapshot(first, tmp_path, SnapshotSettings(), SIGNER)

    assert "unchanged" not in taken and again.get("unchanged") is True
    assert "unchanged" not in changed and changed["time"] != taken["time"]
    directory = state_directory(tmp_path)
    # the latest and the previous snapshot are kept, nothing else
    assert len(list(directory.glob("*.pkl"))) == 2
    previous = json.loads((directory / "manifest.previous.json").read_text())
    assert previous["time"] == taken["time"]


async def test_a_kernel_that_holds_variables_is_not_restored_over_and_is_told_how(
    host: Any, make_notebook: Any, agent_script: Any
) -> None:
    """The line the notice names asks the agent's host over the bridge (no folder: any kernel,
    a gateway's too, docs/snapshots.md "By hand"), so it runs in an agent's kernel."""
    script = agent_script([{"code": "a = 1\nb = 2"}, {"text": "set"}])
    agent = await snapshotted_agent(host, make_notebook("holds.ipynb"), script, {"a", "b"})
    await run_in_kernel(agent, "del b\na = 'mine'")
    kernel = agent.kernel
    kernel = await kernel.ready() if isinstance(kernel, PendingKernel) else kernel

    report = await restore_snapshot(kernel, agent.session.directory, host.runtime.signer)
    kind, text = describe_restore(report)

    assert report["restored"] == [] and "already holds variables: a" in report["refused"]
    assert kind == NOT_RESTORED and "prime_agent_kernel.restore_snapshot(" in text
    call = text.split("`")[1]
    assert "Error" not in await run_in_kernel(agent, call)
    assert await run_in_kernel(agent, "print(a, b)") == "mine 2\n"


async def test_a_corrupt_variable_file_fails_alone_and_a_corrupt_manifest_is_a_clean_start(
    executors: tuple[KernelExecutor, KernelExecutor], tmp_path: Path
) -> None:
    first, second = executors
    await run_cell(first, "a = 1\nb = 2")
    manifest = await take_snapshot(first, tmp_path, SnapshotSettings(), SIGNER)
    directory = state_directory(tmp_path)
    broken = next(e for e in manifest["saved"] if e["name"] == "a")
    (directory / broken["file"]).write_bytes(b"not a pickle")

    report = await restore_snapshot(second, tmp_path, SIGNER)

    assert [e["name"] for e in report["restored"]] == ["b"]
    assert [e["name"] for e in report["failed"]] == ["a"]
    assert "Could not be restored: a (" in describe_restore(report)[1]

    (directory / "manifest.json").write_text("{not json")
    assert read_manifest(tmp_path) is None
    await run_cell(second, "del b")
    report = await restore_snapshot(second, tmp_path, SIGNER)
    assert report["refused"] == "no snapshot"
    assert "clean start" in describe_restore(report)[1]


async def test_a_corrupt_manifest_falls_back_to_the_previous_snapshot_and_says_so(
    executors: tuple[KernelExecutor, KernelExecutor], tmp_path: Path
) -> None:
    first, second = executors
    await run_cell(first, "a = 1")
    await take_snapshot(first, tmp_path, SnapshotSettings(), SIGNER)
    await run_cell(first, "a = 2")
    await take_snapshot(first, tmp_path, SnapshotSettings(), SIGNER)
    directory = state_directory(tmp_path)
    (directory / "manifest.json").write_text('{"version": 2, "sav')  # truncated

    report = await restore_snapshot(second, tmp_path, SIGNER)
    kind, text = describe_restore(report)

    assert kind == RESTORED and "the snapshot before the latest" in text
    assert await run_cell(second, "print(a)") == "1\n"  # the snapshot before the corrupt one


async def test_a_snapshot_that_held_no_variables_says_so_plainly(
    executors: tuple[KernelExecutor, KernelExecutor], tmp_path: Path
) -> None:
    first, second = executors
    await run_cell(first, "print('nothing kept')")
    await take_snapshot(first, tmp_path, SnapshotSettings(), SIGNER)

    report = await restore_snapshot(second, tmp_path, SIGNER)
    kind, text = describe_restore(report)

    assert report["refused"] is None and report["restored"] == []
    assert kind == RESTORED
    assert text.startswith(f"The snapshot of {report['snapshot_time']} held no variables")
    assert "none." not in text and ": ." not in text


def test_every_name_the_kernel_package_binds_is_never_saved() -> None:
    import prime_agent_kernel
    from IPython.core.events import EventManager, available_events
    from prime_agent_kernel.snapshot import user_names

    class Shell:
        def __init__(self) -> None:
            self.user_ns: dict[str, Any] = {"mine": 1}
            self.user_ns_hidden: dict[str, Any] = {}
            self.kernel = None
            self.events = EventManager(self, available_events)  # compact's cell hooks

        def push(self, names: dict[str, Any], interactive: bool = False) -> None:
            self.user_ns.update(names)

    shell = Shell()
    prime_agent_kernel.load_ipython_extension(shell)

    assert set(shell.user_ns) - {"mine"} <= set(prime_agent_kernel.BOUND_NAMES)
    assert user_names(shell) == ["mine"]


# ---------------------------------------------------------------- on the server


def quick_snapshots(host: Any) -> None:
    host.runtime.settings = dataclasses.replace(host.runtime.settings, snapshot_debounce=0.05)


def saved_names(session_dir: Path) -> set[str]:
    manifest = read_manifest(session_dir) or {}
    return {e["name"] for e in manifest.get("saved", [])}


async def snapshotted_agent(host: Any, path: str, script: str, saved: set[str]) -> Any:
    """An agent whose first turn ("set x") ran `script` and whose snapshot now holds `saved`."""
    use_script(host, script)
    quick_snapshots(host)
    agent = await host.attach(path)
    await run_turn(host, agent.session_id, "set x")
    await wait_for(lambda: saved_names(agent.session.directory) == saved)
    return agent


async def test_variables_come_back_after_the_kernel_process_is_killed_and_the_model_is_told(
    host: Any, make_notebook: Any, agent_script: Any
) -> None:
    script = agent_script(
        [
            {"code": "x = 41\nitems = [1, 2]"},
            {"text": "set"},
            {"code": "print(x + len(items) - 1)"},
            {"text": "{last_output_line}"},
        ]
    )
    agent = await snapshotted_agent(host, make_notebook("killed.ipynb"), script, {"x", "items"})
    queue = agent.events.subscribe()
    km = host.serverapp.kernel_manager.get_kernel(agent.kernel.kernel_id)

    os.kill(km.provisioner.pid, signal.SIGKILL)

    died = await next_event(queue, "notice", timeout=60)
    restored = await next_event(queue, "notice", timeout=60)
    assert died["kind"] == "kernel_died"
    assert restored["kind"] == RESTORED and "x" in restored["text"]
    ended = await run_turn(host, agent.session_id, "use x")
    assert ended["final_text"] == "42"
    told = [m.text for m in agent.session.context_messages() if m.role == "user"][-1]
    assert "[notice] Kernel variables restored from the snapshot" in told
    assert "x" in told and told.endswith("use x")


async def test_the_death_notice_does_not_say_everything_is_gone_when_a_snapshot_comes_back(
    host: Any, make_notebook: Any, agent_script: Any
) -> None:
    use_script(host, agent_script([{"code": "x = 41"}, {"text": "set"}]))
    quick_snapshots(host)
    agent = await host.attach(make_notebook("killed-wording.ipynb"))
    queue = agent.events.subscribe()
    await run_turn(host, agent.session_id, "set x")
    await wait_for(lambda: saved_names(agent.session.directory) == {"x"})
    km = host.serverapp.kernel_manager.get_kernel(agent.kernel.kernel_id)

    os.kill(km.provisioner.pid, signal.SIGKILL)

    died = await next_event(queue, "notice", timeout=60)
    assert died["kind"] == "kernel_died"
    assert "are gone" not in died["text"]
    assert "snapshot" in died["text"]
    assert (await next_event(queue, "notice", timeout=60))["kind"] == RESTORED


async def test_a_kernel_without_a_snapshot_still_says_its_variables_are_gone(
    host: Any, make_notebook: Any, agent_script: Any
) -> None:
    use_script(host, agent_script([{"code": "x = 41"}, {"text": "set"}]))
    agent = await host.attach(make_notebook("killed-no-snapshot.ipynb"))
    queue = agent.events.subscribe()
    km = host.serverapp.kernel_manager.get_kernel(agent.kernel.kernel_id)

    os.kill(km.provisioner.pid, signal.SIGKILL)

    died = await next_event(queue, "notice", timeout=60)
    assert died["kind"] == "kernel_died"
    assert "all variables and imports are gone" in died["text"]


async def test_a_cell_whose_kernel_died_says_the_snapshot_came_back_not_that_all_is_gone(
    host: Any, make_notebook: Any, agent_script: Any
) -> None:
    use_script(
        host,
        agent_script(
            [
                {"code": "x = 41"},
                {"text": "set"},
                {"code": "import os\nos.kill(os.getpid(), 9)"},
                {"text": "after"},
            ]
        ),
    )
    quick_snapshots(host)
    agent = await host.attach(make_notebook("dies-wording.ipynb"))
    await run_turn(host, agent.session_id, "set x")
    await wait_for(lambda: saved_names(agent.session.directory) == {"x"})

    await run_turn(host, agent.session_id, "crash", timeout=90)

    died = [e for e in agent.session.path() if e["type"] == "tool_result"][-1]
    assert died["status"] == "died"
    assert "re-create what you need" not in died["observation"]
    assert "are gone" not in died["observation"].split(f"[{RESTORED}]")[0]
    assert f"[{RESTORED}] Kernel variables restored from the snapshot" in died["observation"]
    notice = [e for e in agent.session.path() if e["type"] == "notice"]
    died_notice = next(e for e in notice if e["kind"] == "kernel_died")
    assert "re-create what you need" not in died_notice["text"]


async def test_a_reopened_session_gets_its_variables_back_in_a_fresh_kernel(
    host: Any, make_notebook: Any, agent_script: Any
) -> None:
    script = agent_script(
        [
            {"code": "x = 41"},
            {"text": "set"},
            {"code": "print(x + 1)"},
            {"text": "{last_output_line}"},
        ]
    )
    use_script(host, script)
    quick_snapshots(host)
    path = make_notebook("reopen.ipynb")
    first = await host.attach(path)
    await run_turn(host, first.session_id, "set x")
    await wait_for(lambda: saved_names(first.session.directory) == {"x"})
    kernel_id = first.kernel.kernel_id
    await host.shutdown()
    await host.serverapp.kernel_manager.shutdown_kernel(kernel_id, now=True)

    again = restarted_host(host, script=script)
    try:
        resumed = await again.attach(path)
        assert resumed.kernel.kernel_id != kernel_id
        ended = await run_turn(again, resumed.session_id, "use x")
        assert ended["final_text"] == "42"
        told = [m.text for m in resumed.session.context_messages() if m.role == "user"][-1]
        assert told.startswith("[notice] Kernel variables restored") and ": x." in told
    finally:
        await again.shutdown()


async def test_a_kernel_that_dies_under_an_agent_cell_comes_back_with_its_variables(
    host: Any, make_notebook: Any, agent_script: Any
) -> None:
    script = agent_script(
        [
            {"code": "x = 41"},
            {"text": "set"},
            {"code": "import os\nos.kill(os.getpid(), 9)"},
            {"code": "print(x + 1)"},
            {"text": "{last_output_line}"},
        ]
    )
    agent = await snapshotted_agent(host, make_notebook("dies.ipynb"), script, {"x"})

    ended = await run_turn(host, agent.session_id, "crash and use x", timeout=90)

    assert ended["final_text"] == "42"
    results = [e for e in agent.session.path() if e["type"] == "tool_result"]
    died = results[-2]
    assert died["status"] == "died"
    assert f"[{RESTORED}] Kernel variables restored from the snapshot" in died["observation"]
    notices = [e["kind"] for e in agent.session.path() if e["type"] == "notice"]
    # Told once: the server's restart event, when it comes after the cell, adds nothing (it
    # would say the variables are gone although they came back).
    assert notices.count("kernel_died") == 1
    assert notices.count(RESTORED) == 1 and NOT_RESTORED not in notices
    assert notices.index("kernel_died") < notices.index(RESTORED)


def test_the_snapshot_benchmark_runs_at_small_size() -> None:
    out = run_bench("bench_snapshots.py", "--smoke", timeout=120)
    rows = [line.split()[0] for line in out.splitlines()[2:]]
    assert rows == ["small", "arrays", "mixed"]


async def test_a_restart_from_the_kernel_menu_is_not_undone_and_the_notice_says_how_to_restore(
    jp_fetch: Any, host: Any, make_notebook: Any, agent_script: Any
) -> None:
    script = agent_script(
        [
            {"code": "x = 41"},
            {"text": "set"},
            {"code": "print('x' in dir())"},
            {"text": "{last_output_line}"},
        ]
    )
    agent = await snapshotted_agent(host, make_notebook("menu.ipynb"), script, {"x"})
    queue = agent.events.subscribe()

    await jp_fetch("api", "kernels", agent.kernel.kernel_id, "restart", method="POST", body="{}")

    restarted = await next_event(queue, "notice")
    hint = await next_event(queue, "notice")
    assert restarted["kind"] == "kernel_restarted_externally"
    assert hint["kind"] == NOT_RESTORED and "prime_agent_kernel.restore_snapshot(" in hint["text"]
    await run_turn(host, agent.session_id, "is x there?")
    checked = agent.session.last_of("tool_result")
    assert checked is not None and checked["observation"].startswith("[stdout]\nFalse\n")


async def test_a_kernel_killed_while_the_model_thinks_mid_turn_comes_back_before_the_next_cell(
    host: Any, make_notebook: Any, agent_script: Any
) -> None:
    script = agent_script(
        [
            {"code": "x = 41"},
            {"text": "set"},
            {"code": "y = 1"},
            {"code": "print(x + 1, 'y' in dir())"},
            {"text": "done"},
        ]
    )
    agent = await snapshotted_agent(host, make_notebook("mid-turn.ipynb"), script, {"x"})
    # the model "thinks" 8 s before each step: the death is seen before the next cell
    agent.set_provider(make_provider("scripted", None, script_path=script, step_delay=8))
    queue = agent.events.subscribe()
    pid = host.serverapp.kernel_manager.get_kernel(agent.kernel.kernel_id).provisioner.pid
    turn = asyncio.ensure_future(run_turn(host, agent.session_id, "go", timeout=120))
    await next_event(queue, "cell_finished", timeout=60)

    os.kill(pid, signal.SIGKILL)

    assert (await next_event(queue, "notice", timeout=60))["kind"] == "kernel_died"
    ended = await turn
    # x (from the snapshot at the end of the last turn) is back before the next cell; y, set
    # in this turn after that snapshot, is gone, and the cell's observation says both.
    assert ended["final_text"] == "done"
    cell = [e for e in agent.session.path() if e["type"] == "tool_result"][-1]
    assert cell["observation"].startswith("[stdout]\n42 False\n")
    assert "restarted while you were thinking" in cell["observation"]
    assert f"[{RESTORED}] Kernel variables restored from the snapshot" in cell["observation"]
    assert "variables and imports from before are gone" not in cell["observation"]


# ---------------------------------------------------------------- a full disk


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 3 MiB tmpfs: a real filesystem that fills up."""
    mount = tmp_path / "small-disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


async def test_a_snapshot_that_fills_the_disk_keeps_the_previous_one_whole(
    executors: tuple[KernelExecutor, KernelExecutor], small_disk: Path
) -> None:
    first, second = executors
    await run_cell(first, "a = 1")
    await take_snapshot(first, small_disk, SnapshotSettings(), SIGNER)
    directory = state_directory(small_disk)
    before = {p.name: p.read_bytes() for p in directory.iterdir()}
    await run_cell(first, "a = 2\nbig = bytes(range(256)) * 16_000")  # 4 MB: does not fit

    with pytest.raises(SnapshotFailed, match="the previous snapshot is kept"):
        await take_snapshot(first, small_disk, SnapshotSettings(), SIGNER)

    assert {p.name: p.read_bytes() for p in directory.iterdir()} == before  # no temp, no new
    await run_cell(first, "del big")  # space returns: the next save works
    saved = await take_snapshot(first, small_disk, SnapshotSettings(), SIGNER)
    assert "unchanged" not in saved and {e["name"] for e in saved["saved"]} == {"a"}
    report = await restore_snapshot(second, small_disk, SIGNER)
    assert [e["name"] for e in report["restored"]] == ["a"]
    assert await run_cell(second, "print(a)") == "2\n"
