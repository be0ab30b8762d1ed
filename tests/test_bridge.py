"""The kernel-to-host bridge: identity from the signature, never from the payload; no deadlock."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import uuid
from typing import Any

import pytest

from prime_agent_lab.adapters.bridge_http import SIGNATURE_HEADER
from prime_agent_lab.adapters.kernel_source import LOCAL_KERNELS
from prime_agent_lab.core.bridge import MAX_BODY_BYTES, BridgeService, Caller, sign

from .conftest import run_turn

KEY = b"kernel-key"
TOKEN = "srv-token-6f1c0e9d2b"


# ------------------------------------------------------------------ unit: verification


def make_service() -> BridgeService:
    service = BridgeService(
        lambda kid: KEY if kid == "k1" else (b"other-key" if kid == "k2" else None),
        lambda kid: {"k1": "session-1", "k2": "session-2"}.get(kid),
        sync_wait=0.2,
    )

    async def whoami(caller: Caller, payload: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(float(payload.get("delay", 0)))
        return {"kernel_id": caller.kernel_id, "session_id": caller.session_id, "payload": payload}

    service.register("whoami", whoami)
    return service


def body(**fields: Any) -> bytes:
    base = {
        "kernel_id": "k1",
        "ts": time.time(),
        "nonce": uuid.uuid4().hex,
        "op": "whoami",
        "payload": {},
    }
    return json.dumps({**base, **fields}).encode()


def call(service: BridgeService, kernel_id: str, raw: bytes, key: bytes = KEY) -> tuple[int, Any]:
    return asyncio.run(service.call(kernel_id, raw, sign(key, raw)))


def test_identity_and_operation_come_from_the_signature_not_the_payload() -> None:
    service = make_service()
    smuggled = {
        "kernel_id": "k2",
        "session_id": "session-2",
        "op": "history.get",
        "type": "rlm.run",
    }
    status, answer = call(service, "k1", body(payload=smuggled))
    assert status == 200
    result = answer["result"]
    assert (result["kernel_id"], result["session_id"]) == ("k1", "session-1")
    assert result["payload"] == smuggled  # carried as data, never interpreted


def test_a_body_signed_by_one_kernel_cannot_act_as_another() -> None:
    service = make_service()
    raw = body(kernel_id="k2")
    assert call(service, "k2", raw, key=KEY)[0] == 403  # k1's key, k2's name
    assert call(service, "k1", body(kernel_id="k2"))[0] == 403  # URL and body disagree


@pytest.mark.parametrize(
    ("fields", "forge_signature", "reason"),
    [
        ({}, True, "bad signature"),
        ({"ts_offset": -3600}, False, "stale or missing timestamp"),
        ({"nonce": ""}, False, "missing nonce"),
    ],
)
def test_forged_or_stale_requests_are_refused(
    fields: dict[str, Any], forge_signature: bool, reason: str
) -> None:
    service = make_service()
    fields = dict(fields)
    offset = fields.pop("ts_offset", 0)
    raw = body(ts=time.time() + offset, **fields)  # built now: collection may be minutes earlier
    signature = "0" * 64 if forge_signature else sign(KEY, raw)
    status, answer = asyncio.run(service.call("k1", raw, signature))
    assert status == 403 and answer["error"] == reason


def test_a_replayed_request_is_refused() -> None:
    service = make_service()

    async def twice() -> list[int]:
        raw = body()
        first = await service.call("k1", raw, sign(KEY, raw))
        second = await service.call("k1", raw, sign(KEY, raw))
        return [first[0], second[0]]

    assert asyncio.run(twice()) == [200, 403]


def test_unknown_kernel_and_unknown_operation_are_refused() -> None:
    service = make_service()
    assert call(service, "nope", body(kernel_id="nope"))[0] == 403
    status, answer = call(service, "k1", body(op="rm -rf"))
    assert status == 404 and "unknown bridge operation" in answer["error"]


def test_long_calls_become_jobs_that_are_polled_to_the_result() -> None:
    service = make_service()

    async def scenario() -> tuple[int, Any, int, Any]:
        raw = body(payload={"delay": 0.5})
        status, answer = await service.call("k1", raw, sign(KEY, raw))
        poll = json.dumps(
            {"kernel_id": "k1", "ts": time.time(), "nonce": "n2", "job_id": answer["job_id"]}
        ).encode()
        status2, answer2 = await service.poll("k1", poll, sign(KEY, poll))
        while status2 == 202:
            poll = json.dumps(
                {
                    "kernel_id": "k1",
                    "ts": time.time(),
                    "nonce": uuid.uuid4().hex,
                    "job_id": answer["job_id"],
                }
            ).encode()
            status2, answer2 = await service.poll("k1", poll, sign(KEY, poll))
        return status, answer, status2, answer2

    status, answer, status2, answer2 = asyncio.run(scenario())
    assert status == 202 and answer["status"] == "pending"
    assert status2 == 200 and answer2["result"]["session_id"] == "session-1"


def test_another_kernel_cannot_poll_a_job() -> None:
    service = make_service()

    async def scenario() -> int:
        raw = body(payload={"delay": 0.5})
        _, answer = await service.call("k1", raw, sign(KEY, raw))
        poll = json.dumps(
            {"kernel_id": "k2", "ts": time.time(), "nonce": "x", "job_id": answer["job_id"]}
        ).encode()
        return (await service.poll("k2", poll, sign(b"other-key", poll)))[0]

    assert asyncio.run(scenario()) == 404


# ------------------------------------------------------------------ through the real server


@pytest.fixture
def jp_server_config(jp_server_config: dict[str, Any]) -> dict[str, Any]:
    """A server with a real token, to prove the kernel never gets it."""
    config = dict(jp_server_config)
    config["IdentityProvider"] = {"token": TOKEN}
    config["ServerApp"] = {**config["ServerApp"], "token": TOKEN}
    return config


@pytest.fixture(params=["connection key", "per-kernel secret"])
def key_source(request: pytest.FixtureRequest, host: Any) -> str:
    """What the host's kernels sign bridge calls with: their connection key (local kernels), or
    a per-kernel secret handed over at setup (a gateway's kernels, whose connection key the host
    does not hold: the same path, on local kernels)."""
    assert host.kernels.traits == LOCAL_KERNELS  # what a server without a gateway has
    if request.param == "per-kernel secret":
        host.kernels.traits = dataclasses.replace(LOCAL_KERNELS, holds_connection_key=False)
    return str(request.param)


async def execute_over_websocket(ws: Any, code: str, timeout: float = 30) -> str:
    """Run a cell the way a JupyterLab tab does, over the kernel's websocket."""
    msg_id = uuid.uuid4().hex
    ws.write_message(
        json.dumps(
            {
                "header": {
                    "msg_id": msg_id,
                    "msg_type": "execute_request",
                    "session": "browser-tab",
                    "username": "user",
                    "version": "5.3",
                    "date": "2026-11-29T00:00:00Z",
                },
                "parent_header": {},
                "metadata": {},
                "content": {
                    "code": code,
                    "silent": False,
                    "store_history": True,
                    "user_expressions": {},
                    "allow_stdin": False,
                    "stop_on_error": True,
                },
                "channel": "shell",
                "buffers": [],
            }
        )
    )
    out: list[str] = []
    async with asyncio.timeout(timeout):
        while True:
            raw = await ws.read_message()
            msg = json.loads(raw)
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = msg["header"]["msg_type"]
            if kind == "stream":
                out.append(msg["content"]["text"])
            elif kind == "error":
                out.append("\n".join(msg["content"]["traceback"]))
            elif kind == "status" and msg["content"]["execution_state"] == "idle":
                return "".join(out)


