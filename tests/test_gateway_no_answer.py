"""A gateway that takes the connection but never answers (stopped, hung, overloaded):
jupyter_server's own `gateway_request` gives up after its request timeout, and that error is told
as the gateway's failure naming the setting that bounds the wait, not as a harness error per
cell."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from jupyter_server.gateway.gateway_client import (
    GatewayClient,
    RetryableHTTPClient,
    gateway_request,
)
from tornado import web

from prime_agent_lab.adapters.gateway_gone import GatewayGone, gateway_gone


@pytest_asyncio.fixture
async def silent_gateway() -> AsyncIterator[str]:
    """A TCP server that accepts and reads but never writes a byte."""
    held: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)
        await reader.read()  # until the client gives up

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    for writer in held:
        writer.close()
    server.close()
    await server.wait_closed()


async def test_a_gateway_that_never_answers_is_told_as_gone_naming_the_timeout_setting(
    silent_gateway: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The request timeout is at least KERNEL_LAUNCH_TIMEOUT plus a pad (42 s by default).
    monkeypatch.setattr(GatewayClient, "KERNEL_LAUNCH_TIMEOUT", 0)
    # jupyter_server writes it into os.environ too: undone after the test, or every later test's
    # server and CLI would start gateway kernels with a launch timeout of 0.
    monkeypatch.setenv("KERNEL_LAUNCH_TIMEOUT", "0")
    monkeypatch.setattr(RetryableHTTPClient, "max_retries", 0)
    GatewayClient.clear_instance()
    GatewayClient.instance(url=silent_gateway, request_timeout=1.0, launch_timeout_pad=0.0)
    kernel_url = f"{silent_gateway}/api/kernels/6f0c1f1e"
    try:
        with pytest.raises(web.HTTPError) as raised:
            await asyncio.wait_for(gateway_request(kernel_url, method="GET"), timeout=30)
    finally:
        GatewayClient.clear_instance()
    assert raised.value.status_code == 599

    gone = gateway_gone(raised.value, kernel_url)
    assert isinstance(gone, GatewayGone)
    assert str(gone).startswith(f"the gateway {silent_gateway} did not answer in time")
    assert "JUPYTER_GATEWAY_REQUEST_TIMEOUT" in str(gone) and "/api/kernels" not in str(gone)
    assert "the gateway did not answer" in str(gateway_gone(raised.value))  # no address known
    # Not a gateway's error: left to the caller.
    assert gateway_gone(web.HTTPError(599, "something else")) is None
