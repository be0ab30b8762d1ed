"""Where a host's kernels come from, as far as the fleet must know: what the source allows
(`KernelSourceTraits`), and the one way to get a client of a kernel (`new_client`), local or on a
Jupyter gateway (jupyter_server's `--gateway-url`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class KernelSourceTraits:
    """What a kernel source allows, fixed when the host's backend is made."""

    shares_disk: bool  # the kernel sees the host's session and notebook folders
    holds_connection_key: bool  # the host can verify the kernel's signature with its connection key
    can_prestart: bool  # starting a kernel ahead of time is allowed (the pool)
    local_restarts: bool  # a jupyter_client KernelRestarter and a provisioner pid exist


class KernelStartFailed(RuntimeError):
    """A kernel could not be started; the message names the kernel spec, where, and the cause."""


LOCAL_KERNELS = KernelSourceTraits(
    shares_disk=True, holds_connection_key=True, can_prestart=True, local_restarts=True
)
GATEWAY_KERNELS = KernelSourceTraits(
    shares_disk=False, holds_connection_key=False, can_prestart=True, local_restarts=False
)


def _gateway_managers() -> Any:
    """jupyter_server's gateway module if something imported it (a server with `--gateway-url`
    did); else no manager can be a gateway's, and the CLI never pays for the import."""
    return sys.modules.get("jupyter_server.gateway.managers")


def traits_of(kernel_manager: Any) -> KernelSourceTraits:
    """The traits of the kernels a jupyter_server (multi-)kernel manager gives."""
    gateway = _gateway_managers()
    if gateway is not None and isinstance(kernel_manager, gateway.GatewayMappingKernelManager):
        return GATEWAY_KERNELS
    return LOCAL_KERNELS


def is_gateway_kernel(manager: Any) -> bool:
    """The kernel manager of one kernel on a gateway."""
    gateway = _gateway_managers()
    return gateway is not None and isinstance(manager, gateway.GatewayKernelManager)


async def new_client(manager: Any, connect_timeout: float | None = None) -> Any:
    """A client of the manager's kernel with channels started, and a session identity of its own
    (never sharing replies with the browser or another client). `connect_timeout` bounds a
    gateway's websocket handshake (`gateway_client.connect`); local channels connect at once."""
    if is_gateway_kernel(manager):
        from .gateway_client import connect

        return await connect(manager, connect_timeout)
    client = manager.client_factory(parent=manager)
    client.load_connection_info(manager.get_connection_info())
    # No heartbeat: deaths are seen through the manager (`is_alive`), and jupyter_client's
    # heartbeat is a thread that printed a traceback when the process ended around it.
    client.start_channels(hb=False)
    return client
