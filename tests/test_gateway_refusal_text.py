"""Which gateway answers are told as refused credentials (adapters/gateway_refusal.py): a 401,
not the 403 with which Kernel Gateway refuses a kernel past its `max_kernels`."""

from __future__ import annotations

import pytest
from jupyter_server.gateway.gateway_client import GatewayClient
from tornado.web import HTTPError

from prime_agent_lab.adapters.gateway_refusal import refusal_text


@pytest.fixture
def gateway(monkeypatch: pytest.MonkeyPatch) -> GatewayClient:
    client = GatewayClient.instance()
    monkeypatch.setattr(client, "url", "http://127.0.0.1:8888")
    return client


def _from_gateway(status: int, message: str) -> HTTPError:
    """As jupyter_server's `gateway_request` raises it."""
    return HTTPError(status, f"Error from Gateway: [{message}]")


def test_a_401_is_a_refused_token_and_names_the_setting(gateway: GatewayClient) -> None:
    text = refusal_text(_from_gateway(401, "Unauthorized"), "--gateway-auth-token")
    assert text is not None and "refused the credentials" in text
    assert "HTTP 401 Unauthorized" in text and "--gateway-auth-token" in text


def test_a_403_is_the_gateway_refusing_the_request_not_the_token(gateway: GatewayClient) -> None:
    assert refusal_text(_from_gateway(403, "Resource Limit"), "--gateway-auth-token") is None


def test_without_a_gateway_nothing_is_a_refused_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(GatewayClient.instance(), "url", None)
    assert not GatewayClient.instance().gateway_enabled
    assert refusal_text(_from_gateway(401, "Unauthorized"), "--gateway-auth-token") is None
