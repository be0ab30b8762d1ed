"""Kernels the server starts for sub-agents: the kernel source of the server's kernel pool.

Kernels are started through jupyter_server's kernel manager (never as processes of our own), so
the same code runs them on a Kernel or Enterprise Gateway when the server has `--gateway-url`.
A pooled kernel belongs to no notebook until `hand_to_notebook` makes it that notebook's Jupyter
session, so a browser opening the notebook joins the same kernel.
"""

from __future__ import annotations

import inspect
import logging
import posixpath
from collections.abc import Sequence
from typing import Any

from ..adapters.kernel_calls import (
    READY_TIMEOUT,
    Run,
    set_working_directory,
    wait_until_ready,
)
from ..core.redaction import kernel_environment

log = logging.getLogger(__name__)


class ServerKernelStartFailed(RuntimeError):
    """The server could not start a kernel; the message names the kernel spec and the cause."""


class HandOutFailed(RuntimeError):
    """A pooled kernel could not become the notebook's kernel; the message says why."""


class ServerKernels:
    """Starts ready kernels (they answered `kernel_info`) in the server's kernel manager, without
    the provider key variables in their environment."""

    def __init__(
        self,
        serverapp: Any,
        kernel_name: str = "python3",
        env_strip: Sequence[str] | None = None,  # None: the providers' key variables
        start_path: str = "",
        ready_timeout: float = READY_TIMEOUT,
    ) -> None:
        self._serverapp = serverapp
        self.kernel_name = kernel_name
        self._env_strip = None if env_strip is None else tuple(env_strip)
        self._start_path = start_path  # API path of the directory pooled kernels start in
        self._ready_timeout = ready_timeout

    @property
    def _kernels(self) -> Any:
        return self._serverapp.kernel_manager

    async def start(self) -> str:
        """Start a kernel and return its id once it has booted."""
        try:
            kernel_id = await self._kernels.start_kernel(
                kernel_name=self.kernel_name,
                path=self._start_path,
                env=kernel_environment(self._env_strip),
            )
        except Exception as exc:
            raise ServerKernelStartFailed(
                f"the kernel {self.kernel_name!r} could not start: {type(exc).__name__}: {exc}"
            ) from exc
        try:
            await wait_until_ready(self._kernels.get_kernel(kernel_id), self._ready_timeout)
        except Exception as exc:
            await self.discard(kernel_id)
            raise ServerKernelStartFailed(
                f"the kernel {self.kernel_name!r} started but did not answer: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        return str(kernel_id)

    async def discard(self, kernel_id: str) -> None:
        if kernel_id in self._kernels:
            await self._kernels.shutdown_kernel(kernel_id, now=True)

    async def alive(self, kernel_id: str) -> bool:
        """False once the kernel died or the server dropped it (culled, shut down by a user)."""
        if kernel_id not in self._kernels:
            return False
        return bool(await _maybe_await(self._kernels.get_kernel(kernel_id).is_alive()))


async def hand_to_notebook(
    serverapp: Any,
    kernel_id: str,
    notebook_path: str,
    directory: str | None = None,
    run: Run | None = None,
) -> dict[str, Any]:
    """Make a pooled kernel the kernel of `notebook_path` (an API path) and return the Jupyter
    session model.

    The kernel moves to `directory` (an absolute OS path; default: the notebook's own directory,
    where jupyter_server would have started it) and gets the notebook's `JPY_SESSION_NAME`; then
    it is registered as the notebook's session, so a browser opening the notebook uses it.
    """
    sessions = serverapp.session_manager
    kernels = serverapp.kernel_manager
    path = notebook_path.strip("/")
    name = posixpath.basename(path)
    if kernel_id not in kernels:
        raise HandOutFailed(f"the kernel {kernel_id} is not running any more")
    if await sessions.session_exists(path=path):
        existing = await sessions.get_session(path=path)
        raise HandOutFailed(
            f"{path} already has a Jupyter session (kernel {existing['kernel']['id']})"
        )
    if directory is None:
        directory = kernels.cwd_for_path(
            await _maybe_await(serverapp.contents_manager.get_kernel_path(path=path))
        )
    session_name = sessions.get_kernel_env(path, name)["JPY_SESSION_NAME"]
    try:
        await set_working_directory(kernels.get_kernel(kernel_id), directory, session_name, run=run)
    except Exception as exc:
        raise HandOutFailed(f"cannot prepare the kernel for {path}: {exc}") from exc
    if kernel_id not in kernels:  # checked again: create_session would start a fresh one
        raise HandOutFailed(f"the kernel {kernel_id} stopped while it was prepared for {path}")
    # A restart starts a new process from the launch arguments: give it the notebook's name too.
    kernels.get_kernel(kernel_id).update_env(env={"JPY_SESSION_NAME": session_name})
    model = await sessions.create_session(
        path=path, name=name, type="notebook", kernel_id=kernel_id
    )
    return dict(model)


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value