async def test_awaiting_cell_gets_its_reply_while_a_browser_client_is_attached(
    host: Any, jp_ws_fetch: Any, make_notebook: Any, key_source: str
) -> None:
    agent = await host.attach(make_notebook())
    await run_turn(host, agent.session_id, "warm up")  # loads prime_agent_kernel via the agent
    ws = await jp_ws_fetch("api", "kernels", agent.kernel.kernel_id, "channels")
    try:
        code = (
            "import prime_agent_kernel\n"
            "r = await prime_agent_kernel.client().acall('ping', {'delay': 0.3, 'echo': 'hi'})\n"
            "print(r['echo'], r['session_id'], r['kernel_id'])"
        )
        out = await execute_over_websocket(ws, code)
        assert out.split() == ["hi", agent.session_id, agent.kernel.kernel_id]

        # Identity comes from the signature; a payload naming another one is refused outright.
        forged = (
            "try:\n"
            "    await prime_agent_kernel.client().acall('ping', "
            "{'echo': 'hi', 'session_id': 'forged', 'kernel_id': 'forged'})\n"
            "except prime_agent_kernel.bridge.BridgeError as exc:\n"
            "    print('REFUSED', exc)\n"
        )
        out = await execute_over_websocket(ws, forged)
        assert out.startswith("REFUSED host refused the call (400): bridge operation ping takes")
        assert "not 'kernel_id', 'session_id'" in out

        # A call that outlives one HTTP request becomes a job; the cell still gets its answer.
        host.bridge._sync_wait = 0.1
        out = await execute_over_websocket(
            ws,
            "r = await prime_agent_kernel.client().acall('ping', {'delay': 0.5, 'echo': 'slow'})\n"
            "print(r['echo'])",
        )
        assert out.strip() == "slow"

        # `history` is the session's record as Python objects.
        out = await execute_over_websocket(
            ws,
            "cells = history.cells()\n"
            "print(len(cells), cells[0].cell_id is not None, 'INC-4471' in cells[-1].text)\n"
            "print(history.search('warm up')[0].type)",
        )
        assert out.split() == ["3", "True", "True", "user_message"]
    finally:
        ws.close()


