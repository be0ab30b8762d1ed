"""The server's settings for outcomes reach the provider, the loop and the kernels it starts."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import run_turn, use_script
from .test_outcomes import PLOT


@pytest.fixture
def prime_agent_config() -> dict[str, Any]:
    return {
        "accepts_images": False,
        "fenced_code_fallback": True,
        "step_delay": 0.25,
        "max_retry_after": 7.0,
        "kernel_env_strip": ["EXTRA_SECRET"],
    }


async def test_server_settings_reach_the_provider_the_loop_and_the_kernel(
    host: Any, make_notebook: Any, agent_script: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = host._provider_factory()
    assert (provider.fenced_code, provider.step_delay) == (True, 0.25)
    assert (host.settings.accepts_images, host.settings.max_retry_after) == (False, 7)

    monkeypatch.setenv("EXTRA_SECRET", "not-for-kernels-123")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-kept-by-this-config-456")
    code = (
        f"import os\nprint(os.environ.get('EXTRA_SECRET'), 'OPENAI_API_KEY' in os.environ)\n{PLOT}"
    )
    use_script(host, agent_script([{"code": code}, {"text": "{last_output}"}]))
    agent = await host.attach(make_notebook("config.ipynb"))

    ended = await run_turn(host, agent.session_id, "go")

    assert "None True" in ended["final_text"]
    assert "<image/png image shown in the notebook" in ended["final_text"]
