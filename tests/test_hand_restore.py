"""A restore typed by hand in the kernel without a folder, `prime_agent_kernel.restore_snapshot()`
(review D2, docs/snapshots.md): the host offers the kernel's own agent session's signed snapshot
over the bridge (`snapshot.offer`, core/hand_restore.py). Real server, real kernels, real bridge;
on a kernel that shares the host's disk and on one forced onto the bridge path with the session
folders out of its reach (tests/kernel_guard), as a gateway kernel is."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from prime_agent_lab.core import snapshots
from prime_agent_lab.core.snapshots import (
    MANIFEST,
    manual_restore_call,
    read_manifest,
    state_directory,
)
from prime_agent_lab.core.trust import sha256

from .conftest import next_event, run_turn, use_script
from .test_messaging import run_in_kernel
from .test_snapshots_bridge import Guard, guard, remote  # noqa: F401 (guard: a fixture)

SET = "n = 41\nd = {'k': [1, 2]}\ndef twice(v):\n    return 2 * v\n"
FORGET = "del n, d, twice"
USE = "print('BACK', n + 1, d['k'], twice(21))"
HAND = manual_restore_call()  # the line the notice names, as the user types it
REPORT = (
    "import prime_agent_kernel\n"
    "r = prime_agent_kernel.restore_snapshot()\n"
    "print('REPORT', sorted(e['name'] for e in r['restored']), r['refused'])"
)


async def with_snapshot(host: Any, make_notebook: Any, agent_script: Any, name: str) -> Any:
    use_script(host, agent_script([{"code": SET}, {"text": "set"}]))
    agent = await host.attach(make_notebook(name))
    await run_turn(host, agent.session_id, "set")
    manifest = await host.runtime.save_snapshot(agent.session_id, "test")
    assert {e["name"] for e in manifest["saved"]} == {"n", "d", "twice"}
    return agent


def test_the_notice_names_the_call_without_a_folder() -> None:
    assert manual_restore_call() == (
        "import prime_agent_kernel; prime_agent_kernel.restore_snapshot()"
    )
    assert manual_restore_call(previous=True).endswith("restore_snapshot(previous=True)")


@pytest.mark.parametrize("disk", ["shared", "bridge"])
async def test_the_call_from_the_notice_brings_the_sessions_snapshot_back(
    host: Any, make_notebook: Any, agent_script: Any, request: pytest.FixtureRequest, disk: str
) -> None:
    guarded: Guard | None = None
    if disk == "bridge":  # the session folders out of the kernel's reach, as on a gateway
        guarded = request.getfixturevalue("guard")
        remote(host)
    agent = await with_snapshot(host, make_notebook, agent_script, f"hand-{disk}.ipynb")
    await run_in_kernel(agent, FORGET)
    assert "NameError" in await run_in_kernel(agent, USE)

    out = await run_in_kernel(agent, HAND)

    assert "Error" not in out, out
    assert "BACK 42 [1, 2] 42" in await run_in_kernel(agent, USE)
    if guarded is not None:
        assert guarded.hits() == []


async def test_the_path_form_still_restores_from_a_folder_the_kernel_reads(
    host: Any, make_notebook: Any, agent_script: Any
) -> None:
    agent = await with_snapshot(host, make_notebook, agent_script, "path.ipynb")
    directory = state_directory(agent.session.directory)
    await run_in_kernel(agent, FORGET)

    out = await run_in_kernel(
        agent, f"import prime_agent_kernel\nprime_agent_kernel.restore_snapshot({str(directory)!r})"
    )

    assert "Error" not in out, out
    assert "BACK 42 [1, 2] 42" in await run_in_kernel(agent, USE)


async def test_a_kernel_gets_only_its_own_sessions_snapshot(
    host: Any,
    make_notebook: Any,
    agent_script: Any,
    guard: Guard,  # noqa: F811
) -> None:
    """Sessions A and B each hold a snapshot, and A's restore has its offer standing. Whatever
    B's kernel asks, it gets its own and nothing of A's: the call names no session or folder,
    the package refuses an argument the operation does not declare before sending it, and the
    host, sent one signed anyway, still answers only from the caller's own session."""
    remote(host)
    owner = await with_snapshot(host, make_notebook, agent_script, "owner.ipynb")
    use_script(host, agent_script([{"code": "m = 1"}, {"text": "set"}]))
    other = await host.attach(make_notebook("other.ipynb"))
    await run_turn(host, other.session_id, "set")
    own = await host.runtime.save_snapshot(other.session_id, "test")
    assert [e["name"] for e in own["saved"]] == ["m"]
    own_digest = sha256((state_directory(other.session.directory) / MANIFEST).read_bytes())
    await run_in_kernel(owner, FORGET)
    assert "REPORT ['d', 'n', 'twice'] None" in await run_in_kernel(owner, REPORT)  # A's offer
    await run_in_kernel(other, "del m")

    mine = await run_in_kernel(other, REPORT)
    asked = await run_in_kernel(other, ASK_FOR.format(owner=owner.session_id))

    assert "REPORT ['m'] None" in mine, mine
    assert "NameError" in await run_in_kernel(other, "print(n)")
    lines = asked.splitlines()
    # The kernel package refuses the extra argument, and so does the host when a call is made
    # around the package's check.
    kinds = ["LOCAL", "REFUSED"] * 2 + ["PLAIN", "MANIFEST"]
    assert [line.split(" ", 1)[0] for line in lines] == kinds, asked
    assert all("takes previous, not" in line for line in lines[0:4]), asked
    assert json.loads(lines[4].split(" ", 1)[1])["digest"] == own_digest, asked
    assert json.loads(lines[5].split(" ", 1)[1]) == ["m"], asked  # B's manifest, not A's
    assert guard.hits() == []


