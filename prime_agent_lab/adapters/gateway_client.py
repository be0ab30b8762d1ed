"""The product's client of a kernel on a Jupyter gateway: jupyter_server's `GatewayKernelClient`
with the gaps measured in docs/gateway.md 1.3 filled (each small enough to offer upstream):

- every message it sends names its `channel`: without it the gateway's websocket handler logs
  the whole message at WARNING ("No channel specified, assuming shell", code and all) and sends
  control messages to the shell channel;
- the websocket is opened with the gateway's headers (its auth token, cookies), as jupyter_server
  sends on its HTTP requests: without them a gateway with a token refuses the connection;
- the websocket is opened in a thread, so the server's event loop does not stop for the
  handshake, and waiting for a message sleeps between looks instead of spinning the loop;
- the connect timeout bounds the handshake only, not every read (`open_channels`); a readiness
  check may give the handshake longer than `KERNEL_LAUNCH_TIMEOUT` (`connect`).

Imported only when a kernel manager is a gateway's (adapters/kernel_source.py).
"""

from __future__ import annotations

import asyncio
import time
from queue import Empty
from threading import Thread
from typing import Any

import websocket
from jupyter_client.asynchronous.client import AsyncKernelClient
from jupyter_client.session import new_id
from jupyter_core.utils import ensure_async
from jupyter_server.gateway.gateway_client import GatewayClient
from jupyter_server.gateway.managers import ChannelQueue, GatewayKernelClient, HBChannelQueue
from jupyter_server.utils import url_path_join
from tornado.escape import url_escape

from .gateway_gone import GatewayChannelsClosed

LOOK_EVERY = 0.005  # seconds between looks at an empty channel queue while a reader waits


async def connect(manager: Any, connect_timeout: float | None = None) -> GatewayKernelClient:
    """A started client of the gateway kernel `manager` holds, with its own session identity
    (`manager.client()` would share the manager's session id with every other client).

    `connect_timeout` bounds the websocket handshake (at least jupyter_server's
    `KERNEL_LAUNCH_TIMEOUT`, 40 s). A gateway holds the handshake until the kernel answers a
    `kernel_info_request` (its `kernel_info_timeout`, 60 s), so for a kernel just started the
    handshake is the wait for it to boot, and a readiness check gives it its own timeout."""
    if not manager.kernel_id:
        raise RuntimeError("the gateway kernel manager has no kernel yet")
    session = manager.session.clone()
    session.session = new_id()
    client = NamedChannelGatewayClient(kernel_id=manager.kernel_id, parent=manager, session=session)
    client.connect_timeout = connect_timeout
    await client.start_channels()
    return client


def open_channels(url: str, connect_timeout: float, **options: Any) -> websocket.WebSocket:
    """The kernel's channels websocket, connected within `connect_timeout`, then read without a
    timeout. websocket-client keeps the connect timeout for every read, so a kernel that said
    nothing for that long (40 s by default) ended the reader thread as if the gateway had closed
    the socket, and the next cell found its client dead; gateways that ping every 30 s hid it."""
    socket = websocket.create_connection(
        url, timeout=connect_timeout, enable_multithread=True, **options
    )
    socket.settimeout(None)
    return socket


class _NamedChannelQueue(ChannelQueue):
    def send(self, msg: dict[str, Any]) -> None:
        super().send({**msg, "channel": self.channel_name})

    async def _async_get(self, timeout: float | None = None) -> Any:
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        while True:
            try:
                return self.get(block=False)
            except Empty:
                if self.response_router_finished:
                    raise GatewayChannelsClosed(GatewayClient.instance().url or "") from None
                if deadline is not None and time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(LOOK_EVERY)


class _NamedHeartbeatQueue(_NamedChannelQueue, HBChannelQueue):
    pass


class NamedChannelGatewayClient(GatewayKernelClient):
    """`GatewayKernelClient` that names each message's channel, authenticates its websocket and
    connects without blocking the event loop."""

    connect_timeout: float | None = None  # at least jupyter_server's KERNEL_LAUNCH_TIMEOUT

    async def start_channels(
        self,
        shell: bool = True,
        iopub: bool = True,
        stdin: bool = True,
        hb: bool = True,
        control: bool = True,
    ) -> None:
        gateway = GatewayClient.instance()
        url = url_path_join(
            gateway.ws_url or "", gateway.kernels_endpoint, url_escape(self.kernel_id), "channels"
        )
        headers = gateway.load_connection_args().get("headers") or {}
        # Read after load_connection_args, which may change it (from the request timeout).
        timeout = max(gateway.KERNEL_LAUNCH_TIMEOUT, self.connect_timeout or 0)
        self.channel_socket = await asyncio.to_thread(
            open_channels,
            url,
            timeout,
            sslopt={
                "ca_certs": gateway.ca_certs,
                "certfile": gateway.client_cert,
                "keyfile": gateway.client_key,
            },
            header=[f"{name}: {value}" for name, value in headers.items()],
        )
        await ensure_async(
            AsyncKernelClient.start_channels(
                self, shell=shell, iopub=iopub, stdin=stdin, hb=hb, control=control
            )
        )
        self.response_router = Thread(target=self._route_responses, daemon=True)
        self.response_router.start()

    def _queue(self, name: str, cls: type[ChannelQueue] = _NamedChannelQueue) -> ChannelQueue:
        queue: ChannelQueue | None = getattr(self, f"_{name}_channel")
        if queue is None:
            assert self.channel_socket is not None and self._channel_queues is not None
            queue = cls(name, self.channel_socket, self.log)
            setattr(self, f"_{name}_channel", queue)
            self._channel_queues[name] = queue
        return queue

    @property
    def shell_channel(self) -> ChannelQueue:  # type: ignore[override]
        return self._queue("shell")

    @property
    def iopub_channel(self) -> ChannelQueue:  # type: ignore[override]
        return self._queue("iopub")

    @property
    def stdin_channel(self) -> ChannelQueue:  # type: ignore[override]
        return self._queue("stdin")

    @property
    def hb_channel(self) -> ChannelQueue:  # type: ignore[override]
        return self._queue("hb", _NamedHeartbeatQueue)

    @property
    def control_channel(self) -> ChannelQueue:  # type: ignore[override]
        return self._queue("control")
