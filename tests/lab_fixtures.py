"""Fixtures for tests whose `jupyter lab` is a subprocess (`tests/lab_process.py`), not
pytest-jupyter's in-process server. A test module imports them by name:
`from .lab_fixtures import jp_asyncio_loop, jp_server_cleanup, servers, start_server`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .lab_process import LabServer, ServerDidNotStart, shutdown, start_lab

NO_KERNEL_POOL = ("--PrimeAgentLab.kernel_pool_size=0",)


@pytest.fixture
def jp_asyncio_loop() -> Iterator[None]:
    yield None  # no in-process server here: the server is a subprocess


@pytest.fixture
def jp_server_cleanup() -> Iterator[None]:
    yield None


@pytest.fixture
def servers() -> Iterator[list[LabServer]]:
    started: list[LabServer] = []
    yield started
    for server in started:
        shutdown(server)


def start_server(
    base: Path,
    servers: list[LabServer],
    script: dict[str, Any],
    extra_args: tuple[str, ...] = NO_KERNEL_POOL,
    provider: str = "scripted",
) -> LabServer:
    """Start (or restart) the server on `base`, failing the test if it does not come up; the
    `servers` fixture shuts it down after the test."""
    try:
        server = start_lab(base, script, extra_args=extra_args, provider=provider)
    except ServerDidNotStart as exc:
        pytest.fail(str(exc), pytrace=False)
    servers.append(server)
    return server
