"""Kernels of the headless CLI on a Jupyter Kernel or Enterprise Gateway (`--gateway-url`,
`JUPYTER_GATEWAY_URL`): started, reached and shut down through jupyter_server's own
`GatewayMappingKernelManager` and `GatewayClient`, configured as `jupyter server --gateway-url`
configures them, so the CLI and the server share one way of starting a kernel on a gateway.

`GatewayBackend` is what the kernel fleet (adapters/kernel_fleet.py) knows of them. The kernels
share no disk and no connection key with the CLI (`GATEWAY_KERNELS`): a pooled kernel is handed
out without moving it into a folder (its working directory is the gateway's business), and the
bridge checks a per-kernel secret handed over at setup (adapters/kernel_secret.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from jupyter_client.kernelspec import KernelSpec
from jupyter_server.gateway.gateway_client import GatewayClient
from jupyter_server.gateway.managers import GatewayKernelSpecManager, GatewayMappingKernelManager
from traitlets.config import Config

from ..core.gateway_url import printable_url
from ..core.redaction import kernel_environment
from ..core.settings import CLI, spell
from .gateway_refusal import refusal_text
from .kernel_calls import READY_TIMEOUT, Run, wait_until_ready
from .kernel_source import GATEWAY_KERNELS, KernelSourceTraits, KernelStartFailed

TOKEN_SETTING = f"{spell('gateway_auth_token', CLI)} (or JUPYTER_GATEWAY_AUTH_TOKEN)"


def configure_gateway(url: str | None, auth_token: str | None) -> GatewayClient | None:
    """jupyter_server's `GatewayClient` singleton with the flags' values over its own defaults
    (`JUPYTER_GATEWAY_URL`, `JUPYTER_GATEWAY_AUTH_TOKEN` and the other `JUPYTER_GATEWAY_*`
    variables it reads); None when no gateway URL is set either way."""
    config = Config()
    if url:
        config.GatewayClient.url = url
    if auth_token:
        config.GatewayClient.auth_token = auth_token
    client = GatewayClient.instance(config=config)
    return client if client.gateway_enabled else None


class GatewayBackend:
    """The CLI's kernels on a gateway, by the gateway's kernel ids; all shut down when the
    fleet closes. It follows nothing itself (`follow_restarts`, `follow_deaths`): a restart or a
    death on the gateway is seen by the kernel's executor, as a new process on its channels
    (the kernel is set up again, docs/gateway.md part 3, step 3), and a gateway that went away
    ends the turn (adapters/gateway_gone.py)."""

    traits: KernelSourceTraits = GATEWAY_KERNELS

    def __init__(
        self,
        gateway: GatewayClient,
        kernel_name: str = "python3",
        env_strip: Sequence[str] | None = None,  # None: the providers' key variables
        ready_timeout: float = READY_TIMEOUT,
    ) -> None:
        self.url = printable_url(gateway.url or "")
        self.kernel_name = kernel_name
        self._env_strip = None if env_strip is None else tuple(env_strip)
        self._ready_timeout = ready_timeout
        self._kernels = GatewayMappingKernelManager()
        self._specs = GatewayKernelSpecManager()
        self._spec: KernelSpec | None = None
        self.started = 0  # kernels this run asked the gateway for

    def spec(self) -> KernelSpec:
        """The gateway's kernel spec of `kernel_name` (read at the first start)."""
        assert self._spec is not None, "no kernel was started yet"
        return self._spec

    async def _start(self) -> str:
        try:
            if self._spec is None:
                self._spec = await self._kernel_spec()
            kernel_id = await self._kernels.start_kernel(
                kernel_name=self.kernel_name, env=kernel_environment(self._env_strip)
            )
        except KernelStartFailed:
            raise
        except Exception as exc:
            refused = refusal_text(exc, TOKEN_SETTING)
            raise KernelStartFailed(
                refused
                or f"the gateway {self.url} could not start the kernel {self.kernel_name!r}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        self.started += 1
        return str(kernel_id)

    async def _kernel_spec(self) -> KernelSpec:
        """The gateway's spec of `kernel_name` (its model: `{"name", "spec", "resources"}`)."""
        try:
            model = await self._specs.get_kernel_spec(self.kernel_name)
        except KeyError:
            specs = await self._specs.list_kernel_specs()
            installed = ", ".join(sorted(specs.get("kernelspecs") or {})) or "none"
            raise KernelStartFailed(
                f"the gateway {self.url} has no kernel spec {self.kernel_name!r} "
                f"(it has: {installed})"
            ) from None
        spec = model.get("spec") or {}
        known = {"argv", "display_name", "language", "interrupt_mode", "metadata"}
        return KernelSpec(**{key: value for key, value in spec.items() if key in known})

    async def launch(self) -> str:
        """A kernel the gateway started (its first use waits until it answers)."""
        return await self._start()

    async def start(self) -> str:
        """A kernel that answered `kernel_info` (for the pool)."""
        kernel_id = await self._start()
        try:
            await wait_until_ready(self.manager(kernel_id), self._ready_timeout)
        except Exception as exc:
            await self.shut_down(kernel_id)
            raise KernelStartFailed(
                f"the kernel {self.kernel_name!r} started on the gateway {self.url} but did not "
                f"answer: {type(exc).__name__}: {exc}"
            ) from exc
        return kernel_id

    def manager(self, kernel_id: str) -> Any:
        return self._kernels.get_kernel(kernel_id)

    def managed(self, kernel_id: str) -> bool:
        return kernel_id in self._kernels

    async def alive(self, kernel_id: str) -> bool:
        """The gateway still lists the kernel (its model is gone once it was shut down)."""
        if kernel_id not in self._kernels:
            return False
        try:
            return await self.manager(kernel_id).refresh_model() is not None
        except Exception:
            return False

    async def shut_down(self, kernel_id: str) -> None:
        if kernel_id in self._kernels:
            with contextlib.suppress(Exception):
                await self._kernels.shutdown_kernel(kernel_id, now=True)
            self._kernels.remove_kernel(kernel_id)

    def directory(self, cwd: str) -> str:
        return ""  # none: the CLI's folders are not the gateway's, so no kernel moves into one

    async def notebook_kernel(self, notebook_path: str) -> str | None:
        return None  # a notebook file has no kernel of its own

    async def hand_out(self, kernel_id: str, notebook_path: str, directory: str, run: Run) -> None:
        return None  # the kernel stays where the gateway started it

    def follow_restarts(self, restarted: Callable[[str], None]) -> None:
        return None

    def follow_deaths(self, kernel_id: str, died: Callable[[], None]) -> None:
        return None

    async def close(self) -> None:
        for kernel_id in list(self._kernels.list_kernel_ids()):
            await self.shut_down(kernel_id)
