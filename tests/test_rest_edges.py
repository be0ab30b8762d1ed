"""Bad input at the edges of the server: REST bodies, attach, the events websocket, the bridge.

Each gets a clear 4xx answer, creates nothing, and holds no more memory than a bound.
"""

from __future__ import annotations

import asyncio
import gc
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from prime_agent_lab.core.bridge import BridgeService, sign
from prime_agent_lab.core.bridge_ops import register_session_operations
from prime_agent_lab.jupyter.handlers import EventsHandler
from prime_agent_lab.jupyter.host import HostError

from .conftest import next_event, use_script, wait_for


async def post(jp_fetch: Any, *route: str, body: Any) -> Any:
    raw = body if isinstance(body, str | bytes) else json.dumps(body)
    return await jp_fetch("prime-agent", "api", *route, method="POST", body=raw, raise_error=False)


def message_of(response: Any) -> str:
    return str(json.loads(response.body)["message"])


# ------------------------------------------------------------------ REST bodies


async def test_fields_of_the_wrong_type_are_refused_with_400_and_start_nothing(
    jp_fetch: Any, host: Any, jp_serverapp: Any, make_notebook: Any
) -> None:
    path = make_notebook("types.ipynb")
    cases = [
        ({"notebook_path": path, "kernel_id": ["k"]}, "kernel_id must be a string, not an array"),
        ({"notebook_path": path, "kernel_id": {"k": 1}}, "kernel_id must be a string, not an obj"),
        ({"notebook_path": path, "new": "false"}, "new must be true or false (a JSON boolean)"),
        ({"notebook_path": path, "new": 1}, "new must be true or false (a JSON boolean)"),
        ({"notebook_path": 5}, "notebook_path must be a string, not a number"),
        ({"notebook_path": path, "session_id": 7}, "session_id must be a string, not a number"),
    ]
    for body, expected in cases:
        response = await post(jp_fetch, "sessions", body=body)
        assert (response.code, expected in message_of(response)) == (400, True), body
    bind = await post(jp_fetch, "bindings", body={"path": path, "kernel_id": ["k"]})
    assert bind.code == 400 and "kernel_id must be a string" in message_of(bind)

    assert host.repository.summaries() == []
    assert list(jp_serverapp.kernel_manager.list_kernel_ids()) == []


async def test_a_message_over_the_limit_is_refused_with_413_and_never_stored(
    jp_fetch: Any, host: Any, make_notebook: Any
) -> None:
    agent = await host.attach(make_notebook("long.ipynb"))

    too_long = await post(
        jp_fetch, "sessions", agent.session_id, "messages", body={"text": "x" * 100_001}
    )
    huge_body = await post(
        jp_fetch, "sessions", agent.session_id, "messages", body=b'{"text": "' + b"x" * 30_000_000
    )

    assert too_long.code == 413
    assert "100,001 characters; the limit is 100,000" in message_of(too_long)
    assert "max_message_chars" in message_of(too_long)
    assert huge_body.code == 413
    assert agent.session.entries == [] and not agent.running


async def test_error_messages_never_echo_unbounded_input_and_show_percent_once(
    jp_fetch: Any, host: Any
) -> None:
    huge = "a" * 1_000_000 + ".ipynb"

    missing = await post(jp_fetch, "sessions", body={"notebook_path": huge})
    percent = await post(jp_fetch, "sessions", body={"notebook_path": "100%.ipynb"})

    assert missing.code == 404 and len(missing.body) < 500
    assert "1,000,008 characters" in message_of(missing)
    assert (percent.code, message_of(percent)) == (404, "no notebook at '100%.ipynb'")


@pytest.mark.parametrize(
    ("route", "phrase"),
    [
        (("sessions", "-not-an-id"), "no such API route"),
        (("sessions", "20260101-000000-abcdef", "nope"), "no such API route"),
        (("nope",), "no such API route"),
        (("sessions", "20260101-000000-abcdef", "events"), "no attached session"),
    ],
)
async def test_unknown_api_routes_and_sessions_answer_a_json_404(
    jp_fetch: Any, host: Any, route: tuple[str, ...], phrase: str
) -> None:
    got = await jp_fetch("prime-agent", "api", *route, raise_error=False)
    posted = await post(jp_fetch, *route, body={})

    for response in (got, posted):
        assert response.code in (404, 405)
        assert response.headers["Content-Type"].startswith("application/json")
    assert got.code == 404 and phrase in message_of(got)


