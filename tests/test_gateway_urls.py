"""A gateway URL pasted with spaces around it, or carrying a credential, is refused at start in
one line by the CLI and by the server (no real gateway needed: nothing is contacted)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from prime_agent_lab.core.gateway_url import printable_url, url_problem

from .lab_process import server_exit
from .test_cli import cli, cli_with_env

SECRET = "gw-url-secret-4d1f"
BLANKS = "holds a space or a control character"
CREDENTIAL = "give the gateway's token with"

ODD_URLS = [
    (" http://127.0.0.1:18931", BLANKS),
    ("http://127.0.0.1:18931 ", BLANKS),
    ("http://127.0.0.1:18931\n", BLANKS),
    (f"http://127.0.0.1:18931/?token={SECRET}", CREDENTIAL),
    (f"http://user:{SECRET}@127.0.0.1:18931", CREDENTIAL),
    (f"http://127.0.0.1:18931/#{SECRET}", CREDENTIAL),
]


@pytest.mark.parametrize(("url", "why"), ODD_URLS)
def test_an_odd_gateway_url_is_a_problem_that_does_not_repeat_it(url: str, why: str) -> None:
    problem = url_problem(url, "the-token-setting")
    assert problem is not None and why in problem
    assert SECRET not in problem and "127.0.0.1" not in problem


def test_a_printed_gateway_url_still_hides_a_credential() -> None:
    assert printable_url(f"http://u:{SECRET}@gw:8888/base?token={SECRET}#f") == (
        "http://gw:8888/base"
    )


def test_the_cli_refuses_an_odd_gateway_url_in_one_line(tmp_path: Path) -> None:
    """A leading space was a 30-line TraitError from the flag and a late `scheme  ws is invalid`
    from the environment; a token in the query was accepted (review 2, F7)."""
    for url, why in ODD_URLS:
        for done in (
            cli(tmp_path, "run", "--gateway-url", url, "hi"),
            cli_with_env(tmp_path, {"JUPYTER_GATEWAY_URL": url}, "run", "hi"),
        ):
            assert done.returncode == 2, (url, done.stderr)
            assert "--gateway-url (or JUPYTER_GATEWAY_URL) " in done.stderr and why in done.stderr
            if why == CREDENTIAL:
                assert "--gateway-auth-token (or JUPYTER_GATEWAY_AUTH_TOKEN)" in done.stderr
            assert "Traceback" not in done.stderr and SECRET not in done.stderr
    assert not (tmp_path / ".prime-agent").exists()


@pytest.mark.parametrize(
    ("url", "why"),
    [(" http://127.0.0.1:18931", BLANKS), (f"http://127.0.0.1:18931/?token={SECRET}", CREDENTIAL)],
)
def test_the_server_refuses_an_odd_gateway_url_at_start_in_one_line(
    tmp_path: Path, url: str, why: str
) -> None:
    env = {**os.environ, "JUPYTER_GATEWAY_URL": url}
    done = server_exit(tmp_path, env=env)
    assert done.returncode == 1, done.stderr[-2000:]
    assert (
        "Prime Agent Lab cannot start: the gateway URL (c.GatewayClient.url, JUPYTER_GATEWAY_URL "
        "or jupyter_server's gateway-url option) " in done.stderr
    )
    assert why in done.stderr and "Traceback" not in done.stderr and SECRET not in done.stderr
    if why == CREDENTIAL:
        assert "c.GatewayClient.auth_token (or JUPYTER_GATEWAY_AUTH_TOKEN)" in done.stderr
