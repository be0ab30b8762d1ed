"""Kernel websockets that open at once, even while a cell runs on the kernel.

jupyter_server 2.x holds a kernel websocket's upgrade until the kernel answers a
`kernel_info_request` on its shell channel (`ZMQChannelsWebsocketConnection.prepare`, for at most
`kernel_info_timeout`, 60 s), and the shell channel answers only between cells. The answer is
cached per kernel, so only a kernel that no websocket reached before its cell started makes the
browser wait: an agent's kernel is exactly that (the pool starts it, the agent runs its cells
through a client of the server's own, and the user opens the notebook while one runs). The browser
holds every other websocket of the tab (the chat's events, each document's) behind a handshake in
progress, so the whole tab stalls until the cell ends.

This connection asks the kernel the same question but does not wait for the answer while the
kernel is busy: it goes on as jupyter_server itself does when the answer never comes (the
client's protocol version is assumed). The request stays queued in the kernel; its reply, once
the cell ends, still adapts this connection and fills the cache for later ones.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from jupyter_server.services.kernels.connection.channels import ZMQChannelsWebsocketConnection
from traitlets import HasTraits

log = logging.getLogger(__name__)

SETTING = "kernel_websocket_connection_class"
BUSY = "busy"


class NonBlockingKernelWebsocketConnection(ZMQChannelsWebsocketConnection):
    """A kernel websocket connection whose connect never waits on a busy shell channel."""

    def request_kernel_info(self) -> asyncio.Future[Any]:
        reply: asyncio.Future[Any] = super().request_kernel_info()
        kernel = self.kernel_manager
        if reply.done() or not _tracks_execution_state(kernel):
            return reply
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def settle(info: dict[str, Any]) -> None:
            if not answer.done():
                answer.set_result(info)

        def on_reply(done: Any) -> None:
            settle({} if done.cancelled() or done.exception() else done.result())

        def on_state(change: Any) -> None:
            if change["new"] == BUSY and not answer.done():
                self.log.info(
                    "Kernel %s is busy: its websocket opens without waiting for kernel_info",
                    self.kernel_id,
                )
                settle({})

        reply.add_done_callback(on_reply)
        kernel.observe(on_state, names="execution_state")
        answer.add_done_callback(lambda _: kernel.unobserve(on_state, names="execution_state"))
        on_state({"new": kernel.execution_state})
        return answer


def _tracks_execution_state(kernel: Any) -> bool:
    """jupyter_server's kernel managers keep `execution_state` (from the kernel's status
    messages) as a trait that can be observed."""
    return isinstance(kernel, HasTraits) and kernel.has_trait("execution_state")


def install(serverapp: Any, web_settings: dict[str, Any]) -> None:
    """Make the server's kernel websockets use `NonBlockingKernelWebsocketConnection`, unless
    another connection class is configured (a gateway's, or the user's own), which is kept.
    `web_settings`: the settings the extension hands to the web application."""
    current = web_settings.get(SETTING)
    if current is NonBlockingKernelWebsocketConnection:
        return
    if current is not ZMQChannelsWebsocketConnection:
        log.info(
            "Prime Agent Lab keeps the configured kernel websocket connection %s: opening the "
            "notebook of an agent whose cell runs may wait until the cell ends",
            getattr(current, "__qualname__", current),
        )
        return
    serverapp.kernel_websocket_connection_class = NonBlockingKernelWebsocketConnection
    web_settings[SETTING] = NonBlockingKernelWebsocketConnection
