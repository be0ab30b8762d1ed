"""A gateway that refuses the server's or the CLI's credentials (401: a wrong
`GatewayClient.auth_token`, user info in the gateway URL) is a gateway error that names the
gateway and the setting to fix: 502 from the server's attach (a 401 there reads as "your Jupyter
login expired" in the browser), one line and exit status 1 from the CLI (review D8)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import urllib.error
from pathlib import Path

import nbformat
import pytest

from .gateway_fixtures import KernelGateway, start_gateway_server
from .lab_process import REPO, shutdown

pytestmark = [pytest.mark.gateway, pytest.mark.timeout(360)]

WRONG_TOKEN = "not-the-gateways-token"


def run_cli(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER_GATEWAY_")}
    environment["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO), str(REPO / "kernel_ext"), os.environ.get("PYTHONPATH", "")) if p
    )
    command = [sys.executable, "-m", "prime_agent_lab.cli", "run", *args]
    return subprocess.run(
        command,
        cwd=cwd,
        env={**environment, **env},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def test_the_servers_attach_answers_a_refused_token_as_a_gateway_error_naming_the_setting(
    kernel_gateway: KernelGateway,
    tmp_path: Path,
) -> None:
    gateway = kernel_gateway
    base = tmp_path / "server"
    base.mkdir(mode=0o700)
    wrong = dataclasses.replace(gateway, token=WRONG_TOKEN)
    server = start_gateway_server(base, wrong, {"turns": [{"text": "hi"}]})
    try:
        nbformat.write(nbformat.v4.new_notebook(), server.root_dir / "analysis.ipynb")
        with pytest.raises(urllib.error.HTTPError) as refused:
            server.api("POST", "prime-agent/api/sessions", {"notebook_path": "analysis.ipynb"})
        answer = refused.value
        message = json.loads(answer.read())["message"]
    finally:
        shutdown(server)
    assert answer.code == 502, message
    assert gateway.url in message, message
    assert "refused" in message and "401" in message, message
    assert "GatewayClient.auth_token" in message, message
    assert WRONG_TOKEN not in message and gateway.token not in message


def test_the_cli_says_the_gateway_refused_its_token_in_one_line(
    kernel_gateway: KernelGateway,
    tmp_path: Path,
) -> None:
    gateway = kernel_gateway
    env = {"JUPYTER_GATEWAY_URL": gateway.url, "JUPYTER_GATEWAY_AUTH_TOKEN": WRONG_TOKEN}

    text = run_cli(tmp_path, env, "hi")
    as_json = run_cli(tmp_path, env, "--mode", "json", "hi")
    host_port = gateway.url.removeprefix("http://")
    with_userinfo = run_cli(
        tmp_path,
        {"JUPYTER_GATEWAY_URL": f"http://someone:secret@{host_port}",
         "JUPYTER_GATEWAY_AUTH_TOKEN": gateway.token},
        "--mode", "json", "hi",
    )  # fmt: skip

    assert text.returncode == 1, text.stderr
    [line] = [line for line in text.stderr.splitlines() if line.strip()][-1:]
    errors = [line for line in text.stderr.splitlines() if "refused" in line]
    assert errors == [line], text.stderr
    assert line.startswith("prime-agent-lab: ") and gateway.url in line, line
    assert "--gateway-auth-token" in line and "JUPYTER_GATEWAY_AUTH_TOKEN" in line, line
    assert "Traceback" not in text.stderr

    assert as_json.returncode == 1, as_json.stderr
    records = [json.loads(line) for line in as_json.stdout.splitlines() if line.strip()]
    assert [r["type"] for r in records] == ["run_start", "run_end"], records
    assert records[1]["error"] == line.removeprefix("prime-agent-lab: "), records[1]

    # A credential in the URL is refused before the gateway is asked (review 2, F7): it would
    # reach the gateway's access log.
    assert with_userinfo.returncode == 2, with_userinfo.stderr
    assert "carries user info (user:token@)" in with_userinfo.stderr, with_userinfo.stderr
    assert "--gateway-auth-token" in with_userinfo.stderr, with_userinfo.stderr
    assert "Traceback" not in with_userinfo.stderr
    for done in (text, as_json, with_userinfo):
        everything = done.stdout + done.stderr
        assert WRONG_TOKEN not in everything and gateway.token not in everything
        assert "secret" not in everything