# ------------------------------------------------------------------ attach


def track_providers(host: Any) -> tuple[list[Any], list[Any]]:
    """Providers the host makes, and those it closed."""
    made: list[Any] = []
    closed: list[Any] = []
    factory = host._provider_factory

    def tracked() -> Any:
        provider = factory()

        async def aclose() -> None:
            closed.append(provider)

        provider.aclose = aclose
        made.append(provider)
        return provider

    host._provider_factory = tracked
    return made, closed


async def test_a_refused_attach_creates_no_session_and_leaves_no_provider_open(
    host: Any, make_notebook: Any, agent_script: Any, monkeypatch: Any
) -> None:
    script = agent_script([{"code": "import time\ntime.sleep(30)"}, {"text": "done"}])
    use_script(host, script)
    made, closed = track_providers(host)
    path = make_notebook("busy.ipynb")
    agent = await host.attach(path)
    events = agent.events.subscribe()
    await host.send(agent.session_id, "sleep")
    await next_event(events, "cell_started")

    with pytest.raises(HostError) as refused:
        await host.attach(path, new=True)

    assert refused.value.status == 409
    assert [s.session_id for s in host.repository.summaries()] == [agent.session_id]
    assert all(p in closed for p in made[1:])
    await host.stop(agent.session_id)
    assert host.repository.latest_for_notebook(path) == agent.session_id

    def disk_full(**header: Any) -> Any:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(host.repository, "create", disk_full)
    with pytest.raises(OSError):
        await host.attach(path, new=True)
    assert len(made) >= 2 and all(p in closed for p in made[1:])
    assert list(host.agents) == [agent.session_id]


def held_for(host: Any, session_id: str, kernel_id: str) -> dict[str, bool]:
    """What the runtime keeps for a session: the attached agent, the kernel whose bridge calls
    act as it, its refiner and auto-refine gate, a snapshot restore waiting for its kernel."""
    runtime = host.runtime
    return {
        "agent": session_id in runtime.agents,
        "kernel": runtime._kernel_session.get(kernel_id) == session_id,
        "refiner": runtime.refiners.get(session_id) is not None,
        "auto_refine": runtime.refiners.auto(session_id) is not None,
        "snapshot_due": session_id in runtime.snapshots._due,
    }


async def test_an_attach_that_fails_after_the_agent_was_registered_undoes_what_detach_undoes(
    host: Any, make_notebook: Any, agent_script: Any, monkeypatch: Any
) -> None:
    use_script(host, agent_script([{"text": "done"}]))
    made, closed = track_providers(host)
    kept = await host.attach(make_notebook("kept.ipynb"))
    kept_kernel = kept.kernel.kernel_id
    held = held_for(host, kept.session_id, kept_kernel)
    assert [what for what, kept_it in held.items() if kept_it] == [
        "agent",
        "kernel",
        "refiner",
        "auto_refine",
    ]
    await host.runtime.detach(kept)
    detached = held_for(host, kept.session_id, kept_kernel)
    use_kernel = host._use_kernel

    def bind_then_fail(agent: Any, kernel_id: str) -> None:
        use_kernel(agent, kernel_id)
        raise OSError(28, "No space left on device")  # the attach's next write

    monkeypatch.setattr(host, "_use_kernel", bind_then_fail)
    path = make_notebook("failing.ipynb")
    with pytest.raises(OSError):
        await host.attach(path)

    (failed,) = [s.session_id for s in host.repository.summaries() if s.notebook_path == path]
    kernel_id = await host.resolve_kernel(path)
    assert held_for(host, failed, kernel_id) == detached
    assert not any(detached.values())
    assert made[-1] is not made[0] and all(p in closed for p in made)


