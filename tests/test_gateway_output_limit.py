"""A cell printing megabytes on a gateway's kernel: the gateway's IOPub data rate limit (1 MB/s by
default) drops most of it, and the model and the chat are told what was dropped, which setting of
the gateway raises the limit and how to print less (review D6); with the limit raised by that
setting, the whole output arrives and nothing is told."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from prime_agent_lab.adapters.output_rate_limit import SETTING
from prime_agent_lab.core.sessions import SESSION_FILE

from .gateway_fixtures import KernelGateway, started_kernel_gateway
from .test_gateway_refusals import run_cli

pytestmark = [pytest.mark.gateway, pytest.mark.timeout(360)]

LINES, WIDTH = 60, 100_000  # 6 MB in 60 stream messages
FLOOD = f"for i in range({LINES}):\n    print(str(i % 10) * {WIDTH})\nprint('after the flood')"
SCRIPT = {"turns": [{"code": FLOOD}, {"text": "done"}]}


def flood_on(gateway: KernelGateway, folder: Path) -> dict[str, Any]:
    """The CLI's run of the flooding cell on `gateway`: its observation, the notices of the
    session, and the JSON events."""
    folder.mkdir()
    (folder / "flood.json").write_text(json.dumps(SCRIPT))
    env = {"JUPYTER_GATEWAY_URL": gateway.url, "JUPYTER_GATEWAY_AUTH_TOKEN": gateway.token}
    done = run_cli(
        folder, env, "--mode", "json", "--script", "flood.json", "--kernel-pool-size", "0", "go"
    )
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    [log_path] = (folder / ".prime-agent" / "sessions").glob(f"*/{SESSION_FILE}")
    entries = [json.loads(line) for line in log_path.read_text().splitlines() if line]
    [result] = [e for e in entries if e["type"] == "tool_result"]
    return {
        "observation": result["observation"],
        "notices": [(e["kind"], e["text"]) for e in entries if e["type"] == "notice"],
        "pushed": [(e["kind"], e["text"]) for e in events if e["type"] == "notice"],
        "notebook": (folder / "agent.ipynb").read_text(),
    }


def test_output_dropped_by_the_gateways_rate_limit_is_told_with_the_setting_and_a_remedy(
    kernel_gateway: KernelGateway,
    tmp_path: Path,
) -> None:
    seen = flood_on(kernel_gateway, tmp_path / "run")

    observation = seen["observation"]
    assert "IOPub data rate exceeded" in observation  # what the gateway sent instead
    assert "[output dropped]" in observation, observation[-2000:]
    assert SETTING in observation and "slice or a summary" in observation
    [(kind, text)] = seen["notices"]
    assert kind == "output_rate_limited" and SETTING in text
    assert seen["pushed"] == seen["notices"]  # the chat (here the CLI's events) heard it
    assert seen["notebook"].count("9" * WIDTH) < LINES // 10  # most lines never arrived


def test_the_setting_named_raises_the_limit_and_then_nothing_is_dropped_or_told(
    kernel_gateway: KernelGateway,
    tmp_path: Path,
) -> None:
    raised = f"--{SETTING}=1e12"
    with started_kernel_gateway(tmp_path, raised) as gateway:
        seen = flood_on(gateway, tmp_path / "run")

    assert "IOPub data rate exceeded" not in seen["observation"]
    assert "[output dropped]" not in seen["observation"] and seen["notices"] == []
    assert seen["notebook"].count("9" * WIDTH) == LINES // 10  # every line arrived
    assert "after the flood" in seen["notebook"]
