"""Shared fixtures: a real jupyter_server with jupyter-collaboration and Prime Agent Lab loaded."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_client.manager import AsyncKernelManager

from prime_agent_lab.providers import make_provider

# One gateway of each kind for the whole test session (each starts in 3 to 30 s).
from .gateway_fixtures import any_gateway, enterprise_gateway, kernel_gateway  # noqa: F401

# Under pytest-xdist: which tests must share a worker (docs/ci.md).
from .worker_groups import pytest_collection_modifyitems  # noqa: F401

pytest_plugins = [
    "jupyter_server.pytest_plugin",
    "jupyter_server_fileid.pytest_plugin",
    "jupyter_server_ydoc.pytest_plugin",
]

TESTS = Path(__file__).parent


@pytest.fixture(autouse=True, scope="session")
def global_harness_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Every test's global harness store is a temporary one, never the developer's own (kernels,
    servers and CLI runs started by tests inherit the variable)."""
    directory = tmp_path_factory.mktemp("global-harness")
    previous = os.environ.get("PRIME_AGENT_LAB_HARNESS_DIR")
    os.environ["PRIME_AGENT_LAB_HARNESS_DIR"] = str(directory)
    yield directory
    if previous is None:
        os.environ.pop("PRIME_AGENT_LAB_HARNESS_DIR", None)
    else:
        os.environ["PRIME_AGENT_LAB_HARNESS_DIR"] = previous


@pytest.fixture(autouse=True, scope="session")
def signing_secret(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The secret that signs snapshots, local harness stores and queued mail (docs/trust.md):
    a temporary one for the whole test session, never the developer's own (servers, kernels
    and CLI runs started by tests inherit the variable)."""
    path = tmp_path_factory.mktemp("trust") / "signing_secret"
    previous = os.environ.get("PRIME_AGENT_LAB_SECRET_FILE")
    os.environ["PRIME_AGENT_LAB_SECRET_FILE"] = str(path)
    yield path
    if previous is None:
        os.environ.pop("PRIME_AGENT_LAB_SECRET_FILE", None)
    else:
        os.environ["PRIME_AGENT_LAB_SECRET_FILE"] = previous


@pytest.fixture
def agent_script(tmp_path: Path) -> Callable[[list[dict[str, Any]]], str]:
    """Write a scripted-provider script and return its path."""

    def write(turns: list[dict[str, Any]]) -> str:
        path = tmp_path / f"script-{time.monotonic_ns()}.json"
        path.write_text(json.dumps({"turns": turns}))
        return str(path)

    return write


@pytest.fixture
def prime_agent_config() -> dict[str, Any]:
    """Overridden per test module to set `PrimeAgentLab` traits."""
    return {}


@pytest.fixture
def jp_server_config(
    jp_server_config: dict[str, Any], prime_agent_config: dict[str, Any], jp_root_dir: Path
) -> dict[str, Any]:
    config = dict(jp_server_config)
    server = dict(config["ServerApp"])
    server["jpserver_extensions"] = {**server["jpserver_extensions"], "prime_agent_lab": True}
    server["allow_root"] = True
    config["ServerApp"] = server
    config["PrimeAgentLab"] = {
        "sessions_dir": str(jp_root_dir / ".prime-agent" / "sessions"),
        "retry_base_delay": 0.05,
        # No kernels pre-started for sub-agents unless a test asks: most tests never spawn, and
        # CI has two cores (a spawn then starts its child's kernel itself).
        "kernel_pool_size": 0,
        **prime_agent_config,
    }
    return config


@pytest.fixture
def host(jp_serverapp: Any, http_server: Any, jp_asyncio_loop: Any) -> Any:
    """The agent host of a running server (kernels can call it back over HTTP).

    Async tests run on pytest-jupyter's loop (the server's), so fixtures here stay synchronous.
    """
    host = jp_serverapp.web_app.settings["prime_agent_host"]
    yield host
    jp_asyncio_loop.run_until_complete(host.shutdown())
    ext = jp_serverapp.web_app.settings.get("jupyter_server_ydoc")
    if ext is not None:
        jp_asyncio_loop.run_until_complete(ext.stop_extension())
    jp_serverapp.web_app.settings.pop("file_id_manager", None)


def local_kernel(loop: Any) -> Iterator[AsyncKernelManager]:
    """A local kernel of its own (no server) for the fixture's lifetime."""
    km = AsyncKernelManager(kernel_name="python3")
    loop.run_until_complete(km.start_kernel())
    yield km
    if km.has_kernel:
        loop.run_until_complete(km.shutdown_kernel(now=True))


@pytest.fixture
def kernel(jp_asyncio_loop: Any) -> Iterator[AsyncKernelManager]:
    """A local kernel of its own (no server), for executor and loop tests."""
    yield from local_kernel(jp_asyncio_loop)


@pytest.fixture
def make_notebook(jp_root_dir: Path) -> Callable[..., str]:
    def create(path: str = "analysis.ipynb", cells: list[Any] | None = None) -> str:
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {
            "name": "python3",
            "display_name": "Python 3",
            "language": "python",
        }
        nb.cells = list(cells or [])
        target = jp_root_dir / path
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, target)
        return path

    return create


def read_saved_notebook(path: Path) -> Any:
    """The notebook on disk, or None while the room is in the middle of writing it."""
    try:
        return nbformat.read(path, as_version=4)
    except (nbformat.reader.NotJSONError, ValueError, OSError):
        return None


async def wait_for(
    predicate: Callable[[], Any | Awaitable[Any]], timeout: float = 30.0, interval: float = 0.05
) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        await asyncio.sleep(interval)


def use_script(host: Any, script: str, **agent_config: Any) -> None:
    """Play `script` with the scripted provider in sessions attached from now on."""
    host._provider_factory = lambda: make_provider("scripted", None, script_path=script)
    host.choice.default_changed()  # the script names the model sub-agents come back on
    if agent_config:
        host.settings = dataclasses.replace(host.settings, **agent_config)


async def next_event(queue: asyncio.Queue[Any], event_type: str, timeout: float = 30.0) -> Any:
    """The next event of that type from an EventBus subscription."""
    async with asyncio.timeout(timeout):
        while True:
            event = await queue.get()
            if event["type"] == event_type:
                return event


async def run_turn(host: Any, session_id: str, text: str, timeout: float = 60.0) -> dict[str, Any]:
    """Send a message through the host and return the turn_ended event."""
    agent = host.agent(session_id)
    queue = agent.events.subscribe()
    try:
        await host.send(session_id, text)
        async with asyncio.timeout(timeout):
            while True:
                event = await queue.get()
                if event["type"] == "turn_ended":
                    return event
    finally:
        agent.events.unsubscribe(queue)
