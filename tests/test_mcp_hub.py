"""The host's MCP hub (prime_agent_lab/core/mcp/hub.py, docs/mcp.md) against two real MCP servers
written with the `mcp` SDK (tests/mcp_servers/): one over stdio, one over streamable HTTP."""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from prime_agent_lab.core.mcp.config import McpServerConfig, parse_mcp_config
from prime_agent_lab.core.mcp.errors import McpError
from prime_agent_lab.core.mcp.hub import McpHub
from prime_agent_lab.core.redaction import Redactor
from prime_agent_lab.core.settings import CLI, Settings

from .lab_process import free_port

SERVERS = Path(__file__).parent / "mcp_servers"
STDIO_SERVER = SERVERS / "papers_stdio.py"
HTTP_SERVER = SERVERS / "papers_http.py"
SECRET = "papers-token-5f2b9c41"
TIMEOUT = 20.0  # a call's bound where the test is not about timeouts (2 loaded cores)


def stdio_config(
    name: str = "papers", *, source: str = "test", linger: bool = False
) -> McpServerConfig:
    args = [str(STDIO_SERVER), *(["--linger"] if linger else [])]
    entry = {"command": sys.executable, "args": args, "env": {"PAPERS_TOKEN": SECRET}}
    (config,), problems = parse_mcp_config({name: entry}, source)
    assert problems == []
    return config


def http_config(port: int) -> McpServerConfig:
    entry = {"url": f"http://127.0.0.1:{port}/mcp", "headers": {"X-Papers-Token": SECRET}}
    (config,), _ = parse_mcp_config({"web": entry}, "test")
    return config


