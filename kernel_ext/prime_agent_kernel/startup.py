"""Bind the kernel API while the kernel starts, before it answers any request.

The host adds this module as an IPython extension (`--IPKernelApp.extra_extensions`) to the
command line a notebook kernel restarts with, and puts the bridge address in the kernel's
environment. So after Kernel > Restart (or another client's restart, or the server's
auto-restart) the user's first cell already finds `rlm`, `history`, ...: no window in which the
kernel is idle but not yet set up. Without those variables (a kernel started some other way)
it does nothing.
"""

from __future__ import annotations

import os
from typing import Any

BRIDGE_URL_VARIABLE = "PRIME_AGENT_LAB_BRIDGE_URL"
KERNEL_ID_VARIABLE = "PRIME_AGENT_LAB_KERNEL_ID"


def load_ipython_extension(shell: Any) -> None:
    bridge_url = os.environ.get(BRIDGE_URL_VARIABLE)
    kernel_id = os.environ.get(KERNEL_ID_VARIABLE)
    if not bridge_url or not kernel_id:
        return
    from . import configure

    configure(bridge_url, kernel_id, shell)
