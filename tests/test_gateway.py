"""Agent kernels on a Jupyter Kernel Gateway run as another Unix user (issue 20, docs/gateway.md
part 4): the server has `--gateway-url`, the agent is attached over REST, and its cell runs on
the gateway, as the gateway's user in its folder, with the bridge answering through a per-kernel
secret that no log, notebook or session file holds."""

from __future__ import annotations

import asyncio
import json
import pwd
import time
import uuid
from pathlib import Path
from typing import Any

import nbformat
import pytest
import websocket

from prime_agent_lab.core.sessions import SESSION_FILE

from .gateway_fixtures import (
    KernelGateway,
    server_on_a_notebook,
)
from .lab_process import LabServer, shutdown

# The gateway and a server start within the test's time (10 to 34 s measured for the gateway).
pytestmark = [pytest.mark.gateway, pytest.mark.timeout(360)]

CELL = (
    "import os\n"
    "usage = await rlm.usage()\n"
    "print('ran', os.getuid(), os.getcwd(), type(usage).__name__)"
)
SCRIPT: dict[str, Any] = {"turns": [{"code": CELL}, {"text": "DONE {last_output_line}"}]}


def wait_until(predicate: Any, what: str, server: LabServer, timeout: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"{what}: not within {timeout} s\n--- server log ---\n{server.log_tail()}")


def kernel_probe(gateway: KernelGateway, kernel_id: str, code: str) -> str:
    """Run `code` on a gateway kernel over the gateway's own websocket (not the server's, not
    the notebook's: nothing of it is stored anywhere); its printed output."""
    return run_over_channels(
        f"ws://{gateway.url.removeprefix('http://')}/api/kernels/{kernel_id}/channels",
        gateway.token,
        code,
    )


def run_over_channels(url: str, token: str, code: str, store_history: bool = False) -> str:
    """Run `code` through a kernel's channels websocket at `url` (the gateway's, or a server's
    as a notebook tab uses it; a tab's cells are `store_history`); its printed output."""
    socket = websocket.create_connection(url, header=[f"Authorization: token {token}"], timeout=60)
    try:
        msg_id = uuid.uuid4().hex
        header = {"msg_id": msg_id, "msg_type": "execute_request", "session": uuid.uuid4().hex}
        content = {
            "code": code,
            "silent": False,
            "store_history": store_history,
            "allow_stdin": False,
        }
        request = {"header": {**header, "username": "probe", "version": "5.3"}, "channel": "shell"}
        socket.send(
            json.dumps({**request, "parent_header": {}, "metadata": {}, "content": content})
        )
        out: list[str] = []
        while True:
            msg = json.loads(socket.recv())
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = msg["msg_type"]
            if kind == "stream":
                out.append(msg["content"]["text"])
            elif kind == "error":
                out.append("\n".join(msg["content"]["traceback"]))
            elif kind == "status" and msg["content"]["execution_state"] == "idle":
                return "".join(out)
    finally:
        socket.close()


def files_text(folder: Path) -> str:
    return "\n".join(
        path.read_text(errors="replace") for path in sorted(folder.rglob("*")) if path.is_file()
    )