ASK_FOR = """
import base64, json
from prime_agent_kernel import client, _sync_call
from prime_agent_kernel.operations import OFFER_SNAPSHOT, GET_SNAPSHOT_CHUNK
from prime_agent_kernel.bridge import BridgeError
for payload in ({{'previous': False, 'session': {owner!r}}},
                {{'previous': False, 'directory': '../{owner}/kernel-state'}}):
    try:
        print('ANSWER', _sync_call(OFFER_SNAPSHOT, payload))
    except ValueError as exc:
        print('LOCAL', exc)
    try:
        print('HOST', json.dumps(client().call(OFFER_SNAPSHOT, payload)))
    except BridgeError as exc:
        print('REFUSED', exc)
print('PLAIN', json.dumps(client().call(OFFER_SNAPSHOT, {{'previous': False}})))
chunk = client().call(GET_SNAPSHOT_CHUNK, {{'file': 'manifest', 'offset': 0, 'size': 1048576}})
saved = json.loads(base64.b64decode(chunk['data']))['saved']
print('MANIFEST', json.dumps([e['name'] for e in saved]))
"""


async def test_a_snapshot_not_signed_here_is_refused_and_not_read(
    host: Any,
    make_notebook: Any,
    agent_script: Any,
    guard: Guard,  # noqa: F811
) -> None:
    remote(host)
    agent = await with_snapshot(host, make_notebook, agent_script, "unsigned.ipynb")
    directory = state_directory(agent.session.directory)
    unsigned = json.loads((directory / MANIFEST).read_text())
    unsigned["signature"] = "0" * 64
    (directory / MANIFEST).write_text(json.dumps(unsigned))
    await run_in_kernel(agent, FORGET)

    out = await run_in_kernel(agent, REPORT)

    assert "REPORT [] untrusted" in out, out
    assert "NameError" in await run_in_kernel(agent, USE)
    transfers = host.runtime.snapshots.transfers
    with pytest.raises(Exception, match="not restoring"):
        transfers.read(directory, "manifest", 0, 10)
    assert guard.hits() == []


