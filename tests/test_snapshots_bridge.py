"""Snapshots and skill modules over the bridge, for a kernel that does not share the host's disk
(docs/gateway.md 2.3, 2.4): real server, real kernels, real bridge, the bridge path forced on
(`shares_disk` false), and the session folders out of the kernels' reach (an audit hook in every
kernel process refuses and records any file access under them: tests/kernel_guard)."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from prime_agent_lab.adapters import local_kernels
from prime_agent_lab.adapters.kernel_source import LOCAL_KERNELS
from prime_agent_lab.core.pending_kernel import PendingKernel
from prime_agent_lab.core.settings import Settings
from prime_agent_lab.core.snapshot_transfer import (
    UPLOAD_IDLE_TIMEOUT,
    Caps,
    SnapshotTransfers,
)
from prime_agent_lab.core.snapshots import (
    MANIFEST,
    SnapshotFailed,
    read_manifest,
    restore_snapshot,
    state_directory,
)
from prime_agent_lab.core.trust import sha256
from prime_agent_lab.headless import HeadlessRun

from .conftest import run_turn, use_script
from .test_messaging import run_in_kernel
from .test_session_resume import restarted_host
from .test_turn_revert import kernel_value, revert, two_turns

GUARD = Path(__file__).parent / "kernel_guard"

SETUP = """
import numpy as np
import pandas as pd
from dataclasses import dataclass

count = 42
frame = pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]})
array = np.arange(12, dtype=np.float64).reshape(3, 4)
square = lambda x: x * x

@dataclass
class Point:
    x: int
    y: int

point = Point(3, -4)
"""

CHECK = """
import numpy as _np, pandas as _pd
assert count == 42
_pd.testing.assert_frame_equal(frame, _pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]}))
assert _np.array_equal(array, _np.arange(12, dtype=_np.float64).reshape(3, 4))
assert square(7) == 49 and point == Point(3, -4) and isinstance(point, Point)
print("all equal")
"""


class Guard:
    def __init__(self, log: Path) -> None:
        self.log = log

    def hits(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []


@pytest.fixture
def guard(jp_root_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Guard:
    """Kernels started from now on cannot touch the sessions' folders."""
    return guard_kernels(jp_root_dir / ".prime-agent", tmp_path, monkeypatch)


def guard_kernels(folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Guard:
    log = tmp_path / "guard.log"
    monkeypatch.setenv("PRIME_AGENT_TEST_GUARD", str(folder))
    monkeypatch.setenv("PRIME_AGENT_TEST_GUARD_LOG", str(log))
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(GUARD), os.environ.get("PYTHONPATH", "")])
    )
    return Guard(log)


OWN_DISK = dataclasses.replace(LOCAL_KERNELS, shares_disk=False)
"""Local kernels that act as a gateway's do towards the disk."""


def on_own_disk(backend: Any) -> None:
    backend.traits = OWN_DISK


def remote(host: Any) -> Any:
    """The host's kernels do not share its disk (a gateway kernel source's trait)."""
    on_own_disk(host.fleet.backend)
    assert host.fleet.shares_disk is False
    # no debounced snapshot after a turn: each test takes its own when it means to
    host.runtime.settings = dataclasses.replace(host.runtime.settings, snapshot_debounce=3600)
    return host


async def ready(agent: Any) -> Any:
    kernel = agent.kernel
    return await kernel.ready() if isinstance(kernel, PendingKernel) else kernel


async def cell(agent: Any, code: str) -> str:
    out = await run_in_kernel(agent, code)
    assert "Error" not in out, out
    return out


# ---------------------------------------------------------------- the guard holds


async def test_the_guard_stops_a_kernel_that_writes_its_snapshot_into_the_session_folder(
    host: Any, make_notebook: Any, agent_script: Any, guard: Guard
) -> None:
    """Without the bridge path the kernel writes into the session folder, which the guard
    refuses: the other tests' "nothing touched" means something."""
    use_script(host, agent_script([{"code": "x = 1"}, {"text": "set"}]))
    agent = await host.attach(make_notebook("local.ipynb"))
    await run_turn(host, agent.session_id, "set")

    with pytest.raises(SnapshotFailed, match="out of this kernel's reach"):
        await host.runtime.save_snapshot(agent.session_id, "test")

    assert any("kernel-state" in line for line in guard.hits())


# ---------------------------------------------------------------- save and restore