async def test_kernel_holds_no_jupyter_token(
    host: Any, jp_ws_fetch: Any, make_notebook: Any, key_source: str
) -> None:
    agent = await host.attach(make_notebook())
    await run_turn(host, agent.session_id, "warm up")
    ws = await jp_ws_fetch("api", "kernels", agent.kernel.kernel_id, "channels")
    try:
        out = await execute_over_websocket(
            ws,
            "import os, prime_agent_kernel\n"
            "print(repr(vars(prime_agent_kernel.client())))\n"
            "print(repr(dict(os.environ)))",
        )
    finally:
        ws.close()
    assert "prime-agent/bridge" in out  # the dump really contains the bridge settings
    assert TOKEN not in out


async def test_bridge_http_refuses_unsigned_and_forged_requests(
    host: Any, jp_fetch: Any, make_notebook: Any, key_source: str
) -> None:
    agent = await host.attach(make_notebook())
    kernel_id = agent.kernel.kernel_id
    raw = json.dumps(
        {
            "kernel_id": kernel_id,
            "ts": time.time(),
            "nonce": "n",
            "op": "history.read",
            "payload": {},
        }
    )
    for headers in ({}, {SIGNATURE_HEADER: sign(b"guessed-key", raw.encode())}):
        response = await jp_fetch(
            "prime-agent",
            "bridge",
            "kernels",
            kernel_id,
            "call",
            method="POST",
            body=raw,
            headers=headers,
            raise_error=False,
        )
        assert response.code == 403


async def test_each_kernels_key_source_signs_and_forgery_replay_and_others_keys_fail(
    host: Any, jp_fetch: Any, make_notebook: Any, key_source: str
) -> None:
    one = await host.attach(make_notebook("one.ipynb"))
    two = await host.attach(make_notebook("two.ipynb"))
    for agent in (one, two):
        await run_turn(host, agent.session_id, "warm up")  # sets the kernel up (its secret)
    ids = [agent.kernel.kernel_id for agent in (one, two)]
    keys = [host.fleet.key(kernel_id) for kernel_id in ids]
    connection_keys = [bytes(host.fleet.manager(kernel_id).session.key) for kernel_id in ids]
    if key_source == "per-kernel secret":
        assert all(len(key) == 32 for key in keys)
        assert not set(keys) & set(connection_keys)
    else:
        assert keys == connection_keys
    assert keys[0] != keys[1]

    async def post(kernel_id: str, raw: bytes, key: bytes) -> tuple[int, Any]:
        response = await jp_fetch(
            *("prime-agent", "bridge", "kernels", kernel_id, "call"),
            method="POST",
            body=raw,
            headers={SIGNATURE_HEADER: sign(key, raw)},
            raise_error=False,
        )
        return response.code, json.loads(response.body or b"{}")

    def ping(kernel_id: str) -> bytes:
        fields = {"op": "ping", "payload": {"echo": "hi"}, "call_id": uuid.uuid4().hex}
        return body(kernel_id=kernel_id, **fields)

    raw = ping(ids[0])
    status, answer = await post(ids[0], raw, keys[0])
    assert (status, answer["result"]["session_id"]) == (200, one.session_id)
    assert (await post(ids[0], raw, keys[0]))[0] == 403  # replayed
    assert (await post(ids[0], ping(ids[0]), keys[1]))[0] == 403  # the other kernel's key
    assert (await post(ids[1], ping(ids[1]), keys[0]))[0] == 403
    if key_source == "per-kernel secret":  # the connection key signs nothing any more
        assert (await post(ids[0], ping(ids[0]), connection_keys[0]))[0] == 403