def test_a_standing_offer_ends_after_two_minutes_without_a_read(tmp_path: Path) -> None:
    from prime_agent_lab.core.snapshot_transfer import UPLOAD_IDLE_TIMEOUT, SnapshotTransfers

    now = [0.0]
    transfers = SnapshotTransfers(clock=lambda: now[0])
    manifest = json.dumps({"saved": []}).encode()
    transfers.offer(tmp_path, manifest)
    now[0] = UPLOAD_IDLE_TIMEOUT - 1
    assert transfers.read(tmp_path, "manifest", 0, 100) == manifest  # a read keeps it
    now[0] = 2 * UPLOAD_IDLE_TIMEOUT - 2
    assert transfers.read(tmp_path, "manifest", 0, 100) == manifest
    now[0] = 3 * UPLOAD_IDLE_TIMEOUT
    with pytest.raises(Exception, match="not restoring"):
        transfers.read(tmp_path, "manifest", 0, 100)


@pytest.mark.parametrize("disk", ["shared", "bridge"])
async def test_after_a_restart_from_the_menu_an_empty_process_keeps_the_snapshot_to_restore(
    jp_fetch: Any, host: Any, make_notebook: Any, agent_script: Any, disk: str
) -> None:
    """The next turn's snapshots run in the new process, which holds nothing: they do not push
    the snapshot from before the restart out (before, the latest became the empty one and the
    notice's line restored nothing), until the process holds a name of its own."""
    if disk == "bridge":
        remote(host)
    turns = [{"code": SET}, {"text": "set"}, {"code": "print('two')"}, {"text": "two"}]
    use_script(host, agent_script(turns))
    agent = await host.attach(make_notebook(f"menu-{disk}.ipynb"))
    queue = agent.events.subscribe()
    await run_turn(host, agent.session_id, "set")
    kept = await host.runtime.save_snapshot(agent.session_id, "test")

    await jp_fetch("api", "kernels", agent.kernel.kernel_id, "restart", method="POST", body="{}")
    assert (await next_event(queue, "notice"))["kind"] == "kernel_restarted_externally"
    assert manual_restore_call() in (await next_event(queue, "notice"))["text"]
    await run_turn(host, agent.session_id, "go on")  # its start's snapshot: the new process
    await host.runtime.save_snapshot(agent.session_id, "nothing of its own")

    assert read_manifest(agent.session.directory)["time"] == kept["time"]
    assert "Error" not in await run_in_kernel(agent, HAND)
    assert "BACK 42 [1, 2] 42" in await run_in_kernel(agent, USE)
    await run_in_kernel(agent, "m = 1")
    replaced = await host.runtime.save_snapshot(agent.session_id, "names of its own")
    assert {e["name"] for e in replaced["saved"]} == {"n", "d", "twice", "m"}
    assert replaced["time"] != kept["time"]


async def test_a_snapshot_asked_for_while_another_is_written_holds_the_kernel_of_now(
    host: Any, make_notebook: Any, agent_script: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Under load a turn's first snapshot was still being written when the turn had ended, and a
    # snapshot asked for then was handed that one: taken before the turn's cells, it held none
    # of their names (CI: `saved` empty).
    agent = await with_snapshot(host, make_notebook, agent_script, "now.ipynb")
    take = snapshots.take_snapshot

    async def slowly_written(*args: Any, **kwargs: Any) -> dict[str, Any]:
        manifest = await take(*args, **kwargs)
        await asyncio.sleep(1.0)  # the kernel was read; the files are still being written
        return manifest

    monkeypatch.setattr(snapshots, "take_snapshot", slowly_written)
    earlier = asyncio.ensure_future(host.runtime.save_snapshot(agent.session_id, "earlier"))
    await asyncio.sleep(0.5)
    await run_in_kernel(agent, "later = 'after the earlier snapshot read the kernel'")
    now = await host.runtime.save_snapshot(agent.session_id, "now")

    assert "later" not in {e["name"] for e in (await earlier)["saved"]}
    assert "later" in {e["name"] for e in now["saved"]}, now
