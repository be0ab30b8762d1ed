"""The kernel pool that sub-agents draw their kernels from: its rules with real local kernels, and
the hand-out of a server kernel to a notebook as its Jupyter session."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager

from prime_agent_lab.adapters.kernel_calls import KernelCallFailed
from prime_agent_lab.adapters.kernel_executor import KernelExecutor
from prime_agent_lab.adapters.kernel_pool import KernelPool, KernelStartFailed, PoolClosed
from prime_agent_lab.adapters.local_kernels import LocalKernel, LocalKernels, hand_out, kill_now
from prime_agent_lab.jupyter.server_kernels import HandOutFailed, ServerKernels, hand_to_notebook
from tests.conftest import wait_for


def local_pool(source: LocalKernels, size: int, **options: Any) -> KernelPool[LocalKernel]:
    return KernelPool(source.start, source.discard, size=size, alive=source.alive, **options)


async def run_in(manager: Any, code: str) -> str:
    """What `code` prints in the kernel, run through the agent's own executor."""
    executor = KernelExecutor(manager, "test")
    try:
        result = await executor.execute(code, lambda event: None, 30)
    finally:
        await executor.close()
    assert result.status == "ok", result
    return "".join(str(o.get("text", "")) for o in result.outputs)


@pytest.fixture
def kernels(tmp_path: Path) -> LocalKernels:
    return LocalKernels("python3", cwd=tmp_path)


