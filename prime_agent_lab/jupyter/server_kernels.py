"""The server's kernels as the kernel fleet sees them (adapters/kernel_fleet.py): the kernels of
jupyter_server's kernel manager, a notebook's kernel found (or started) through its Jupyter
session, and the kernels pre-started for sub-agents.

Kernels are started through jupyter_server's kernel manager (never as processes of our own), so
the same code runs them on a Kernel or Enterprise Gateway when the server has `--gateway-url`.
A pooled kernel belongs to no notebook until `hand_to_notebook` makes it that notebook's Jupyter
session, so a browser opening the notebook joins the same kernel.
"""

from __future__ import annotations

import contextlib
import logging
import posixpath
from collections.abc import Callable, Sequence
from typing import Any

from jupyter_core.utils import ensure_async

from ..adapters.gateway_refusal import refusal_text
from ..adapters.kernel_calls import (
    READY_TIMEOUT,
    Run,
    set_working_directory,
    wait_until_ready,
)
from ..adapters.kernel_fleet import HandOutFailed
from ..adapters.kernel_source import KernelSourceTraits, traits_of
from ..core.redaction import kernel_environment
from . import notebook_sessions
from .host_errors import HostError

log = logging.getLogger(__name__)

GATEWAY_TOKEN_SETTING = "--GatewayClient.auth_token (or JUPYTER_GATEWAY_AUTH_TOKEN)"
KERNEL_ACTIONS_SCHEMA = "https://events.jupyter.org/jupyter_server/kernel_actions/v1"

__all__ = ["HandOutFailed", "ServerKernelStartFailed", "ServerKernels", "hand_to_notebook"]


class ServerKernelStartFailed(RuntimeError):
    """The server could not start a kernel; the message names the kernel spec and the cause."""


class ServerKernels:
    """Kernels of the server's kernel manager, started without the provider key variables in
    their environment: ready ones for the pool (they answered `kernel_info`), and a notebook's
    own kernel as its Jupyter session."""

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
        self.bindings: dict[str, str] = {}  # notebook path -> kernel id, reported by the UI
        # A gateway's kernels (`--gateway-url`) share no disk and no connection key with us.
        self.traits: KernelSourceTraits = traits_of(serverapp.kernel_manager)

    @property
    def _kernels(self) -> Any:
        return self._serverapp.kernel_manager

    @property
    def _sessions(self) -> Any:
        return self._serverapp.session_manager

    def manager(self, kernel_id: str) -> Any:
        return self._kernels.get_kernel(kernel_id)

    def managed(self, kernel_id: str) -> bool:
        return kernel_id in self._kernels

    def connected(self, kernel_id: str) -> bool:
        """A notebook tab has a websocket open on the kernel."""
        connections = getattr(self._kernels, "_kernel_connections", {})
        return bool(kernel_id and connections.get(kernel_id, 0))

    # ------------------------------------------------------------ a notebook's own kernel

    async def notebook_kernel(self, notebook_path: str) -> str | None:
        """The kernel of the notebook's Jupyter session (a user opened it), else None."""
        if not await self._sessions.session_exists(path=notebook_path):
            return None
        model = await self._sessions.get_session(path=notebook_path)
        return str(model["kernel"]["id"])

    async def resolve(self, path: str, hint: str | None = None) -> str:
        """The notebook's kernel: the UI's report first, then the sessions API, else a new one.
        A gateway that refuses the server's credentials is a 502 that says so."""
        try:
            return await self._resolve(path, hint)
        except Exception as exc:
            refused = refusal_text(exc, GATEWAY_TOKEN_SETTING)
            if refused is None:
                raise
            raise HostError(502, refused) from None

    async def _resolve(self, path: str, hint: str | None) -> str:
        for candidate in (hint, self.bindings.get(path)):
            if candidate and candidate in self._kernels:
                self.bindings[path] = candidate
                return candidate
        for session in await self._sessions.list_sessions():
            kernel = session.get("kernel") or {}
            if session.get("path") == path and kernel.get("id") in self._kernels:
                self.bindings[path] = kernel["id"]
                return str(kernel["id"])
        kernel_id = await self._start_notebook_kernel(path)
        self.bindings[path] = kernel_id
        return kernel_id

    async def _start_notebook_kernel(self, path: str) -> str:
        """Start the notebook's kernel (as its Jupyter session, which the browser later reuses)
        without the provider key variables in its environment."""
        name = posixpath.basename(path)
        env = {
            **kernel_environment(self._env_strip),
            "JPY_SESSION_NAME": self._sessions.get_kernel_env(path, name)["JPY_SESSION_NAME"],
        }
        contents = self._serverapp.contents_manager
        kernel_path = await ensure_async(contents.get_kernel_path(path))
        kernel_id = await self._kernels.start_kernel(
            path=kernel_path, kernel_name=self.kernel_name, env=env
        )
        notebook_sessions.install(self._sessions)
        model = await self._sessions.create_session(
            path=path, name=name, type="notebook", kernel_id=kernel_id
        )
        if model["kernel"]["id"] != kernel_id:  # a tab opened the notebook meanwhile
            await self.discard(kernel_id)
        return str(model["kernel"]["id"])

    def moved(self, old: str, new: str) -> None:
        if old in self.bindings:
            self.bindings[new] = self.bindings.pop(old)

    # ------------------------------------------------------------ sub-agents' kernels

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
                refusal_text(exc, GATEWAY_TOKEN_SETTING)
                or f"the kernel {self.kernel_name!r} could not start: {type(exc).__name__}: {exc}"
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
        return bool(await ensure_async(self._kernels.get_kernel(kernel_id).is_alive()))

    def directory(self, cwd: str) -> str:
        return str(self._kernels.cwd_for_path(cwd or ""))

    async def hand_out(self, kernel_id: str, notebook_path: str, directory: str, run: Run) -> None:
        await hand_to_notebook(self._serverapp, kernel_id, notebook_path, directory, run=run)
        self.bindings[notebook_path] = kernel_id

    async def shut_down(self, kernel_id: str) -> None:
        """A sub-agent's kernel goes with its Jupyter session."""
        with contextlib.suppress(Exception):
            for model in await self._sessions.list_sessions():
                if (model.get("kernel") or {}).get("id") == kernel_id:
                    await self._sessions.delete_session(model["id"])  # shuts the kernel down too
        if kernel_id in self._kernels:
            with contextlib.suppress(Exception):
                await self._kernels.shutdown_kernel(kernel_id)

    # ------------------------------------------------------------ restarts

    def follow_restarts(self, restarted: Callable[[str], None]) -> None:
        """jupyter_server's `kernel_actions` events: every restart, whoever asked for it."""
        logger = getattr(self._serverapp, "event_logger", None)
        if logger is None:
            return

        async def on_action(logger: Any, schema_id: str, data: dict[str, Any]) -> None:
            if data.get("action") == "restart" and data.get("status") == "success":
                restarted(str(data.get("kernel_id", "")))

        logger.add_listener(schema_id=KERNEL_ACTIONS_SCHEMA, listener=on_action)

    def follow_deaths(self, kernel_id: str, died: Callable[[], None]) -> None:
        self._kernels.get_kernel(kernel_id).add_restart_callback(died, "restart")

    async def close(self) -> None:
        return None  # the server's kernels are the server's to stop


