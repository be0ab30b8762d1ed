"""The server's log without the environment of kernels started on a gateway.

jupyter_server's `GatewayKernelManager.start_kernel` logs its keyword arguments at INFO, and
those carry `env`: the whole environment of the server for a notebook's own kernel (jupyter_server
passes `os.environ` plus the session name), so `JUPYTER_GATEWAY_AUTH_TOKEN` and any other secret
the server was started with landed in the log once per kernel. The gateway itself is sent only
the `KERNEL_*` variables and `GatewayClient.allowed_envs`. This filter keeps the line and drops
its arguments.
"""

from __future__ import annotations

import logging

STARTED = "GatewayKernelManager started kernel: "


class KernelArgumentsLeftOut(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message.startswith(STARTED) and ", args: " in message:
            kernel_id = message[len(STARTED) :].split(", args: ", 1)[0]
            record.msg = f"{STARTED}{kernel_id} (its arguments are not logged: they hold the "
            record.msg += "server's environment)"
            record.args = ()
        return True


def leave_out_kernel_arguments(log: logging.Logger) -> None:
    """Install the filter on `log` (the server's, which the gateway's kernel managers use)."""
    if not any(isinstance(f, KernelArgumentsLeftOut) for f in log.filters):
        log.addFilter(KernelArgumentsLeftOut())
