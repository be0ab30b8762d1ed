"""The whole loop through the real `anthropic` and `openai` SDKs against a local wire-format server.

The fake model's second cell embeds the number the kernel printed in the first, so a pass proves
observations reach the model through each SDK, streamed and not streamed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from prime_agent_lab.providers import make_provider

from .conftest import run_turn
from .fake_llm_server import CONFIRMED, SECRET, FakeLLMServer
from .test_server_e2e import live_agent_cells


@pytest.fixture
def fake_llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "not-streamed"])
@pytest.mark.parametrize("vendor", ["anthropic", "openai"])
async def test_loop_through_real_sdk_feeds_kernel_output_back_to_the_model(
    vendor: str,
    stream: bool,
    host: Any,
    jp_serverapp: Any,
    make_notebook: Any,
    fake_llm: FakeLLMServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The SDKs' own environment variables point them at the local server, as a user would.
    if vendor == "anthropic":
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_llm.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-anthropic")
    else:
        monkeypatch.setenv("OPENAI_BASE_URL", fake_llm.openai_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")
    host._provider_factory = lambda: make_provider(vendor, "fake-model", stream=stream)
    path = make_notebook(f"{vendor}-{stream}.ipynb")
    agent = await host.attach(path)
    deltas: list[str] = []
    agent.events.add_listener(
        lambda e: deltas.append(e["text"]) if e["type"] == "text_delta" else None
    )

    ended = await run_turn(host, agent.session_id, "Compute the secret, then confirm it.")

    assert ended["stop_reason"] == "end_turn", ended
    assert str(CONFIRMED) in ended["final_text"]
    cells = await live_agent_cells(jp_serverapp, path)
    assert len(cells) == 2
    assert f"secret == {SECRET}" in cells[1]["source"]  # the model used what the kernel printed
    assert f"confirmed {CONFIRMED}" in "".join(o.get("text", "") for o in cells[1]["outputs"])
    assert {r.vendor for r in fake_llm.requests} == {vendor}
    assert all(r.body.get("stream", False) == stream for r in fake_llm.requests)
    assert "".join(deltas).strip(), "text reached the chat as deltas"
    usage = [e["usage"] for e in agent.session.path() if e["type"] == "assistant_message"]
    assert all(u["input_tokens"] > 0 and u["output_tokens"] > 0 for u in usage)


async def test_a_base_url_that_answers_with_a_web_page_ends_the_turn_at_once_saying_so(
    host: Any, make_notebook: Any, fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`OPENAI_BASE_URL` pointing at a web page (200, text/html): one request, no retries, and
    the chat is told the address is wrong, not that a stream dropped."""
    monkeypatch.setenv("OPENAI_BASE_URL", fake_llm.openai_base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")
    host._provider_factory = lambda: make_provider("openai", "fake-model", stream=True)
    agent = await host.attach(make_notebook("web-page.ipynb"))
    seen: list[dict[str, Any]] = []
    agent.events.add_listener(seen.append)
    fake_llm.page_next()

    ended = await run_turn(host, agent.session_id, "hello")

    assert ended["stop_reason"] == "error", ended
    assert len(fake_llm.requests) == 1
    assert not [e for e in seen if e["type"] == "retry"]
    (error,) = [e for e in seen if e["type"] == "error"]
    assert (
        f"the server at {fake_llm.openai_base_url}/chat/completions answered with text/html, "
        "not the OpenAI-compatible API: check the base URL (OPENAI_BASE_URL or base_url)"
    ) in error["message"]
