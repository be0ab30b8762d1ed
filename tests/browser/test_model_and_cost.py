"""Model and cost in the browser (docs/pairing.md, section 2): the model picker switches the model
the next request asks for (asserted on the request the local OpenAI stand-in received), each
answer's footer, the context use beside the input, the session's cost in the header and the
status-bar item, readable in the light and dark themes, and all of it again after a reload.

The lab runs the real `openai` provider, pointed at `tests/fake_llm_server.py` through the SDK's
own environment variables, with two models offered.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from ..fake_llm_server import FakeLLMServer, RecordedRequest, Reply
from ..lab_process import ServerDidNotStart, shutdown, start_lab
from .conftest import LabServer, save_screenshot, send_to_chat
from .test_branch_badge import _switch_theme
from .test_chat_panel import (
    KERNEL_IDLE_TIMEOUT,
    TURN_TIMEOUT_MS,
    UI_TIMEOUT_MS,
    _create_notebook,
    _open_notebook,
    _open_panel,
    _wait_for_idle_kernel,
)
from .test_pairing_keyboard import _unreadable

pytestmark = pytest.mark.browser

FIRST_MODEL = "gpt-4.1"
SECOND_MODEL = "gpt-4.1-mini"
ANSWER = "Hello from the stand-in."


def _answer(request: RecordedRequest) -> Reply:
    return Reply(ANSWER)


@pytest.fixture(scope="module")
def fake_llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(policy=_answer) as server:
        yield server


@pytest.fixture(scope="module")
def lab_server(
    tmp_path_factory: pytest.TempPathFactory,
    lab_user_settings: dict[str, dict[str, Any]],
    fake_llm: FakeLLMServer,
) -> Iterator[LabServer]:
    """A lab on the `openai` provider (the stand-in) offering two models."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("OPENAI_BASE_URL", fake_llm.openai_base_url)
        env.setenv("OPENAI_API_KEY", "sk-test-openai")
        try:
            server = start_lab(
                tmp_path_factory.mktemp("lab"),
                {"turns": []},
                lab_user_settings,
                extra_args=(
                    f"--PrimeAgentLab.model={FIRST_MODEL}",
                    f"--PrimeAgentLab.subagent_models=openai/{SECOND_MODEL}",
                ),
                provider="openai",
            )
        except ServerDidNotStart as exc:
            pytest.fail(str(exc), pytrace=False)
    try:
        yield server
    finally:
        shutdown(server)


def _connected_panel(page: Any, server: LabServer, name: str) -> Any:
    from playwright.sync_api import expect

    _open_notebook(page, server, name)
    expect(page.locator(".jp-NotebookPanel")).to_be_visible(timeout=UI_TIMEOUT_MS)
    panel = _open_panel(page)
    expect(panel.get_by_test_id("pal-status")).to_have_attribute(
        "data-connection", "connected", timeout=UI_TIMEOUT_MS
    )
    return panel


def test_the_picker_switches_the_next_request_and_the_costs_show(
    lab_server: LabServer, page: Any, fake_llm: FakeLLMServer
) -> None:
    from playwright.sync_api import expect

    name = "model-and-cost.ipynb"
    _create_notebook(lab_server, name)
    _open_notebook(page, lab_server, name)
    _wait_for_idle_kernel(lab_server, name, KERNEL_IDLE_TIMEOUT)
    panel = _connected_panel(page, lab_server, name)

    picker = panel.get_by_role("combobox", name="Model")
    expect(picker).to_have_value(f"openai/{FIRST_MODEL}", timeout=UI_TIMEOUT_MS)
    expect(picker.locator("option")).to_have_text(
        [f"openai/{FIRST_MODEL}", f"openai/{SECOND_MODEL}"]
    )
    picker.select_option(f"openai/{SECOND_MODEL}")
    expect(panel.get_by_test_id("pal-status")).to_contain_text(SECOND_MODEL, timeout=UI_TIMEOUT_MS)

    before = len(fake_llm.requests)
    send_to_chat(panel, "Say hello.")
    expect(panel.get_by_test_id("pal-assistant").last).to_have_text(ANSWER, timeout=TURN_TIMEOUT_MS)
    asked = [r.body["model"] for r in fake_llm.requests[before:]]
    assert asked == [SECOND_MODEL], asked

    footer = panel.get_by_test_id("pal-answer-footer").last
    expect(footer).to_have_text(re.compile(rf"^{re.escape(SECOND_MODEL)} · \S+ in · \S+ out · \$"))
    expect(panel.get_by_test_id("pal-context-use")).to_have_text(
        re.compile(r"^Context [\d.]+ % of 1M$"), timeout=UI_TIMEOUT_MS
    )
    expect(panel.get_by_test_id("pal-session-cost")).to_have_text(
        re.compile(r"^Cost \$[\d.]+$"), timeout=UI_TIMEOUT_MS
    )
    status_item = page.get_by_test_id("pal-status-item")
    expect(status_item).to_have_text(
        re.compile(r"^Prime Agent: idle · \$[\d.]+$"), timeout=UI_TIMEOUT_MS
    )
    # Both themes: a screenshot each, and every text of the panel (picker, context use, footer,
    # cost) at least 4.5:1 against its background.
    try:
        for theme, light in (("JupyterLab Light", "true"), ("JupyterLab Dark", "false")):
            _switch_theme(page, theme)
            expect(page.locator("body")).to_have_attribute(
                "data-jp-theme-light", light, timeout=UI_TIMEOUT_MS
            )
            expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=UI_TIMEOUT_MS)
            save_screenshot(page, f"model-and-cost-{'light' if light == 'true' else 'dark'}.png")
            assert _unreadable(panel) == [], theme
    finally:
        _switch_theme(page, "JupyterLab Light")

    page.reload()
    panel = _connected_panel(page, lab_server, name)
    expect(panel.get_by_role("combobox", name="Model")).to_have_value(
        f"openai/{SECOND_MODEL}", timeout=UI_TIMEOUT_MS
    )
    expect(panel.get_by_test_id("pal-answer-footer")).to_have_count(1)
    expect(panel.get_by_test_id("pal-answer-footer")).to_contain_text(SECOND_MODEL)
    expect(page.get_by_test_id("pal-status-item")).to_contain_text("Prime Agent: idle")