async def test_variables_reach_the_host_and_come_back_on_resume_with_the_kernel_off_its_disk(
    host: Any, make_notebook: Any, agent_script: Any, guard: Guard
) -> None:
    script = agent_script(
        [{"code": SETUP}, {"text": "set"}, {"code": CHECK}, {"text": "{last_output_line}"}]
    )
    use_script(remote(host), script)
    path = make_notebook("remote.ipynb")
    first = await host.attach(path)
    await run_turn(host, first.session_id, "set")

    manifest = await host.runtime.save_snapshot(first.session_id, "test")

    directory = state_directory(first.session.directory)
    saved = {e["name"]: e for e in manifest["saved"]}
    assert set(saved) == {"count", "frame", "array", "square", "Point", "point", "dataclass"}
    assert host.runtime.signer.verify_object("snapshot", manifest)
    for entry in saved.values():  # placed by the host, each file its declared bytes
        assert sha256((directory / entry["file"]).read_bytes()) == entry["sha256"]
    assert not list(directory.glob("*.tmp")) and not (directory / "manifest.new.json").exists()
    again = await host.runtime.save_snapshot(first.session_id, "nothing ran")
    assert again.get("unchanged") is True and again["time"] == manifest["time"]

    kernel_id = first.kernel.kernel_id
    await host.shutdown()
    await host.serverapp.kernel_manager.shutdown_kernel(kernel_id, now=True)
    resumed_host = remote(restarted_host(host, script=script))
    settings = host.serverapp.web_app.settings
    settings["prime_agent_host"] = resumed_host  # the server's bridge routes reach it now
    try:
        resumed = await resumed_host.attach(path)
        assert resumed.kernel.kernel_id != kernel_id
        ended = await run_turn(resumed_host, resumed.session_id, "check")
        assert ended["final_text"] == "all equal"
        told = [m.text for m in resumed.session.context_messages() if m.role == "user"][-1]
        assert told.startswith("[notice] Kernel variables restored") and "frame" in told
        report = json.loads((directory / "restore-report.json").read_text())
        assert report["failed"] == [] and report["refused"] is None
    finally:
        await resumed_host.shutdown()
        settings["prime_agent_host"] = host
    assert guard.hits() == []


def headless(work: Path, **options: Any) -> HeadlessRun:
    script = work / "script.json"
    turns = [{"code": SETUP}, {"text": "set"}, {"code": CHECK}, {"text": "{last_output_line}"}]
    script.write_text(json.dumps({"turns": turns}))
    return HeadlessRun(
        cwd=work,
        notebook="analysis.ipynb",
        provider="scripted",
        model=None,
        script_path=str(script),
        stream=False,
        kernel_name="python3",
        settings=Settings(cell_timeout=120),
        kernel_pool_size=0,
        **options,
    )


async def test_the_clis_resume_restores_over_its_own_bridge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The headless CLI's kernels (its loopback bridge, its exit snapshot): `run --resume`."""
    work = tmp_path / "work"
    work.mkdir()
    guard = guard_kernels(work / ".prime-agent", tmp_path, monkeypatch)
    monkeypatch.setattr(local_kernels, "LOCAL_KERNELS", OWN_DISK)  # what LocalBackend takes
    first = headless(work)
    await first.start(lambda event: None)
    try:
        await first.settle(await first.agent.run_turn("set"))
        session_id = first.agent.session_id
    finally:
        await first.close()  # the CLI's exit snapshot
    assert first.snapshot_failures == [] and first.fleet.shares_disk is False
    assert {e["name"] for e in read_manifest(first.agent.session.directory)["saved"]} >= {"frame"}

    again = headless(work, session_id=session_id, resume=True)
    await again.start(lambda event: None)
    try:
        ended = await again.settle(await again.agent.run_turn("check"))
    finally:
        await again.close()

    assert ended.final_text == "all equal"
    assert guard.hits() == []