async def test_hidden_and_unreadable_notebooks_are_refused_before_any_kernel_starts(
    jp_fetch: Any, host: Any, jp_serverapp: Any, make_notebook: Any, jp_root_dir: Path
) -> None:
    make_notebook(".secret.ipynb")
    make_notebook(".hidden/inner.ipynb")
    (jp_root_dir / "broken.ipynb").write_text("this is not a notebook")
    cases = [
        (".secret.ipynb", 403, "is hidden"),
        (".hidden/inner.ipynb", 403, "is hidden"),
        ("broken.ipynb", 400, "cannot open 'broken.ipynb' as a notebook"),
    ]

    for path, status, phrase in cases:
        response = await post(jp_fetch, "sessions", body={"notebook_path": path})
        assert (response.code, phrase in message_of(response)) == (status, True), path

    assert list(jp_serverapp.kernel_manager.list_kernel_ids()) == []
    assert host.repository.summaries() == []


# ------------------------------------------------------------------ the events websocket

MESSAGE_CHARS = 32_000
BUFFERED_BOUND = 4 * MESSAGE_CHARS  # one message in flight, its frame, a close frame: well under


def events_handler_of(agent: Any) -> Any:
    for obj in gc.get_objects():
        if isinstance(obj, EventsHandler) and getattr(obj, "_agent", None) is agent:
            return obj
    return None


def buffered_bytes(handler: Any) -> int:
    """Bytes the server holds for this client that the socket has not taken yet."""
    connection = handler.ws_connection
    if connection is None or connection.stream is None:
        return 0
    return len(connection.stream._write_buffer)


async def test_a_client_that_never_reads_holds_a_bounded_amount_on_the_server(
    jp_ws_fetch: Any, host: Any, make_notebook: Any, monkeypatch: Any
) -> None:
    monkeypatch.setattr(EventsHandler, "stall_timeout", 1.0, raising=False)
    agent = await host.attach(make_notebook("events.ipynb"))
    for _ in range(2000):  # a full replay buffer of 64 MB
        agent.events.emit("text_delta", turn=1, text="x" * MESSAGE_CHARS)

    ws = await jp_ws_fetch(
        "prime-agent", "api", "sessions", agent.session_id, "events", params={"since": "0"}
    )  # and never read from it
    handler = await wait_for(lambda: events_handler_of(agent))
    peak = 0

    def stalled_client_dropped() -> bool:
        nonlocal peak
        peak = max(peak, buffered_bytes(handler))
        assert peak <= BUFFERED_BOUND, f"the server holds {peak:,} bytes for one client"
        return not agent.events.is_subscribed(handler._queue)

    await wait_for(stalled_client_dropped, timeout=30)
    ws.close()


# ------------------------------------------------------------------ the bridge

KEY = b"kernel-key"


@pytest.mark.parametrize(
    "delay", ["NaN", "Infinity", "-Infinity", "1e400", "-1", "61", '"5"', "true"]
)
def test_ping_refuses_a_delay_that_is_not_a_finite_number_of_seconds(delay: str) -> None:
    service = BridgeService(
        lambda kid: KEY if kid == "k1" else None,
        lambda kid: "s1" if kid == "k1" else None,
        sync_wait=0.5,
    )
    register_session_operations(service, lambda _sid: None)  # type: ignore[arg-type,return-value]
    nonce = uuid.uuid4().hex
    raw = (
        f'{{"kernel_id": "k1", "ts": {time.time()}, "nonce": "{nonce}", "op": "ping", '
        f'"payload": {{"delay": {delay}}}}}'
    ).encode()

    status, answer = asyncio.run(service.call("k1", raw, sign(KEY, raw)))

    assert status == 400, answer
    assert "delay must be a number from 0 to 60" in answer["error"]


def test_ping_with_a_valid_delay_still_answers() -> None:
    service = BridgeService(lambda kid: KEY, lambda kid: "s1", sync_wait=5)
    register_session_operations(service, lambda _sid: None)  # type: ignore[arg-type,return-value]
    raw = json.dumps(
        {
            "kernel_id": "k1",
            "ts": time.time(),
            "nonce": "n",
            "op": "ping",
            "payload": {"delay": 0.01, "echo": "hi"},
        }
    ).encode()

    status, answer = asyncio.run(service.call("k1", raw, sign(KEY, raw)))

    assert (status, answer["result"]["echo"]) == (200, "hi")
