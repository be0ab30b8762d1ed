"""The websocket a gateway kernel's client reads: quiet kernels do not end it, and a
handshake the gateway holds while the kernel boots is waited for as long as readiness is."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
import tornado.web
import tornado.websocket
from jupyter_server.gateway.gateway_client import GatewayClient
from jupyter_server.gateway.managers import GatewayKernelManager
from websocket import WebSocketTimeoutException

from prime_agent_lab.adapters.gateway_client import connect, open_channels


class _Quiet(tornado.websocket.WebSocketHandler):
    """A gateway that says nothing (and never pings) until told to."""

    opened: list[_Quiet] = []

    def open(self, *args: Any, **kwargs: Any) -> None:
        _Quiet.opened.append(self)


async def test_a_kernel_quiet_for_longer_than_the_connect_timeout_keeps_its_reader() -> None:
    server = tornado.web.Application([(r"/channels", _Quiet)]).listen(0, "127.0.0.1")
    port = next(iter(server._sockets.values())).getsockname()[1]
    connect_timeout = 0.5
    socket = await asyncio.to_thread(
        open_channels, f"ws://127.0.0.1:{port}/channels", connect_timeout
    )
    read: list[Any] = []
    reader = threading.Thread(target=lambda: read.append(_recv(socket)), daemon=True)
    reader.start()
    try:
        await asyncio.sleep(connect_timeout * 4)  # quiet well past the connect timeout
        assert reader.is_alive(), read
        await _Quiet.opened[-1].write_message('{"channel": "iopub"}')
        await asyncio.to_thread(reader.join, 5)
        assert read == ['{"channel": "iopub"}']
    finally:
        socket.close()
        server.stop()


def _recv(socket: Any) -> Any:
    try:
        return socket.recv()
    except Exception as exc:  # what ended the gateway's reader thread before
        return repr(exc)


class _HeldHandshake(tornado.websocket.WebSocketHandler):
    """A gateway that answers a kernel's channels handshake only after `HOLD` seconds, as
    jupyter_server does until a kernel still booting answers its `kernel_info_request`."""

    HOLD = 1.5

    async def get(self, *args: Any, **kwargs: Any) -> None:
        await asyncio.sleep(self.HOLD)
        await super().get(*args, **kwargs)


async def test_a_readiness_check_waits_for_a_handshake_held_past_the_launch_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CI on b13f01d: a pooled kernel started with three others on Enterprise Gateway under load
    failed with 'started but did not answer: WebSocketTimeoutException' after the 40 s
    `KERNEL_LAUNCH_TIMEOUT`, though a kernel may take READY_TIMEOUT (60 s) to answer."""
    server = tornado.web.Application([(r"/api/kernels/([^/]+)/channels", _HeldHandshake)]).listen(
        0, "127.0.0.1"
    )
    port = next(iter(server._sockets.values())).getsockname()[1]
    monkeypatch.setattr(GatewayClient, "KERNEL_LAUNCH_TIMEOUT", 0.5)
    monkeypatch.setenv("KERNEL_LAUNCH_TIMEOUT", "0.5")  # jupyter_server writes it there too
    GatewayClient.clear_instance()  # a request timeout of launch + pad keeps the launch timeout
    GatewayClient.instance(
        url=f"http://127.0.0.1:{port}", request_timeout=1.0, launch_timeout_pad=0.5
    )
    try:
        manager = GatewayKernelManager()
        manager.kernel_id = "6f0c1f1e-held"
        with pytest.raises(WebSocketTimeoutException):  # the launch timeout alone: cut off
            await connect(manager)
        client = await connect(manager, connect_timeout=_HeldHandshake.HOLD * 4)
        try:
            assert client.channel_socket is not None and client.channel_socket.connected
        finally:  # in a thread: the close handshake needs this loop, which runs the gateway
            await asyncio.to_thread(client.stop_channels)
    finally:
        GatewayClient.clear_instance()
        server.stop()