async def test_a_swapped_file_of_a_signed_snapshot_is_refused_by_name_and_an_unsigned_one_not_read(
    host: Any, make_notebook: Any, agent_script: Any, guard: Guard
) -> None:
    use_script(remote(host), agent_script([{"code": "x = 1\ny = [2]"}, {"text": "set"}]))
    agent = await host.attach(make_notebook("swapped.ipynb"))
    await run_turn(host, agent.session_id, "set")
    manifest = await host.runtime.save_snapshot(agent.session_id, "test")
    directory = state_directory(agent.session.directory)
    file_of = {e["name"]: e["file"] for e in manifest["saved"]}
    original = (directory / file_of["x"]).read_bytes()
    swapped = original.replace(b"K\x01", b"K\x07")  # pickle of 1 -> 7, same size
    assert swapped != original and len(swapped) == len(original)
    (directory / file_of["x"]).write_bytes(swapped)
    kernel = await ready(agent)
    await cell(agent, "del x, y")
    transfers = host.runtime.snapshots.transfers

    report = await restore_snapshot(kernel, agent.session.directory, host.runtime.signer, transfers)

    assert [e["name"] for e in report["restored"]] == ["y"]
    assert "changed since the snapshot was taken" in report["failed"][0]["reason"]
    assert "NameError" in await run_in_kernel(agent, "print(x)")

    unsigned = json.loads((directory / MANIFEST).read_text())
    unsigned["signature"] = "0" * 64
    (directory / MANIFEST).write_text(json.dumps(unsigned))
    refused = await restore_snapshot(
        kernel, agent.session.directory, host.runtime.signer, transfers
    )
    assert refused["refused"] == "untrusted"
    assert guard.hits() == []


async def test_reverting_a_turn_brings_the_kernel_back_over_the_bridge(
    host: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any, guard: Guard
) -> None:
    on_own_disk(host.fleet.backend)
    agent = await two_turns(host, make_notebook, agent_script, "revert-remote.ipynb")

    answer = await revert(jp_fetch, agent.session_id, 2)

    assert answer.code == 200, answer.body
    reverted = json.loads(answer.body)
    assert reverted["kernel"] == "restored" and reverted["removed"] == ["y"], reverted
    assert await kernel_value(agent, "x") == "1"
    assert await kernel_value(agent, "'y' in globals()") == "False"
    assert guard.hits() == []


# ---------------------------------------------------------------- what the host refuses

KERNEL_CALLS = """
import base64, hashlib
from prime_agent_kernel import _sync_call
from prime_agent_kernel.bridge import BridgeError
from prime_agent_kernel.operations import (BEGIN_SNAPSHOT, PUT_SNAPSHOT_CHUNK, COMMIT_SNAPSHOT,
    GET_SNAPSHOT_CHUNK)

def declared(size, data=b"abcd", name="00000-0badc0de.pkl"):
    digest = hashlib.sha256(data).hexdigest()
    return {"saved": [{"name": "v", "file": name, "bytes": size, "sha256": digest}]}

def attempt(op, payload):
    try:
        return _sync_call(op, payload)
    except BridgeError as exc:
        return str(exc)

def put(upload, data, offset=0):
    chunk = base64.b64encode(data).decode()
    return attempt(PUT_SNAPSHOT_CHUNK, {"upload": upload, "file": "00000-0badc0de.pkl",
                                        "offset": offset, "data": chunk})
"""

KERNEL_NAMES = (
    "base64, hashlib, _sync_call, BridgeError, BEGIN_SNAPSHOT, PUT_SNAPSHOT_CHUNK, "
    "COMMIT_SNAPSHOT, GET_SNAPSHOT_CHUNK, declared, attempt, put"
)