@pytest.fixture
def switchable_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A kernel spec `switchable` whose kernel cannot start until `works(True)` is called."""
    spec_dir = tmp_path / "jupyter" / "kernels" / "switchable"
    spec_dir.mkdir(parents=True)

    def works(ok: bool) -> None:
        python = sys.executable if ok else str(tmp_path / "no-such-python")
        argv = [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        spec = {"argv": argv, "display_name": "switchable", "language": "python"}
        (spec_dir / "kernel.json").write_text(json.dumps(spec))

    works(False)
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    yield works


async def test_sixteen_concurrent_takes_from_a_pool_of_two_get_sixteen_distinct_kernels(
    kernels: LocalKernels,
) -> None:
    pool = local_pool(kernels, size=2)
    pool.fill()
    await wait_for(lambda: pool.stats().ready == 2)

    taken = await asyncio.gather(*(pool.take() for _ in range(16)))
    try:
        pids = {k.manager.provisioner.pid for k in taken}  # type: ignore[union-attr]
        assert len({id(k) for k in taken}) == 16
        assert len({k.kernel_id for k in taken}) == 16
        assert len(pids) == 16
        assert pool.warm_hits == 2
        assert pool.warm_hits + pool.waits + pool.cold_starts == 16
    finally:
        await pool.close()
        await asyncio.gather(*(kernels.discard(k) for k in taken))


async def test_a_dead_warm_kernel_is_discarded_and_skipped(kernels: LocalKernels) -> None:
    pool = local_pool(kernels, size=1)
    pool.fill()
    await wait_for(lambda: pool.stats().ready == 1)
    dead = pool._ready[0]
    os.kill(dead.manager.provisioner.pid, signal.SIGKILL)  # type: ignore[union-attr]
    await wait_for(lambda: is_dead(kernels, dead))

    kernel = await pool.take()
    try:
        assert kernel is not dead
        assert await kernels.alive(kernel)
        # the replacement started as the dead kernel was picked is the one handed out
        assert (pool.warm_hits, pool.waits, pool.cold_starts) == (0, 1, 0)
        await wait_for(lambda: not dead.manager.has_kernel)  # discarded, never handed out
    finally:
        await pool.close()
        await kernels.discard(kernel)


async def is_dead(kernels: LocalKernels, kernel: LocalKernel) -> bool:
    return not await kernels.alive(kernel)


async def test_a_failed_start_reaches_the_taker_and_the_pool_recovers_once_kernels_start(
    switchable_spec: Any, tmp_path: Path
) -> None:
    kernels = LocalKernels("switchable", cwd=tmp_path)
    pool = local_pool(kernels, size=1, retry_delay=0.05, max_retry_delay=0.05)

    with pytest.raises(KernelStartFailed, match="could not start a kernel") as failure:
        await pool.take()
    assert "switchable" in str(failure.value) and "no-such-python" in str(failure.value)
    assert pool.failed_starts == 1 and pool.last_error is not None

    switchable_spec(True)
    kernel = await pool.take()  # the taker is not made to wait for the backoff
    try:
        assert await kernels.alive(kernel)
        await wait_for(lambda: pool.stats().ready == 1)  # refilling resumed
        assert pool.stats().retry_in is None
    finally:
        await pool.close()
        await kernels.discard(kernel)


async def test_refills_back_off_after_repeated_failures_instead_of_spinning(
    switchable_spec: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="prime_agent_lab.adapters.kernel_pool")
    kernels = LocalKernels("switchable", cwd=tmp_path)
    pool = local_pool(kernels, size=1, retry_delay=0.02, max_retry_delay=0.08)
    pool.fill()
    await wait_for(lambda: pool.failed_starts >= 5)
    await pool.close()

    retries = [r.args for r in caplog.records if "next try in" in r.getMessage()]
    assert retries[:5] == [(1, 0.02), (2, 0.04), (3, 0.08), (4, 0.08), (5, 0.08)]
    # one start per waited-out delay, never more (the last may have been under way at close)
    assert len(retries) <= pool.failed_starts <= len(retries) + 1
    assert pool.stats().retry_in is None  # closing stopped the retries


async def test_close_shuts_down_every_kernel_not_handed_out_and_is_idempotent(
    kernels: LocalKernels,
) -> None:
    pool = local_pool(kernels, size=2)
    pool.fill()
    await wait_for(lambda: pool.stats().ready == 2)
    held = list(pool._ready)
    taken = await pool.take()  # starts a refill, which close() must wait for and shut down
    starting = list(pool._unclaimed)
    assert len(starting) == 1

    await asyncio.gather(pool.close(), pool.close())
    await pool.close()

    try:
        refilled = starting[0].result()
        for kernel in [*held, refilled]:
            if kernel is not taken:
                assert not kernel.manager.has_kernel
        assert await kernels.alive(taken)  # handed out: the pool leaves it alone
        assert pool.stats().ready == 0 and pool.stats().starting == 0
        with pytest.raises(PoolClosed):
            await pool.take()
    finally:
        await kernels.discard(taken)


async def test_a_pooled_kernel_has_no_provider_key_in_its_environment(
    kernels: LocalKernels, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-pool-test-secret")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-pool-test-secret")
    monkeypatch.setenv("PRIME_AGENT_POOL_MARKER", "inherited")
    pool = local_pool(kernels, size=1)
    pool.fill()
    await wait_for(lambda: pool.stats().ready == 1)
    kernel = await pool.take()
    try:
        seen = await run_in(
            kernel.manager,
            "import os\n"
            "print(sorted(k for k in os.environ if k.endswith(('_API_KEY', '_MARKER'))))",
        )
    finally:
        await pool.close()
        await kernels.discard(kernel)
    assert seen == "['PRIME_AGENT_POOL_MARKER']\n"


async def test_hand_out_runs_the_kernel_in_the_notebooks_directory(
    kernels: LocalKernels, tmp_path: Path
) -> None:
    notebook_dir = tmp_path / "analysis.agents"
    notebook_dir.mkdir()
    pool = local_pool(kernels, size=1)
    pool.fill()
    await wait_for(lambda: pool.stats().ready == 1)
    kernel = await pool.take()
    try:
        await hand_out(kernel, notebook_dir)
        cwd = await run_in(kernel.manager, "import os; print(os.getcwd())")
        with pytest.raises(KernelCallFailed, match="FileNotFoundError"):
            await hand_out(kernel, tmp_path / "missing")
    finally:
        await pool.close()
        await kernels.discard(kernel)
    assert cwd == f"{notebook_dir}\n"


async def test_a_taker_that_gives_up_while_its_kernel_starts_leaves_it_to_the_pool() -> None:
    release = asyncio.Event()
    discarded: list[int] = []

    async def start() -> int:
        await release.wait()
        return 7

    async def discard(kernel: int) -> None:
        discarded.append(kernel)

    pool: KernelPool[int] = KernelPool(start, discard, size=0)
    taker = asyncio.ensure_future(pool.take())
    await wait_for(lambda: pool.cold_starts == 1)
    taker.cancel()
    with pytest.raises(asyncio.CancelledError):
        await taker
    release.set()
    await wait_for(lambda: pool.stats().ready == 1)

    assert await pool.take() == 7  # the kernel went to the next taker, not lost
    await pool.close()
    assert discarded == []


async def test_size_zero_starts_every_kernel_for_its_taker_and_keeps_none() -> None:
    started: list[int] = []

    async def start() -> int:
        started.append(len(started))
        return started[-1]

    async def discard(kernel: int) -> None:
        raise AssertionError("nothing to discard")

    pool: KernelPool[int] = KernelPool(start, discard, size=0)
    pool.fill()
    assert [await pool.take(), await pool.take()] == [0, 1]
    assert (pool.cold_starts, pool.warm_hits, pool.stats().starting) == (2, 0, 0)
    await pool.close()
    assert started == [0, 1]


async def test_a_disabled_pool_says_so_once_and_neither_refills_nor_backs_off(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """As the fleet does when a gateway refuses another kernel: the start that was refused
    disables the pool; the ready kernel is still handed out, later takers get a start of their
    own, and no retry follows."""
    attempts: list[int] = []

    async def start() -> int:
        attempts.append(len(attempts) + 1)
        if len(attempts) > 1:
            pool.disable("the kernel source refused another kernel (HTTP 403: Resource Limit)")
            raise RuntimeError("HTTP 403: Resource Limit")
        return attempts[-1]

    async def discard(kernel: int) -> None:
        return None

    pool: KernelPool[int] = KernelPool(start, discard, size=2, retry_delay=0.01)
    with caplog.at_level(logging.INFO, logger="prime_agent_lab.adapters.kernel_pool"):
        pool.fill()
        await wait_for(lambda: pool.stats().starting == 0)
        await asyncio.sleep(0.2)  # twenty retry delays: no retry may come
        assert attempts == [1, 2] and pool.size == 0
        assert await pool.take() == 1
        with pytest.raises(KernelStartFailed):
            await pool.take()  # its own start, refused
        await asyncio.sleep(0.1)
    await pool.close()
    assert attempts == [1, 2, 3]
    lines = [r.getMessage() for r in caplog.records]
    assert [line for line in lines if line.startswith("kernel pool disabled:")] == [
        "kernel pool disabled: the kernel source refused another kernel (HTTP 403: Resource Limit)"
    ]
    assert not [line for line in lines if "next try in" in line]


# ------------------------------------------------------------ the server's kernels


async def test_a_handed_out_server_kernel_is_the_jupyter_session_kernel_of_its_notebook(
    host: Any,
    jp_serverapp: Any,
    jp_root_dir: Path,
    jp_fetch: Any,
    make_notebook: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-server-pool-secret")
    path = make_notebook("analysis.agents/part-a.ipynb")
    source = ServerKernels(jp_serverapp, "python3")
    pool = KernelPool(source.start, source.discard, size=1, alive=source.alive)
    pool.fill()
    await wait_for(lambda: pool.stats().ready == 1)
    kernel_id = await pool.take()
    try:
        session = await hand_to_notebook(jp_serverapp, kernel_id, path)
        listed = json.loads((await jp_fetch("api", "sessions")).body)
        manager = jp_serverapp.kernel_manager.get_kernel(kernel_id)
        seen = await run_in(
            manager, "import os; print(os.getcwd()); print('OPENAI_API_KEY' in os.environ)"
        )
        with pytest.raises(HandOutFailed, match="already has a Jupyter session"):
            await hand_to_notebook(jp_serverapp, kernel_id, path)
    finally:
        await pool.close()

    assert session["kernel"]["id"] == kernel_id and session["type"] == "notebook"
    assert [(s["path"], s["kernel"]["id"]) for s in listed] == [(path, kernel_id)]
    assert seen == f"{jp_root_dir / 'analysis.agents'}\nFalse\n"


async def test_a_notebook_opened_while_its_kernel_is_handed_out_joins_that_kernel(
    jp_serverapp: Any, jp_fetch: Any, make_notebook: Any
) -> None:
    """A tab opening a sub-agent's notebook while the pooled kernel is being moved to the
    notebook's folder asks the sessions API as JupyterLab does: it must get the agent's kernel,
    not a second one for the same notebook."""
    path = make_notebook("analysis.agents/part-a.ipynb")
    source = ServerKernels(jp_serverapp, "python3")
    pool = KernelPool(source.start, source.discard, size=1, alive=source.alive)
    kernel_id = await pool.take()
    manager = jp_serverapp.kernel_manager.get_kernel(kernel_id)
    executor = KernelExecutor(manager, "test")
    opened: list[dict[str, Any]] = []

    async def move_while_a_tab_opens(code: str, timeout: float) -> dict[str, Any]:
        body = {
            "path": path,
            "type": "notebook",
            "name": "part-a.ipynb",
            "kernel": {"name": "python3"},
        }
        answer = await jp_fetch("api", "sessions", method="POST", body=json.dumps(body))
        opened.append(json.loads(answer.body))
        return await executor.run_silently(code, timeout)

    try:
        await hand_to_notebook(jp_serverapp, kernel_id, path, run=move_while_a_tab_opens)
        listed = json.loads((await jp_fetch("api", "sessions")).body)
    finally:
        await executor.close()
        await pool.close()
        for other in list(jp_serverapp.kernel_manager.list_kernel_ids()):
            await jp_serverapp.kernel_manager.shutdown_kernel(other, now=True)
    assert [s["kernel"]["id"] for s in opened] == [kernel_id]
    assert [(s["path"], s["kernel"]["id"]) for s in listed] == [(path, kernel_id)]


async def test_a_tab_whose_kernel_is_still_starting_keeps_the_notebook_to_one_session(
    jp_serverapp: Any, jp_fetch: Any, make_notebook: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """JupyterLab's POST /api/sessions checks that the notebook has no session, starts a kernel
    (seconds on a loaded machine), then saves the session. A sub-agent's kernel handed to the
    same notebook during that start made a second session: the tab on one kernel, the agent on
    another (the agent-tree browser test, under load). One of the two must get the other's."""
    path = make_notebook("analysis.agents/part-a.ipynb")
    source = ServerKernels(jp_serverapp, "python3")
    pool = KernelPool(source.start, source.discard, size=1, alive=source.alive)
    kernel_id = await pool.take()
    sessions = jp_serverapp.session_manager
    start_for_session = sessions.start_kernel_for_session
    handing: list[asyncio.Task[dict[str, Any]]] = []

    async def hand_out_while_the_tab_s_kernel_starts(*args: Any, **kwargs: Any) -> str:
        handing.append(asyncio.ensure_future(hand_to_notebook(jp_serverapp, kernel_id, path)))
        for _ in range(200):  # the hand-out's own session would be saved within these
            await asyncio.sleep(0)
        return str(await start_for_session(*args, **kwargs))

    monkeypatch.setattr(
        sessions, "start_kernel_for_session", hand_out_while_the_tab_s_kernel_starts
    )
    body = {"path": path, "type": "notebook", "name": "part-a.ipynb", "kernel": {"name": "python3"}}
    try:
        opened = json.loads(
            (await jp_fetch("api", "sessions", method="POST", body=json.dumps(body))).body
        )
        with pytest.raises(HandOutFailed, match="already has a Jupyter session"):
            await handing[0]
        listed = json.loads((await jp_fetch("api", "sessions")).body)
    finally:
        await pool.close()
        for other in list(jp_serverapp.kernel_manager.list_kernel_ids()):
            await jp_serverapp.kernel_manager.shutdown_kernel(other, now=True)
    assert [(s["path"], s["kernel"]["id"]) for s in listed] == [(path, opened["kernel"]["id"])]


