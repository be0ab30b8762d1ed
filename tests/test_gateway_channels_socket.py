"""The websocket a gateway kernel's client reads: quiet kernels do not end it."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import tornado.web
import tornado.websocket

from prime_agent_lab.adapters.gateway_client import open_channels


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