class HttpServer:
    """The HTTP papers server as a process on one port, to stop and start again."""

    def __init__(self) -> None:
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(HTTP_SERVER), "--port", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.process.poll() is None, "the HTTP test server exited"
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise TimeoutError(f"the HTTP test server did not listen on {self.port} within 30 s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None


@pytest.fixture
def http_server() -> Iterator[HttpServer]:
    server = HttpServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest_asyncio.fixture
async def hub() -> AsyncIterator[McpHub]:
    hub = McpHub(TIMEOUT, 100_000)
    try:
        yield hub
    finally:
        await hub.aclose()


async def server_pid(hub: McpHub, config: McpServerConfig) -> int:
    result = await hub.call_tool(config, "pid", {})
    return int(result["structured"]["result"])


def gone(pid: int) -> bool:
    """The process has exited (a zombie not yet reaped counts as exited)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in status


def wait_for(predicate: Any, bound: float) -> bool:
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


# ---------------------------------------------------------------- list, call, read


@pytest.mark.asyncio
async def test_a_stdio_server_lists_its_tools_and_answers_a_call_with_structured_results(
    hub: McpHub,
) -> None:
    config = stdio_config()
    assert (await hub.state(config))["state"] == "idle"  # nothing starts before the first use

    tools = await hub.list_tools(config)

    search = next(t for t in tools if t["name"] == "search")
    assert search["description"] == "Search the papers; results are structured."
    assert search["input_schema"]["required"] == ["query"]
    assert (await hub.state(config))["state"] == "ready"
    result = await hub.call_tool(config, "search", {"query": "recursive"})
    assert result["structured"] == {
        "query": "recursive",
        "results": [{"id": "2512.24601", "title": "Recursive Language Models"}],
    }
    assert result["is_error"] is False
    assert result["content"][0]["type"] == "text"
    assert 0 < result["chars"] < 1000


@pytest.mark.asyncio
async def test_an_http_server_lists_calls_and_reads_a_resource(
    hub: McpHub, http_server: HttpServer
) -> None:
    config = http_config(http_server.port)
    assert "search" in [t["name"] for t in await hub.list_tools(config)]
    result = await hub.call_tool(config, "search", {"query": "mistral"})
    assert result["structured"]["results"] == [{"id": "2310.06825", "title": "Mistral 7B"}]
    blocks = await hub.read_resource(config, "papers://2310.06825")
    assert blocks == [
        {
            "type": "resource",
            "uri": "papers://2310.06825",
            "text": "Mistral 7B (2310.06825): full text.",
            "mime_type": "text/plain",
        }
    ]


@pytest.mark.asyncio
async def test_a_resource_and_an_image_come_back_as_blocks(hub: McpHub) -> None:
    config = stdio_config()
    (block,) = await hub.read_resource(config, "papers://2512.24601")
    assert block["text"] == "Recursive Language Models (2512.24601): full text."
    image = await hub.call_tool(config, "image", {})
    (png,) = image["content"]
    assert (png["type"], png["mime_type"]) == ("image", "image/png")
    assert base64.b64decode(png["data"]).startswith(b"\x89PNG")


@pytest.mark.asyncio
async def test_an_is_error_result_is_returned_marked_as_an_error(hub: McpHub) -> None:
    result = await hub.call_tool(stdio_config(), "fail", {})
    assert result["is_error"] is True
    assert "the papers index is offline" in result["content"][0]["text"]


@pytest.mark.asyncio
async def test_an_unknown_tool_is_an_error_naming_the_server_the_tool_and_its_tools(
    hub: McpHub,
) -> None:
    with pytest.raises(McpError) as raised:
        await hub.call_tool(stdio_config(), "serch", {"query": "x"})
    assert str(raised.value).startswith(
        "papers.serch: no tool named 'serch' (its tools: search, slow,"
    )
    assert (raised.value.server, raised.value.tool) == ("papers", "serch")


@pytest.mark.asyncio
async def test_a_result_over_the_output_cap_is_refused_with_its_size_not_cut() -> None:
    hub = McpHub(TIMEOUT, 5_000, cap_setting="--mcp-output-cap")
    try:
        config = stdio_config()
        assert (await hub.call_tool(config, "big", {"chars": 1_000}))["chars"] < 5_000
        # the text comes as content and as structured content: the kernel keeps one, counted once
        assert (await hub.call_tool(config, "big", {"chars": 4_900}))["chars"] == 4_914
        with pytest.raises(McpError) as raised:
            await hub.call_tool(config, "big", {"chars": 20_000})
        assert str(raised.value) == (
            "papers.big: the result is 20,014 characters, over the cap of 5,000 "
            "(--mcp-output-cap); nothing of it was kept: ask for less"
        )
    finally:
        await hub.aclose()


# ---------------------------------------------------------------- timeouts and Stop


@pytest.mark.asyncio
async def test_a_call_past_the_timeout_is_cancelled_and_the_session_stays_usable(
    tmp_path: Path,
) -> None:
    hub = McpHub.from_settings(Settings(host=CLI, mcp_call_timeout=1.5))
    note = tmp_path / "note"
    try:
        config = stdio_config()
        pid = await server_pid(hub, config)
        started = time.monotonic()
        with pytest.raises(McpError) as raised:
            await hub.call_tool(config, "slow", {"seconds": 60, "note": str(note)})
        took = time.monotonic() - started
        assert str(raised.value) == "papers.slow: timed out after 1.5 s (--mcp-call-timeout)"
        assert 1.5 <= took < 6, took
        assert await asyncio.to_thread(
            wait_for, lambda: note.read_text().split() == ["started", "cancelled"], 5
        )
        assert await server_pid(hub, config) == pid  # the same session, still usable
    finally:
        await hub.aclose()


@pytest.mark.asyncio
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_cancelling_the_awaiting_task_cancels_the_request_and_keeps_the_session(
    hub: McpHub, http_server: HttpServer, tmp_path: Path, transport: str
) -> None:
    config = stdio_config() if transport == "stdio" else http_config(http_server.port)
    note = tmp_path / "note"
    pid = await server_pid(hub, config)
    call = asyncio.create_task(hub.call_tool(config, "slow", {"seconds": 60, "note": str(note)}))
    assert await asyncio.to_thread(wait_for, note.exists, 10)

    call.cancel()  # what Stop does to the bridge job awaiting the call
    with pytest.raises(asyncio.CancelledError):
        await call

    # the server saw notifications/cancelled and stopped the tool
    assert await asyncio.to_thread(
        wait_for, lambda: note.read_text().split() == ["started", "cancelled"], 5
    ), note.read_text()
    assert await server_pid(hub, config) == pid
    assert (await hub.state(config))["state"] == "ready"


@pytest.mark.asyncio
async def test_a_session_is_entered_and_left_in_its_own_task_whoever_starts_uses_and_closes_it(
    hub: McpHub,
) -> None:
    """The SDK's context managers hold anyio cancel scopes, which must be left by the task that
    entered them: a session started by a call that is then cancelled, used from other tasks and
    closed from yet another must not break (`exited a cancel scope in a different task`)."""
    loop = asyncio.get_running_loop()
    errors: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: errors.append(context))
    config = stdio_config()

    first = asyncio.create_task(hub.list_tools(config))
    await asyncio.sleep(0.2)  # the start is under way
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first

    pids = await asyncio.gather(*(asyncio.create_task(server_pid(hub, config)) for _ in range(3)))
    assert len(set(pids)) == 1  # the start went on; one session serves every caller
    await asyncio.create_task(hub.aclose())
    await hub.aclose()  # idempotent
    assert await asyncio.to_thread(wait_for, lambda: gone(pids[0]), 8)
    assert errors == []


# ---------------------------------------------------------------- servers that die


@pytest.mark.asyncio
async def test_a_stdio_server_that_crashed_is_started_again_by_the_next_call(hub: McpHub) -> None:
    config = stdio_config()
    pid = await server_pid(hub, config)

    with pytest.raises(McpError) as raised:
        await hub.call_tool(config, "crash", {})
    assert str(raised.value).startswith("papers.crash: the session ended during the call: ")
    assert (await hub.state(config))["state"] == "dead"

    assert await server_pid(hub, config) != pid
    assert (await hub.state(config))["state"] == "ready"


@pytest.mark.asyncio
async def test_a_stdio_server_that_exited_between_calls_is_started_again(hub: McpHub) -> None:
    config = stdio_config()
    pid = await server_pid(hub, config)
    os.kill(pid, 9)
    assert await asyncio.to_thread(wait_for, lambda: gone(pid), 5)
    await asyncio.sleep(0.2)
    assert await server_pid(hub, config) != pid


@pytest.mark.asyncio
async def test_an_http_server_stopped_then_restarted_on_its_port_is_reached_again(
    hub: McpHub, http_server: HttpServer
) -> None:
    config = http_config(http_server.port)
    first = await server_pid(hub, config)

    http_server.stop()
    with pytest.raises(McpError) as raised:
        await hub.call_tool(config, "pid", {})
    assert str(raised.value).startswith("web: could not start: ConnectError")
    assert (await hub.state(config))["state"] == "error"

    http_server.start()
    second = await server_pid(hub, config)
    assert second != first

    # restarted with no call in between: the server no longer knows the session (404), so
    # the call never reached it and is sent once more on a new session
    http_server.stop()
    http_server.start()
    assert await server_pid(hub, config) not in (first, second)


@pytest.mark.asyncio
async def test_a_missing_command_is_a_clear_error_and_the_state_says_it(hub: McpHub) -> None:
    (config,), _ = parse_mcp_config({"gone": {"command": "no-such-mcp-server-xyz"}}, "test")
    with pytest.raises(McpError) as raised:
        await hub.list_tools(config)
    assert str(raised.value) == "gone: could not start: no such command: no-such-mcp-server-xyz"
    assert await hub.state(config) == {
        "state": "error",
        "error": "no such command: no-such-mcp-server-xyz",
    }


@pytest.mark.asyncio
async def test_a_server_that_exits_at_start_is_an_error_quoting_its_stderr(hub: McpHub) -> None:
    code = "import os, sys; sys.exit('no database at ' + os.environ['DB_TOKEN'])"
    entry = {"command": sys.executable, "args": ["-c", code], "env": {"DB_TOKEN": SECRET}}
    (config,), _ = parse_mcp_config({"db": entry}, "test")
    with pytest.raises(McpError) as raised:
        await hub.call_tool(config, "query", {})
    assert str(raised.value) == (  # its stderr quoted, the secret redacted
        "db: could not start: the server closed the connection "
        "(its stderr: no database at [redacted])"
    )


@pytest.mark.asyncio
async def test_a_server_that_never_answers_its_start_says_so_with_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from prime_agent_lab.core.mcp import hub as hub_module

    monkeypatch.setattr(hub_module, "MIN_START_TIMEOUT", 1.0)
    hub = McpHub(0.5, 100_000)
    entry = {"command": sys.executable, "args": ["-c", "import time; time.sleep(60)"]}
    (config,), _ = parse_mcp_config({"mute": entry}, "test")
    try:
        with pytest.raises(McpError) as raised:
            await hub.list_tools(config)
        assert str(raised.value) == "mute: could not start: did not answer its start within 1 s"
    finally:
        await hub.aclose()


NOISY = (
    "import sys; sys.stderr.write('stale start noise\\n'); sys.stderr.flush(); "
    f"sys.path.insert(0, {str(SERVERS)!r}); from papers import server; server.run('stdio')"
)


@pytest.mark.asyncio
async def test_a_crash_quotes_only_the_stderr_written_since_the_call_began(hub: McpHub) -> None:
    (config,), _ = parse_mcp_config(
        {"noisy": {"command": sys.executable, "args": ["-c", NOISY]}}, "t"
    )
    await server_pid(hub, config)
    with pytest.raises(McpError) as raised:
        await hub.call_tool(config, "crash", {})
    assert str(raised.value).startswith("noisy.crash: the session ended during the call: ")
    assert "stale start noise" not in str(raised.value)


# ---------------------------------------------------------------- close


@pytest.mark.asyncio
async def test_close_kills_a_stdio_server_that_ignores_its_stdin_closing() -> None:
    hub = McpHub(TIMEOUT, 100_000)
    config = stdio_config(linger=True)
    pid = await server_pid(hub, config)

    started = time.monotonic()
    await hub.aclose()
    took = time.monotonic() - started

    assert await asyncio.to_thread(wait_for, lambda: gone(pid), 3), "the server still runs"
    assert took < 8, took
    with pytest.raises(McpError, match="papers: the MCP sessions are closed"):
        await hub.list_tools(config)


@pytest.mark.asyncio
async def test_closing_during_a_call_and_during_a_start_ends_both_at_once() -> None:
    hub = McpHub(TIMEOUT, 100_000)
    busy, starting = stdio_config("busy"), stdio_config("starting")
    await server_pid(hub, busy)
    call = asyncio.create_task(hub.call_tool(busy, "slow", {"seconds": 60}))
    start = asyncio.create_task(hub.list_tools(starting))
    await asyncio.sleep(0.3)

    started = time.monotonic()
    await hub.aclose()

    assert time.monotonic() - started < 8
    with pytest.raises(McpError) as ended:
        await call
    assert str(ended.value) == "busy.slow: the session ended during the call: it was closed"
    with pytest.raises(McpError) as stopped:
        await start
    assert str(stopped.value) == "starting: could not start: closed while it started"


# ---------------------------------------------------------------- sessions and secrets


@pytest.mark.asyncio
async def test_two_servers_of_one_name_from_two_places_get_a_session_each(hub: McpHub) -> None:
    here = stdio_config(source="project: a/.mcp.json")
    there = stdio_config(source="project: b/.mcp.json")
    assert await server_pid(hub, here) != await server_pid(hub, there)
    assert await server_pid(hub, here) == await server_pid(hub, here)


@pytest.mark.asyncio
async def test_the_server_gets_its_secret_and_the_host_only_redacts_it(hub: McpHub) -> None:
    config = stdio_config()
    result = await hub.call_tool(config, "secret_used", {})
    assert result["structured"] == {"set": True}
    assert SECRET not in str(result)
    assert SECRET not in os.environ.values()  # kernels inherit the host's environment
    assert Redactor.from_environ().text(f"token={SECRET}") == "token=[redacted]"


@pytest.mark.asyncio
async def test_an_http_server_gets_its_headers(hub: McpHub, http_server: HttpServer) -> None:
    config = http_config(http_server.port)
    assert (await hub.call_tool(config, "header_used", {}))["structured"] == {"set": True}


@pytest.mark.asyncio
async def test_an_http_error_names_the_url_without_its_query_or_userinfo(
    hub: McpHub, http_server: HttpServer
) -> None:
    url = f"http://me:pw-SEKRIT-1@127.0.0.1:{http_server.port}/nope?api_key=q-SEKRIT-2"
    (config,), _ = parse_mcp_config({"web": {"url": url}}, "test")
    with pytest.raises(McpError) as raised:
        await hub.list_tools(config)
    message = str(raised.value)
    assert message.startswith("web: ")
    assert "SEKRIT" not in message and "pw-" not in message, message
    assert "SEKRIT" not in (await hub.state(config))["error"]