async def test_a_tab_that_opened_before_the_hand_out_joins_the_agents_kernel_at_its_real_path(
    jp_serverapp: Any, jp_fetch: Any, make_notebook: Any
) -> None:
    """JupyterLab starts a tab's session at a placeholder path (a UUID in the notebook's folder)
    and PATCHes the real path once its kernel runs. A sub-agent's kernel handed to the notebook
    in between made a second session: the tab on a kernel of its own, the agent on another, and
    at the tab's attach the running child was moved to the tab's kernel (the Agents View browser
    test, opening a child's notebook while its kernel came from the pool). The PATCH must give
    the tab the agent's kernel, and the placeholder's kernel must go."""
    path = make_notebook("analysis.agents/part-a.ipynb")
    source = ServerKernels(jp_serverapp, "python3")
    pool = KernelPool(source.start, source.discard, size=1, alive=source.alive)
    kernel_id = await pool.take()
    placeholder = f"analysis.agents/{uuid.uuid4()}"
    body = {
        "path": placeholder,
        "type": "notebook",
        "name": "part-a.ipynb",
        "kernel": {"name": "python3"},
    }
    try:
        started = json.loads(
            (await jp_fetch("api", "sessions", method="POST", body=json.dumps(body))).body
        )
        await hand_to_notebook(jp_serverapp, kernel_id, path)
        moved = json.loads(
            (
                await jp_fetch(
                    "api",
                    "sessions",
                    started["id"],
                    method="PATCH",
                    body=json.dumps({"path": path}),
                )
            ).body
        )
        await wait_for(lambda: started["kernel"]["id"] not in jp_serverapp.kernel_manager)
        listed = json.loads((await jp_fetch("api", "sessions")).body)
    finally:
        await pool.close()
        for other in list(jp_serverapp.kernel_manager.list_kernel_ids()):
            await jp_serverapp.kernel_manager.shutdown_kernel(other, now=True)
    assert started["kernel"]["id"] != kernel_id
    assert (moved["path"], moved["kernel"]["id"]) == (path, kernel_id)
    assert {(s["path"], s["kernel"]["id"]) for s in listed} == {(path, kernel_id)}


