"""Make a notebook kernel load the kernel package as it (re)starts.

jupyter_client restarts a kernel with the arguments of its last start (the kernel manager's
`_launch_args`: its `extra_arguments`, `env` and `cwd`). Adding the package's IPython startup
extension and the bridge address there makes every later restart, whoever asks for it, come up
with the kernel API bound before the kernel answers anyone. The host's own silent setup cell
still runs after a restart (it is idempotent); this only closes the window between the kernel
turning idle and that cell, in which a user's cell would find no `rlm`.
"""

from __future__ import annotations

import os
from typing import Any

STARTUP_EXTENSION = "prime_agent_kernel.startup"
EXTENSION_ARGUMENT = f"--IPKernelApp.extra_extensions={STARTUP_EXTENSION}"
# Must match prime_agent_kernel.startup (the kernel package never imports the host's).
BRIDGE_URL_VARIABLE = "PRIME_AGENT_LAB_BRIDGE_URL"
KERNEL_ID_VARIABLE = "PRIME_AGENT_LAB_KERNEL_ID"


def load_package_at_start(
    manager: Any, bridge_url: str, kernel_id: str, directory: str | None = None
) -> bool:
    """Arrange that the next start of `manager`'s kernel binds the kernel API (and starts in
    `directory`, when given). False, with nothing changed, for a kernel that is not an
    ipykernel started through jupyter_client (a gateway kernel, another language's kernel)."""
    launch = getattr(manager, "_launch_args", None)
    if not isinstance(launch, dict) or not _is_ipykernel(manager):
        return False
    extra = [a for a in launch.get("extra_arguments") or [] if a != EXTENSION_ARGUMENT]
    launch["extra_arguments"] = [*extra, EXTENSION_ARGUMENT]
    env = launch.get("env")
    # jupyter_client starts a kernel without `env` in the server's environment: keep it.
    env = dict(os.environ) if env is None else dict(env)
    env[BRIDGE_URL_VARIABLE] = bridge_url
    env[KERNEL_ID_VARIABLE] = kernel_id
    launch["env"] = env
    if directory:
        launch["cwd"] = directory
    return True


def _is_ipykernel(manager: Any) -> bool:
    try:
        argv = list(manager.kernel_spec.argv)
    except Exception:  # no spec to read (not a local kernel): leave it alone
        return False
    return any("ipykernel" in str(part) for part in argv)
