"""The runtime's `AgentEnvironment` (core/runtime.py), the same for both hosts: kernels from the
kernel fleet, providers from the model choice, and notebooks from the host, which is all that
differs (the server's live documents, the CLI's files)."""

from __future__ import annotations

from typing import Any, Protocol

from ..core.ports import KernelPort, ModelProvider, NotebookPort
from .kernel_fleet import KernelFleet
from .model_choice import ModelChoice


class HostNotebooks(Protocol):
    async def create(self, path: str, cells: list[dict[str, Any]]) -> NotebookPort:
        """Create the notebook `path` (relative, posix) holding `cells`, and open it;
        FileExistsError when there is one."""
        ...

    async def open(self, path: str) -> NotebookPort: ...

    def has_client(self, session_id: str, kernel_id: str) -> bool:
        """A chat or a notebook tab is attached to the agent (it is not evicted)."""
        ...


class HostEnvironment:
    def __init__(self, fleet: KernelFleet, choice: ModelChoice, notebooks: HostNotebooks) -> None:
        self.fleet = fleet
        self.choice = choice
        self.notebooks = notebooks

    def provider(self, model: str | None) -> ModelProvider:
        return self.choice.provider(model)

    def models(self) -> list[str]:
        return self.choice.models()

    def kernel_key(self, kernel_id: str) -> bytes | None:
        return self.fleet.key(kernel_id)

    async def create_child_notebook(self, path: str, cells: list[dict[str, Any]]) -> NotebookPort:
        return await self.notebooks.create(path, cells)

    async def open_notebook(self, path: str) -> NotebookPort:
        return await self.notebooks.open(path)

    async def start_child_kernel(self, notebook_path: str, cwd: str) -> KernelPort:
        return await self.fleet.child_kernel(notebook_path, cwd)

    async def release_kernel(self, kernel: KernelPort) -> None:
        await self.fleet.release(kernel.kernel_id)

    def has_client(self, session_id: str, kernel_id: str) -> bool:
        return self.notebooks.has_client(session_id, kernel_id)

    async def close(self) -> None:
        await self.fleet.close()
