"""Spike only (issue 20), loaded as the spike server's jupyter_server_config.py: lets the product's
`manager.client_factory(parent=manager)` build a GatewayKernelClient (which requires `kernel_id`),
so the spike can see what breaks past that first failure. Not a fix: the product's kernel source
should ask the manager for its client (see docs/gateway.md)."""

from jupyter_server.gateway import managers as _gateway

_original_init = _gateway.GatewayKernelClient.__init__


def _init(self, kernel_id=None, **kwargs):  # type: ignore[no-untyped-def]
    if kernel_id is None:
        kernel_id = kwargs["parent"].kernel_id
    _original_init(self, kernel_id, **kwargs)


_gateway.GatewayKernelClient.__init__ = _init


def _start_channels(self, shell=True, iopub=True, stdin=True, hb=True, control=True):  # type: ignore[no-untyped-def]
    """The same as GatewayKernelClient.start_channels, called synchronously as the product does
    with local clients (the original is a coroutine; unawaited, no websocket is ever opened)."""
    from threading import Thread

    from jupyter_client.asynchronous.client import AsyncKernelClient
    from tornado.escape import url_escape

    gateway = _gateway.GatewayClient.instance()
    ws_url = _gateway.url_path_join(
        gateway.ws_url or "", gateway.kernels_endpoint, url_escape(self.kernel_id), "channels"
    )
    self.channel_socket = _gateway.websocket.create_connection(
        ws_url,
        timeout=gateway.KERNEL_LAUNCH_TIMEOUT,
        enable_multithread=True,
        # the original sends no auth header: a gateway with an auth token refuses it (see the note)
        header=[f"{gateway.auth_header_key}: {gateway.auth_scheme} {gateway.auth_token}"],
    )
    AsyncKernelClient.start_channels(
        self, shell=shell, iopub=iopub, stdin=stdin, hb=hb, control=control
    )
    self.response_router = Thread(target=self._route_responses)
    self.response_router.start()


_gateway.GatewayKernelClient.start_channels = _start_channels
c = get_config()  # type: ignore[name-defined]  # noqa: F821
c.ServerApp.jpserver_extensions = {"prime_agent_lab": True}

# --- Spike of deliverable 2: a per-kernel secret handed to a gateway kernel over its own channel
# (the silent setup cell), in place of the connection key the host does not hold.
import secrets as _secrets  # noqa: E402

from prime_agent_lab.adapters import kernel_fleet as _fleet  # noqa: E402

_SECRETS: dict[str, bytes] = {}
_original_key = _fleet.KernelFleet.key
_original_setup = _fleet.bridge_setup_code


def _is_gateway(fleet, kernel_id):  # type: ignore[no-untyped-def]
    try:
        return isinstance(fleet.backend.manager(kernel_id), _gateway.GatewayKernelManager)
    except Exception:
        return False


def _key(self, kernel_id):  # type: ignore[no-untyped-def]
    if self.backend.managed(kernel_id) and _is_gateway(self, kernel_id):
        return _SECRETS.setdefault(kernel_id, _secrets.token_bytes(32))
    return _original_key(self, kernel_id)


def _setup(bridge_url, kernel_id):  # type: ignore[no-untyped-def]
    secret = _SECRETS.setdefault(kernel_id, _secrets.token_bytes(32))
    return _original_setup(bridge_url, kernel_id) + (
        "import prime_agent_kernel as _pak\n"
        "from prime_agent_kernel.bridge import BridgeClient as _PakBridge\n"
        f"_pak._client = _PakBridge({bridge_url!r}, {kernel_id!r}, "
        f"bytes.fromhex({secret.hex()!r}))\n"
        "del _pak, _PakBridge\n"
    )


if __import__("os").environ.get("SPIKE_PATCH_SECRET"):
    _fleet.KernelFleet.key = _key
    _fleet.bridge_setup_code = _setup
