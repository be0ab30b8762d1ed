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
from pathlib import Path
from typing import Any

STARTUP_EXTENSION = "prime_agent_kernel.startup"
EXTENSION_ARGUMENT = f"--IPKernelApp.extra_extensions={STARTUP_EXTENSION}"
CONFIG_ARGUMENT = f"--config={Path(__file__).with_name('ipython_startup_config.py')}"
# Command-line settings an added `--config` file could not add to (the command line wins).
_COMMAND_LINE_EXTENSIONS = ("--ext", "--IPKernelApp.extra_extensions", "--config")
_COMMAND_LINE_EXTENSIONS += ("--InteractiveShellApp.extra_extensions",)
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
    ours = (EXTENSION_ARGUMENT, CONFIG_ARGUMENT)
    extra = [a for a in launch.get("extra_arguments") or [] if a not in ours]
    launch["extra_arguments"] = [*extra, _startup_argument([*manager.kernel_spec.argv, *extra])]
    env = launch.get("env")
    # jupyter_client starts a kernel without `env` in the server's environment: keep it.
    env = dict(os.environ) if env is None else dict(env)
    env[BRIDGE_URL_VARIABLE] = bridge_url
    env[KERNEL_ID_VARIABLE] = kernel_id
    launch["env"] = env
    if directory:
        launch["cwd"] = directory
    return True


def _startup_argument(command_line: list[str]) -> str:
    """How the kernel is told to load the startup extension, adding to the user's own extra
    extensions: a configuration file that appends to those set in configuration files, or,
    when the command line sets them already (which beats any file), one more of the same."""
    if any(str(part).startswith(_COMMAND_LINE_EXTENSIONS) for part in command_line):
        return EXTENSION_ARGUMENT
    return CONFIG_ARGUMENT


def _is_ipykernel(manager: Any) -> bool:
    try:
        argv = list(manager.kernel_spec.argv)
    except Exception:  # no spec to read (not a local kernel): leave it alone
        return False
    return any("ipykernel" in str(part) for part in argv)