async def test_oversized_bridge_bodies_are_refused_before_they_are_read(
    host: Any, jp_fetch: Any, make_notebook: Any
) -> None:
    agent = await host.attach(make_notebook())
    huge = "x" * (MAX_BODY_BYTES + 1)
    response = await jp_fetch(
        "prime-agent",
        "bridge",
        "kernels",
        agent.kernel.kernel_id,
        "call",
        method="POST",
        body=huge,
        raise_error=False,
    )
    assert response.code in (400, 413)


def test_an_interrupted_call_can_be_cancelled_before_its_first_answer() -> None:
    service = make_service()

    async def scenario() -> tuple[int, Any, int]:
        raw = body(payload={"delay": 30}, call_id="call-123456")
        first = asyncio.ensure_future(service.call("k1", raw, sign(KEY, raw)))
        await asyncio.sleep(0.05)  # the first request is still waiting for its answer
        cancel = json.dumps(
            {
                "kernel_id": "k1",
                "ts": time.time(),
                "nonce": "c1",
                "job_id": "call-123456",
                "cancel": True,
            }
        ).encode()
        status, answer = await service.poll("k1", cancel, sign(KEY, cancel))
        await first
        return status, answer, service.jobs_in_flight

    status, answer, left = asyncio.run(scenario())
    assert (status, answer["error"], left) == (200, "the call was cancelled", 0)


def test_jobs_whose_kernel_stopped_polling_are_cancelled_and_forgotten() -> None:
    now = [time.time()]
    service = BridgeService(lambda kid: KEY, lambda kid: "s", sync_wait=0.01, clock=lambda: now[0])

    async def forever(caller: Caller, payload: dict[str, Any]) -> None:
        await asyncio.sleep(3600)

    service.register("forever", forever)

    async def scenario() -> tuple[int, int]:
        for i in range(5):
            raw = json.dumps(
                {"kernel_id": "k1", "ts": now[0], "nonce": f"n{i}", "op": "forever", "payload": {}}
            ).encode()
            await service.call("k1", raw, sign(KEY, raw))
        before = service.jobs_in_flight
        now[0] += 3600
        service._sweep_jobs()
        return before, service.jobs_in_flight

    assert asyncio.run(scenario()) == (5, 0)


def test_a_nan_timestamp_is_refused() -> None:
    service = make_service()
    raw = body().replace(b'"ts": ', b'"ts": NaN, "x": ', 1)
    status, answer = asyncio.run(service.call("k1", raw, sign(KEY, raw)))
    assert status == 403 and answer["error"] == "stale or missing timestamp"


async def test_a_users_own_history_variable_is_kept_and_the_record_is_agent_history(
    host: Any, jp_ws_fetch: Any, make_notebook: Any
) -> None:
    path = make_notebook()
    kernel_id = await host.resolve_kernel(path)  # the user's kernel, before any agent
    ws = await jp_ws_fetch("api", "kernels", kernel_id, "channels")
    try:
        await execute_over_websocket(ws, "history = {'loss': [0.9, 0.5]}")
        agent = await host.attach(path, kernel_id=kernel_id)
        await run_turn(host, agent.session_id, "warm up")  # loads the kernel package
        out = await execute_over_websocket(
            ws, "print(history['loss'], type(agent_history).__name__, len(agent_history.cells()))"
        )
    finally:
        ws.close()
    assert out.strip() == "[0.9, 0.5] History 3"


def test_a_payload_key_the_operation_does_not_declare_is_refused_before_its_handler_runs() -> None:
    ran: list[dict[str, Any]] = []
    service = BridgeService(
        lambda kid: KEY, lambda kid: "session-1", declared={"whoami": ("delay",)}, sync_wait=0.2
    )

    async def whoami(caller: Caller, payload: dict[str, Any]) -> str:
        ran.append(payload)
        return "ok"

    service.register("whoami", whoami)
    status, answer = call(service, "k1", body(payload={"delay": 0, "session_id": "session-2"}))
    assert status == 400
    assert answer["error"] == "bridge operation whoami takes delay, not 'session_id'"
    assert ran == []
    assert call(service, "k1", body(payload={"delay": 0}))[0] == 200
    assert ran == [{"delay": 0}]
