"""The server's notebooks for agents: the live documents (jupyter-collaboration) of notebooks the
contents manager serves, and sub-agents' notebooks created through it."""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping
from typing import Any

from jupyter_core.utils import ensure_async
from tornado import web

from ..core.agent import Agent
from ..core.jsonfile import MAX_NOTEBOOK_BYTES, too_large
from ..core.ports import NotebookPort
from ..core.settings import Settings
from ..core.text import shorten
from .host_errors import HostError, http_error_text
from .live_notebook import LiveNotebook
from .server_kernels import ServerKernels


class ServerNotebooks:
    def __init__(
        self,
        serverapp: Any,
        settings: Callable[[], Settings],
        kernels: ServerKernels,
        agents: Callable[[], Mapping[str, Agent]],
    ) -> None:
        self._serverapp = serverapp
        self._settings = settings
        self._kernels = kernels
        self._agents = agents
        self._creating: set[str] = set()  # paths claimed by a create that has not saved yet

    @property
    def _contents(self) -> Any:
        return self._serverapp.contents_manager

    def ydoc_extension(self) -> Any:
        ext = self._serverapp.web_app.settings.get("jupyter_server_ydoc")
        if ext is None:
            raise HostError(
                500,
                "jupyter-collaboration is not enabled: Prime Agent Lab writes agent cells into the "
                "live notebook through it (pip install jupyter-collaboration)",
            )
        return ext

    def live(self, path: str, ydoc: Any = None) -> LiveNotebook:
        return LiveNotebook(
            ydoc if ydoc is not None else self.ydoc_extension(),
            path,
            self._settings().notebook_output_cap,
            file_ids=self._serverapp.web_app.settings.get("file_id_manager"),
            contents=self._contents,
        )

    async def check(self, path: str) -> None:
        """Refuse what the contents manager would refuse later, before any kernel starts."""
        contents = self._contents
        if not await ensure_async(contents.file_exists(path)):
            raise HostError(404, f"no notebook at {shorten(path)}")
        if not contents.allow_hidden and await ensure_async(contents.is_hidden(path)):
            raise HostError(
                403,
                f"{shorten(path)} is hidden, and this server does not serve hidden files "
                "(ContentsManager.allow_hidden)",
            )
        try:
            size = (await ensure_async(contents.get(path, content=False))).get("size")
            if isinstance(size, int) and size > MAX_NOTEBOOK_BYTES:  # not read at all
                raise web.HTTPError(413, f"it {too_large(size, MAX_NOTEBOOK_BYTES)}")
            await ensure_async(contents.get(path, content=True, type="notebook"))
        except web.HTTPError as exc:
            reason = http_error_text(exc)
            raise HostError(400, f"cannot open {shorten(path)} as a notebook: {reason}") from None

    async def create(self, path: str, cells: list[dict[str, Any]]) -> NotebookPort:
        """A new notebook at `path`; FileExistsError when the path is taken, also by a create
        still under way (two forks at once must not get the same notebook)."""
        if path in self._creating:
            raise FileExistsError(path)
        self._creating.add(path)  # claimed before the first await
        try:
            return await self._create(path, cells)
        finally:
            self._creating.discard(path)

    async def _create(self, path: str, cells: list[dict[str, Any]]) -> NotebookPort:
        contents = self._contents
        if await ensure_async(contents.file_exists(path)):
            raise FileExistsError(path)
        folder = posixpath.dirname(path)
        if folder and not await ensure_async(contents.dir_exists(folder)):
            await ensure_async(contents.save({"type": "directory"}, folder))
        kernel_name = self._settings().kernel_name
        notebook = {
            "nbformat": 4,
            "nbformat_minor": 5,
            "metadata": {
                "kernelspec": {
                    "name": kernel_name,
                    "display_name": kernel_name,
                    "language": "python",
                },
                "language_info": {"name": "python"},
            },
            "cells": cells,
        }
        await ensure_async(
            contents.save({"type": "notebook", "format": "json", "content": notebook}, path)
        )
        return self.live(path)

    async def open(self, path: str) -> NotebookPort:
        return self.live(path)

    def has_client(self, session_id: str, kernel_id: str) -> bool:
        """A chat subscribed to the agent's events, or a notebook tab showing its notebook or
        connected to its kernel."""
        agent = self._agents().get(session_id)
        if agent is not None and agent.events.subscribers:
            return True
        notebook = agent.notebook if agent is not None else None
        if isinstance(notebook, LiveNotebook) and notebook.viewed():
            return True
        return self._kernels.connected(kernel_id)