def test_an_agent_cell_runs_on_the_gateway_as_its_user_and_the_bridge_answers(
    tmp_path: Path,
    any_gateway: KernelGateway,
) -> None:
    base, server = server_on_a_notebook(tmp_path, any_gateway, SCRIPT)
    try:
        started = time.monotonic()
        session = server.api(
            "POST", "prime-agent/api/sessions", {"notebook_path": "analysis.ipynb"}
        )
        session_id = session["session_id"]
        server.api("POST", f"prime-agent/api/sessions/{session_id}/messages", {"text": "go"})
        log_path = base / "sessions" / session_id / SESSION_FILE
        wait_until(
            lambda: log_path.exists() and "DONE" in log_path.read_text(), "the turn ends", server
        )
        turn_seconds = time.monotonic() - started

        entries = [json.loads(line) for line in log_path.read_text().splitlines() if line]
        said = [e["text"] for e in entries if e.get("type") == "assistant_message"]
        assert said and said[-1].startswith("DONE"), entries
        user = pwd.getpwnam(any_gateway.user)
        assert said[-1].split() == [
            "DONE",
            "ran",
            str(user.pw_uid),
            str(any_gateway.home / "work"),
            "AgentUsage",
        ], (said[-1], server.log_tail())

        (notebook_session,) = [
            model
            for model in server.api("GET", "api/sessions")
            if model["path"] == "analysis.ipynb"
        ]
        kernel = notebook_session["kernel"]
        server_kernels = {model["id"] for model in server.api("GET", "api/kernels")}
        assert kernel["id"] in server_kernels <= any_gateway.kernel_ids()

        # The kernel's bridge key, reversed so this probe's output is not the secret itself.
        probe = kernel_probe(
            any_gateway,
            kernel["id"],
            "import prime_agent_kernel\n"
            "key = prime_agent_kernel.client()._key\n"
            "print(key.hex()[::-1], key == get_ipython().kernel.session.key)",
        )
        reversed_hex, same_as_connection_key = probe.split()
        secret = reversed_hex[::-1]
        assert len(bytes.fromhex(secret)) == 32
        assert same_as_connection_key == "False"  # not the connection key the gateway made

        notebook_path = base / "root" / "analysis.ipynb"
        notebook_text = wait_until(  # the live notebook is saved a moment after the cell
            lambda: "AgentUsage" in (text := notebook_path.read_text()) and text,
            "the notebook is saved with the agent's cell",
            server,
        )
        # A notebook the user opens starts its kernel through jupyter_server's own sessions API.
        nbformat.write(nbformat.v4.new_notebook(), base / "root" / "mine.ipynb")
        opened = server.api(
            "POST",
            "api/sessions",
            {"path": "mine.ipynb", "type": "notebook", "kernel": {"name": "python3"}},
        )
        assert opened["kernel"]["id"] in any_gateway.kernel_ids()
        server_log = server.log_path.read_text(errors="replace")
        assert "GatewayKernelManager started kernel:" in server_log  # the line is still there
        for where, text in (
            ("the gateway's log", any_gateway.log()),
            ("the notebook", notebook_text),
            ("the session folder", files_text(base / "sessions")),
            ("the server's log", server_log),
        ):
            assert secret not in text, f"the per-kernel secret is in {where}"
            assert any_gateway.token not in text, f"the gateway's auth token is in {where}"
        assert "No channel specified" not in any_gateway.log()
        print(f"attach + first turn on the gateway: {turn_seconds:.1f} s")
    finally:
        shutdown(server)


def test_the_products_gateway_client_has_its_own_session_and_names_each_channel(
    kernel_gateway: KernelGateway,
) -> None:
    """In this process, jupyter_server's own gateway manager: `new_client` passes the kernel id,
    awaits the websocket (with the gateway's token, which it requires), gives every client its
    own session id, and a control request is answered on the control channel (jupyter_server's
    client leaves out `channel`, and the gateway sends such a message to the shell)."""
    from jupyter_server.gateway.gateway_client import GatewayClient
    from jupyter_server.gateway.managers import GatewayMappingKernelManager

    from prime_agent_lab.adapters.kernel_source import GATEWAY_KERNELS, new_client, traits_of

    async def scenario(kernels: Any) -> None:
        kernel_id = await kernels.start_kernel(kernel_name="python3")
        manager = kernels.get_kernel(kernel_id)
        clients = [await new_client(manager) for _ in range(2)]
        try:
            sessions = {client.session.session for client in clients}
            assert len(sessions) == 2 and manager.session.session not in sessions
            for client in clients:
                await client.wait_for_ready(timeout=60)
            control = clients[0]
            request = control.session.msg("kernel_info_request")
            control.control_channel.send(request)
            deadline = time.monotonic() + 30
            while True:
                reply = await control.control_channel.get_msg(timeout=deadline - time.monotonic())
                if reply["parent_header"].get("msg_id") == request["header"]["msg_id"]:
                    break
            assert reply["msg_type"] == "kernel_info_reply"
        finally:
            for client in clients:
                client.stop_channels()
            await kernels.shutdown_kernel(kernel_id, now=True)

    GatewayClient.clear_instance()
    GatewayClient.instance(url=kernel_gateway.url, auth_token=kernel_gateway.token)
    try:
        kernels = GatewayMappingKernelManager()
        assert traits_of(kernels) == GATEWAY_KERNELS
        asyncio.run(scenario(kernels))
    finally:
        GatewayClient.clear_instance()  # a singleton: later servers in this process are local
    assert "No channel specified" not in kernel_gateway.log()