async def test_renaming_a_notebook_onto_a_path_with_a_session_keeps_each_kernel(
    jp_serverapp: Any, jp_fetch: Any, make_notebook: Any
) -> None:
    """Only JupyterLab's placeholder joins the notebook's kernel: a session whose path is a real
    notebook keeps its own kernel whatever path it moves to."""
    first, second = make_notebook("one.ipynb"), make_notebook("two.ipynb")
    opened = []
    try:
        for path in (first, second):
            body = {"path": path, "type": "notebook", "name": path, "kernel": {"name": "python3"}}
            answer = await jp_fetch("api", "sessions", method="POST", body=json.dumps(body))
            opened.append(json.loads(answer.body))
        moved = json.loads(
            (
                await jp_fetch(
                    "api",
                    "sessions",
                    opened[1]["id"],
                    method="PATCH",
                    body=json.dumps({"path": first}),
                )
            ).body
        )
    finally:
        for other in list(jp_serverapp.kernel_manager.list_kernel_ids()):
            await jp_serverapp.kernel_manager.shutdown_kernel(other, now=True)
    assert moved["kernel"]["id"] == opened[1]["kernel"]["id"] != opened[0]["kernel"]["id"]


async def test_a_handed_out_kernel_keeps_its_notebooks_name_after_a_restart(
    jp_serverapp: Any, make_notebook: Any
) -> None:
    path = make_notebook("analysis.agents/part-b.ipynb")
    source = ServerKernels(jp_serverapp, "python3")
    pool = KernelPool(source.start, source.discard, size=1, alive=source.alive)
    try:
        kernel_id = await pool.take()
        await hand_to_notebook(jp_serverapp, kernel_id, path)
        manager = jp_serverapp.kernel_manager.get_kernel(kernel_id)
        await manager.restart_kernel()
        seen = await run_in(manager, "import os; print(os.environ.get('JPY_SESSION_NAME'))")
    finally:
        await pool.close()
        await jp_serverapp.kernel_manager.shutdown_kernel(kernel_id, now=True)
    assert seen.strip().endswith("analysis.agents/part-b.ipynb")