async def hand_to_notebook(
    serverapp: Any,
    kernel_id: str,
    notebook_path: str,
    directory: str | None = None,
    run: Run | None = None,
) -> dict[str, Any]:
    """Make a pooled kernel the kernel of `notebook_path` (an API path) and return the Jupyter
    session model.

    The kernel is registered as the notebook's session first, so a browser that opens the
    notebook from now on joins this kernel (a session created after the move would race a tab
    opened meanwhile into a second kernel for the same notebook). Then the kernel moves to
    `directory` (an absolute OS path; default: the notebook's own directory, where
    jupyter_server would have started it) and gets the notebook's `JPY_SESSION_NAME`. A
    gateway's kernel shares no disk with the server (its working folder is the gateway's
    business): it gets only the session name.
    """
    sessions = serverapp.session_manager
    kernels = serverapp.kernel_manager
    path = notebook_path.strip("/")
    name = posixpath.basename(path)
    if directory is None:
        directory = kernels.cwd_for_path(
            await ensure_async(serverapp.contents_manager.get_kernel_path(path=path))
        )
    session_name = sessions.get_kernel_env(path, name)["JPY_SESSION_NAME"]
    if kernel_id not in kernels:  # create_session would start a fresh one
        raise HandOutFailed(f"the kernel {kernel_id} is not running any more")
    # A restart starts a new process from the launch arguments: give it the notebook's name too.
    kernels.get_kernel(kernel_id).update_env(env={"JPY_SESSION_NAME": session_name})
    # A tab opening the notebook right now creates its session through the same gate: one of
    # the two makes the session, the other gets it.
    gate = notebook_sessions.install(sessions)
    model, created = await gate.create_or_find(
        path=path, name=name, type="notebook", kernel_id=kernel_id
    )
    if not created:
        existing = model["kernel"]["id"]
        raise HandOutFailed(f"{path} already has a Jupyter session (kernel {existing})")
    try:
        moved_to = directory if traits_of(kernels).shares_disk else None
        await set_working_directory(kernels.get_kernel(kernel_id), moved_to, session_name, run=run)
    except Exception as exc:
        with contextlib.suppress(Exception):
            await sessions.delete_session(model["id"])
        raise HandOutFailed(f"cannot prepare the kernel for {path}: {exc}") from exc
    return dict(model)