async def test_the_host_refuses_uploads_past_its_caps_or_their_declaration_and_keeps_the_snapshot(
    host: Any, make_notebook: Any, agent_script: Any, guard: Guard
) -> None:
    use_script(remote(host), agent_script([{"code": "x = 41"}, {"text": "set"}]))
    agent = await host.attach(make_notebook("caps.ipynb"))
    await run_turn(host, agent.session_id, "set")
    kept = await host.runtime.save_snapshot(agent.session_id, "test")
    directory = state_directory(agent.session.directory)
    before = {p.name: p.read_bytes() for p in directory.iterdir()}
    transfers = host.runtime.snapshots.transfers
    await cell(agent, KERNEL_CALLS)

    outside = await cell(agent, "print(attempt(BEGIN_SNAPSHOT, {'manifest': declared(4)}))")
    assert "(409)" in outside and "not taking this kernel's snapshot" in outside
    caps = Caps(variable=1000, total=1500)
    with transfers.expecting(directory, caps):
        too_big = await cell(agent, "print(attempt(BEGIN_SNAPSHOT, {'manifest': declared(1001)}))")
        two = (
            "{'saved': declared(800)['saved'] + declared(800, name='00001-0badc0de.pkl')['saved']}"
        )
        too_much = await cell(agent, f"print(attempt(BEGIN_SNAPSHOT, {{'manifest': {two}}}))")
        assert transfers.uploads() == 0  # refused before any byte moved
        past = await cell(
            agent,
            "up = _sync_call(BEGIN_SNAPSHOT, {'manifest': declared(4)})['upload']\n"
            "print(put(up, b'abcd' * 2))\nprint(put(up, b'ab'))\n"
            "print(attempt(BEGIN_SNAPSHOT, {'manifest': declared(4)}))",
        )
        assert transfers.uploads() == 0
    with transfers.expecting(directory, caps):
        tampered = await cell(
            agent,
            "up = _sync_call(BEGIN_SNAPSHOT, {'manifest': declared(4)})['upload']\n"
            "print(put(up, b'abce'))\nprint(attempt(COMMIT_SNAPSHOT, {'upload': up}))",
        )
        offers = await cell(
            agent, "print(attempt(GET_SNAPSHOT_CHUNK, {'file': 'manifest', 'offset': 0}))"
        )

    assert "(413)" in too_big and "per-variable cap of 1,000" in too_big
    assert "(413)" in too_much and "total cap of 1,500" in too_much
    assert "(400)" in past and "would pass its declared 4 bytes" in past
    assert "no such upload" in past.splitlines()[1]  # the upload was dropped with its bytes
    assert "not taking this kernel's snapshot" in past.splitlines()[2]  # one upload per save
    assert (
        "{'written': 4}" in tampered and "does not match its declared size and sha256" in tampered
    )
    assert "(409)" in offers and "not restoring" in offers
    assert {p.name: p.read_bytes() for p in directory.iterdir()} == before
    assert read_manifest(agent.session.directory) == kept
    await cell(agent, f"del x, up, {KERNEL_NAMES}")
    report = await restore_snapshot(
        await ready(agent), agent.session.directory, host.runtime.signer, transfers
    )
    assert [e["name"] for e in report["restored"]] == ["x"]
    assert guard.hits() == []


async def test_a_restore_reads_only_the_files_of_the_manifest_the_host_chose(
    host: Any, make_notebook: Any, agent_script: Any, guard: Guard
) -> None:
    use_script(remote(host), agent_script([{"code": "x = 41"}, {"text": "set"}]))
    agent = await host.attach(make_notebook("offer.ipynb"))
    await run_turn(host, agent.session_id, "set")
    manifest = await host.runtime.save_snapshot(agent.session_id, "test")
    directory = state_directory(agent.session.directory)
    (directory / "00009-deadbeef.pkl").write_bytes(b"not offered")
    raw = (directory / MANIFEST).read_bytes()
    await cell(agent, KERNEL_CALLS)
    get = "attempt(GET_SNAPSHOT_CHUNK, {{'file': {0!r}, 'offset': 0, 'size': 1048576}})"

    with host.runtime.snapshots.transfers.offering(directory, raw):
        out = await cell(
            agent,
            "\n".join(
                f"print({get.format(name)})"
                for name in (
                    "manifest",
                    manifest["saved"][0]["file"],
                    "00009-deadbeef.pkl",
                    "../session.jsonl",
                    "manifest.json",
                )
            ),
        )

    lines = out.splitlines()
    assert json.loads(base64.b64decode(eval(lines[0])["data"])) == manifest
    assert "'data'" in lines[1]
    assert all("(403)" in line and "not a file of the snapshot" in line for line in lines[2:])
    assert guard.hits() == []


def test_an_upload_without_a_chunk_for_two_minutes_is_dropped_with_its_bytes(
    tmp_path: Path,
) -> None:
    now = [0.0]
    transfers = SnapshotTransfers(clock=lambda: now[0])
    data = b"abcd"
    manifest = {"saved": [{"file": "00000-0badc0de.pkl", "bytes": 8, "sha256": sha256(data * 2)}]}
    with transfers.expecting(tmp_path, Caps(100, 100)):
        upload = transfers.begin(tmp_path, manifest)
        transfers.put(tmp_path, upload, "00000-0badc0de.pkl", 0, "YWJjZA==")
        assert len(list(tmp_path.glob("*.tmp"))) == 1
        now[0] = UPLOAD_IDLE_TIMEOUT + 1
        with pytest.raises(Exception, match="no such upload"):
            transfers.put(tmp_path, upload, "00000-0badc0de.pkl", 4, "YWJjZA==")
        assert transfers.uploads() == 0 and not list(tmp_path.glob("*.tmp"))