def test_the_kernel_pool_benchmark_runs_both_modes_and_prints_the_ratio() -> None:
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(root), str(root / "kernel_ext"), env.get("PYTHONPATH", "")) if p
    )
    done = subprocess.run(
        [sys.executable, str(root / "bench" / "bench_kernel_pool.py"), "--runs", "1"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    rows = [line.split() for line in lines if line.startswith(("local ", "server "))]
    assert [row[0] for row in rows] == ["local", "server"]
    assert all(float(row[3]) > 0 for row in rows)
    assert "local warm: take" in done.stdout and "server cold: start" in done.stdout


@pytest.mark.skipif(os.name == "nt", reason="Unix sockets")
async def test_local_kernels_talk_over_private_unix_sockets_that_go_with_the_kernel(
    tmp_path: Path,
) -> None:
    """No TCP port to race for: a port jupyter_client picked could be taken by another process
    before the kernel bound it (the kernel then died with "Address already in use")."""
    kernels = LocalKernels("python3", cwd=tmp_path)
    kernel = await kernels.start()
    directory = Path(kernel.manager.ip).parent
    try:
        assert kernel.manager.transport == "ipc"
        assert len(str(kernel.manager.ip)) < 90  # Unix socket paths are limited to ~107 bytes
        assert any(p.is_socket() for p in directory.iterdir())
        assert await kernels.alive(kernel)
    finally:
        await kernels.discard(kernel)
    assert not directory.exists()


async def test_a_kernel_killed_at_once_never_sees_an_interrupt_first(tmp_path: Path) -> None:
    """jupyter_client's `shutdown_kernel(now=True)` sends SIGINT before it kills: a kernel still
    importing takes it as a KeyboardInterrupt and prints a traceback into the terminal the CLI's
    one-line error goes to. `kill_now` kills first, so no interrupt ever arrives."""
    marker, ready = tmp_path / "interrupted", tmp_path / "ready"
    kernel_script = tmp_path / "slow_kernel.py"
    kernel_script.write_text(
        "import os, pathlib, signal, time\n"
        # The signal's number is written at delivery, by the C handler, even if a kill follows
        # before Python code runs again.
        f"fd = os.open({str(marker)!r}, os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK)\n"
        "signal.set_wakeup_fd(fd)\n"
        "signal.signal(signal.SIGINT, lambda *_: None)\n"
        f"pathlib.Path({str(ready)!r}).touch()\n"
        "while True:\n    time.sleep(0.05)\n"
    )
    spec_dir = tmp_path / "jupyter" / "kernels" / "slow-starter"
    spec_dir.mkdir(parents=True)
    argv = [sys.executable, str(kernel_script), "{connection_file}"]
    spec = {"argv": argv, "display_name": "slow", "language": "python", "interrupt_mode": "signal"}
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    manager = AsyncKernelManager(
        kernel_name="slow-starter",
        kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(spec_dir.parent)]),
    )
    await manager.start_kernel(cwd=str(tmp_path))
    process = manager.provisioner.process  # type: ignore[union-attr]
    await wait_for(ready.exists, timeout=30)
    signals_sent: list[int] = []
    send_signal = manager.provisioner.send_signal  # type: ignore[union-attr]

    async def recording_send_signal(signum: int) -> None:
        if process.poll() is None:
            signals_sent.append(signum)
        await send_signal(signum)

    manager.provisioner.send_signal = recording_send_signal  # type: ignore[union-attr,method-assign]

    await kill_now(manager)

    assert process.poll() is not None, "the kernel process is still running"
    assert signal.SIGINT not in signals_sent, "an interrupt was sent to the live kernel"
    assert marker.read_bytes() == b"", "the kernel was interrupted before it was killed"
