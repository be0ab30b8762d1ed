"""A gateway that went away (killed, restarted, unreachable) while a kernel on it was used: told
as the gateway's failure in one line, which ends the turn (`KernelUnavailable`), instead of a
harness error per cell with a traceback, each cell sent again to the dead gateway (review 2, F5).

Imports nothing of jupyter_server: local kernels use the same executor.
"""

from __future__ import annotations

from ..core.gateway_url import printable_url
from ..core.ports import KernelUnavailable

# jupyter_server's `gateway_request` turns a refused or reset connection into this status
CONNECTION_FAILED = 503
# ... and passes these on from tornado's client (599: no answer within the request timeout, after
# its retries) or from a proxy in front of the gateway (504)
NO_ANSWER = (599, 504)
TIMEOUT_SETTING = "JUPYTER_GATEWAY_REQUEST_TIMEOUT or c.GatewayClient.request_timeout"


class GatewayChannelsClosed(RuntimeError):
    """The websocket to a gateway kernel's channels closed: no message can come or go."""

    def __init__(self, url: str) -> None:
        super().__init__("the gateway's websocket is closed")
        self.url = url


class GatewayGone(KernelUnavailable):
    """The gateway itself cannot be reached: no cell can run until it is back."""


def gateway_gone(exc: BaseException, kernel_url: str | None = None) -> GatewayGone | None:
    """`exc` as the gateway's failure, or None when it is not one. `kernel_url`: the kernel's
    address on the gateway, named when the error does not carry the gateway's."""
    if isinstance(exc, GatewayChannelsClosed):
        return GatewayGone(
            f"the gateway {printable_url(exc.url)} went away: the websocket to its kernel "
            "closed while a cell ran (the cell may or may not have run)"
        )
    from_gateway_request = type(exc).__module__ == "tornado.web" and "Gateway" in str(
        getattr(exc, "log_message", "")
    )
    if from_gateway_request and getattr(exc, "status_code", None) == CONNECTION_FAILED:
        url = str(exc.args[0]) if exc.args else ""
        return GatewayGone(
            f"the gateway {printable_url(url)} cannot be reached: its connection was refused "
            "or reset (is it running?)"
        )
    if from_gateway_request and getattr(exc, "status_code", None) in NO_ANSWER:
        where = (
            f"the gateway {printable_url(_gateway_of(kernel_url))}" if kernel_url else "the gateway"
        )
        return GatewayGone(
            f"{where} did not answer in time (stopped or overloaded?); how long a request "
            f"waits is {TIMEOUT_SETTING}"
        )
    return None


def _gateway_of(kernel_url: str) -> str:
    """The gateway's own address from a kernel's (`<gateway>/api/kernels/<id>`)."""
    return kernel_url.split("/api/kernels/", 1)[0]