def test_overlapping_saves_each_take_one_upload_and_drop_only_their_own(tmp_path: Path) -> None:
    """A turn's start and a debounced snapshot may both be under way: the kernel runs them in
    order, and the first one's end must not take the second one's upload with it."""
    transfers = SnapshotTransfers()
    manifest = {"saved": [{"file": "00000-0badc0de.pkl", "bytes": 0, "sha256": sha256(b"")}]}
    first_save = transfers.expecting(tmp_path, Caps(100, 100))
    second_save = transfers.expecting(tmp_path, Caps(100, 100))
    first_save.__enter__()
    second_save.__enter__()
    first = transfers.begin(tmp_path, manifest)
    assert transfers.commit(tmp_path, first) == ["00000-0badc0de.pkl"]
    second = transfers.begin(tmp_path, {"saved": []})
    with pytest.raises(Exception, match="not taking"):
        transfers.begin(tmp_path, {"saved": []})

    first_save.__exit__(None, None, None)

    assert transfers.uploads() == 1
    assert transfers.commit(tmp_path, second) == []
    second_save.__exit__(None, None, None)
    with pytest.raises(Exception, match="not taking"):
        transfers.begin(tmp_path, {"saved": []})


# ---------------------------------------------------------------- skills


async def test_skill_modules_come_from_the_host_as_source_and_reload_when_it_changes(
    host: Any, make_notebook: Any, agent_script: Any, guard: Guard
) -> None:
    use_script(remote(host), agent_script([{"code": "print('ready')"}, {"text": "ok"}]))
    agent = await host.attach(make_notebook("skills.ipynb"))
    await run_turn(host, agent.session_id, "attach")
    reference = {"type": "python", "import": "remote_tool", "callable": "double"}

    made = await cell(
        agent,
        f"rlm.harness.create_skill('remote tool', 'x twice', reference={reference!r},\n"
        "    arguments={'x': 'int'}, source='def double(x):\\n    return 2 * x\\n')\n"
        "import remote_tool\nprint('CALL', remote_tool.double(21), remote_tool.__file__)",
    )
    store = host.runtime.harnesses.harness_for(agent.session_id).store(False)
    store.update(
        "skill",
        "remote_tool",
        {"reference": {**reference, "source": "def double(x):\n    return 3 * x\n"}},
    )
    after = await cell(agent, "print('AFTER', remote_tool.double(21))")
    traced = await run_in_kernel(
        agent,
        "import traceback\ntry:\n    remote_tool.double(None)\n"
        "except TypeError:\n    print(traceback.format_exc())",
    )

    assert "CALL 42 <skill:remote_tool>" in made
    assert "AFTER 63" in after
    assert 'File "<skill:remote_tool>", line 2' in traced and "return 3 * x" in traced
    assert guard.hits() == []


# ---------------------------------------------------------------- timings


@pytest.mark.parametrize("shared", [True, False], ids=["shared disk", "over the bridge"])
async def test_save_and_restore_time_of_a_large_snapshot(
    host: Any, make_notebook: Any, agent_script: Any, shared: bool
) -> None:
    """Prints the time of one save and one restore (50 MB with PRIME_AGENT_SNAPSHOT_MB=50)."""
    megabytes = int(os.environ.get("PRIME_AGENT_SNAPSHOT_MB", "8"))
    code = f"import numpy as np\nbig = np.random.default_rng(1).random({megabytes} * 2**17)"
    use_script(host, agent_script([{"code": code}, {"text": "set"}]))
    host.fleet.backend.shares_disk = shared
    host.runtime.settings = dataclasses.replace(
        host.runtime.settings, snapshot_variable_cap=2**30, snapshot_debounce=3600
    )
    agent = await host.attach(make_notebook(f"big-{shared}.ipynb"))
    await run_turn(host, agent.session_id, "set")
    digest = "import hashlib\nprint(hashlib.sha256(big.tobytes()).hexdigest())\ndel hashlib"
    before = await cell(agent, digest)

    started = time.perf_counter()
    manifest = await host.runtime.save_snapshot(agent.session_id, "timing")
    saved = time.perf_counter() - started
    await cell(agent, "del big, np")
    kernel = await ready(agent)
    started = time.perf_counter()
    report = await restore_snapshot(
        kernel, agent.session.directory, host.runtime.signer, host.runtime.snapshots.transfers
    )
    restored = time.perf_counter() - started

    assert manifest["total_bytes"] > megabytes * 2**20 and not manifest.get("unchanged")
    assert [e["name"] for e in report["restored"]] == ["big"], report
    assert await cell(agent, digest) == before
    print(
        f"\nsnapshot of {manifest['total_bytes'] / 2**20:.1f} MiB, "
        f"{'shared disk' if shared else 'over the bridge'}: save {saved:.2f} s, "
        f"restore {restored:.2f} s"
    )
