"""A kernel cannot read the provider keys: not in its own environment, not in the host process's
`/proc/<pid>/environ`, whoever started the kernel (JupyterLab through the server's sessions API,
the agent, the CLI); and the provider still authenticates with them, through the real SDKs.

The server is a real `jupyter lab` subprocess and the CLI a real `prime-agent-lab run`, each
started with the three key variables in its environment; the model is tests/fake_llm_server.py,
which records the credentials each request carries. The agent's cell writes what its kernel can
read to a file, so the test sees exactly that (redaction never hides a finding).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest

from prime_agent_lab.core.held_keys import HeldKeys
from prime_agent_lab.core.messages import Message, ModelRequest
from prime_agent_lab.providers import make_provider

from .fake_llm_server import FakeLLMServer, Policy, RecordedRequest, Reply
from .lab_fixtures import (  # noqa: F401  (fixtures: a subprocess server, no in-process one)
    NO_KERNEL_POOL,
    jp_asyncio_loop,
    jp_server_cleanup,
    servers,
    start_server,
)
from .lab_process import LabServer
from .test_cli import ROOT, cli_with_env, json_lines
from .test_server_crash import (
    turn_ends,
    wait_until,
)

LINUX = sys.platform.startswith("linux")
KEYS = {
    "ANTHROPIC_API_KEY": "sk-ant-api03-withheld-7f3e9a1c5b",
    "ANTHROPIC_AUTH_TOKEN": "tok-withheld-2d8b6e4f0a",
    "OPENAI_API_KEY": "sk-proj-withheld-9c1a7e5d3b",
}

DUMP_CODE = """\
import json, os
def read(path):
    try:
        with open(path, 'rb') as f:
            return f.read().decode('latin-1')
    except OSError as exc:
        return None
host = os.getppid()
seen = {
    'host_pid': host,
    'host_cmdline': read(f'/proc/{host}/cmdline'),
    'host_environ': read(f'/proc/{host}/environ'),
    'own_environ': read('/proc/self/environ'),
    'os_environ': dict(os.environ),
}
with open(f'seen-by-kernel-{os.getpid()}.json', 'w') as f:
    json.dump(seen, f)
print('written', os.getpid())
"""


def last_user_text(request: RecordedRequest) -> str:
    for message in reversed(request.messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        texts = [b.get("text", "") for b in content or [] if b.get("type") == "text"]
        if texts:
            return "".join(texts)
    return ""


def cell_per_message(codes: dict[str, str]) -> Policy:
    """A message containing a key of `codes` gets that code as one cell; after the cell, the
    answer is the last line it printed."""

    def policy(request: RecordedRequest) -> Reply:
        results = request.turn_tool_results()
        if results:
            lines = [line for line in results[-1].splitlines() if line.strip()]
            return Reply(text=lines[-1] if lines else "(no output)")
        text = last_user_text(request)
        for word, code in codes.items():
            if word in text:
                return Reply.code(code)
        return Reply(text="nothing to do")

    return policy


def assert_no_key_in(seen: dict[str, Any]) -> None:
    for name, value in KEYS.items():
        assert name not in seen["os_environ"], f"the kernel has {name} in its environment"
        for where in ("host_environ", "own_environ"):
            assert value not in (seen[where] or ""), f"the kernel read {name} in {where}"


def turns_ended(base: Path, session_id: str) -> list[tuple[int, str]]:
    """(turn, stop_reason) of each `turn_end` so far; none before the log is written."""
    try:
        return turn_ends(base, session_id)
    except FileNotFoundError:
        return []


def kernel_findings(root: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(root.glob("seen-by-kernel-*.json"))]


def test_kernels_of_a_real_server_cannot_read_the_keys_and_its_provider_still_authenticates(
    tmp_path: Path,
    servers: list[LabServer],  # noqa: F811  (the fixture imported above)
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with FakeLLMServer(cell_per_message({"look": DUMP_CODE})) as model:
        for name, value in KEYS.items():
            monkeypatch.setenv(name, value)  # the server starts with all three keys
        monkeypatch.setenv("ANTHROPIC_BASE_URL", model.base_url)
        server = start_server(
            tmp_path,
            servers,
            {"turns": []},
            extra_args=("--PrimeAgentLab.model=fake-model", *NO_KERNEL_POOL),
            provider="anthropic",
        )
        root = server.root_dir
        for name in ("lab.ipynb", "agent.ipynb"):
            nbformat.write(nbformat.v4.new_notebook(), root / name)
        # As JupyterLab does when it opens a notebook: a Jupyter session starts its kernel.
        opened = server.api(
            "POST",
            "api/sessions",
            {
                "path": "lab.ipynb",
                "name": "lab.ipynb",
                "type": "notebook",
                "kernel": {"name": "python3"},
            },
        )
        for notebook in ("lab.ipynb", "agent.ipynb"):  # agent.ipynb: the agent starts its kernel
            info = server.api("POST", "prime-agent/api/sessions", {"notebook_path": notebook})
            if notebook == "lab.ipynb":
                assert info["kernel_id"] == opened["kernel"]["id"]
            sid = info["session_id"]
            server.api("POST", f"prime-agent/api/sessions/{sid}/messages", {"text": "look"})
            wait_until(lambda s=sid: turns_ended(tmp_path, s), f"the turn in {notebook}", server)
            assert turns_ended(tmp_path, sid) == [(1, "end_turn")], server.log_tail()

    findings = kernel_findings(root)
    assert len(findings) == 2, server.log_tail()
    for seen in findings:
        assert seen["host_pid"] == server.process.pid  # what the kernel read is the server's
        assert_no_key_in(seen)
    # The real Anthropic SDK sent the API key it was handed (its choice over the auth token).
    assert model.requests and {r.api_key for r in model.requests} == {KEYS["ANTHROPIC_API_KEY"]}
    assert "provider keys withheld from kernels" in server.log_path.read_text()


def test_the_cli_kernel_cannot_read_the_keys_and_the_openai_sdk_still_authenticates(
    tmp_path: Path,
) -> None:
    with FakeLLMServer(cell_per_message({"look": DUMP_CODE})) as model:
        env = {**KEYS, "OPENAI_BASE_URL": model.openai_base_url}
        done = cli_with_env(
            tmp_path,
            env,
            "run",
            "--mode",
            "json",
            "--provider",
            "openai",
            "--model",
            "fake-model",
            "look",
        )
    assert done.returncode == 0, done.stderr
    assert json_lines(done.stdout)[-1]["final_text"].startswith("written ")
    [seen] = kernel_findings(tmp_path)
    assert "prime_agent_lab.cli" in (seen["host_cmdline"] or "")  # the kernel's parent: the CLI
    assert_no_key_in(seen)
    assert {r.api_key for r in model.requests} == {KEYS["OPENAI_API_KEY"]}


@pytest.mark.parametrize(
    ("held", "sent"),
    [
        ({"ANTHROPIC_AUTH_TOKEN": KEYS["ANTHROPIC_AUTH_TOKEN"]}, KEYS["ANTHROPIC_AUTH_TOKEN"]),
        (KEYS, KEYS["ANTHROPIC_API_KEY"]),
    ],
    ids=["auth-token", "api-key-wins"],
)
def test_the_anthropic_sdk_authenticates_with_the_held_credential_alone(
    held: dict[str, str], sent: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in KEYS:
        monkeypatch.delenv(name, raising=False)

    async def call(base_url: str) -> None:
        provider = make_provider(
            "anthropic",
            "fake-model",
            base_url=base_url,
            stream=False,
            held_keys=HeldKeys(held),
        )
        request = ModelRequest(system="", messages=[Message(role="user", text="hi")], tools=[])
        async for _ in provider.stream(request):
            pass
        await provider.aclose()

    with FakeLLMServer(lambda request: Reply(text="ok")) as model:
        asyncio.run(call(model.base_url))
    [request] = model.requests
    assert request.api_key == sent
    others = [v for v in KEYS.values() if v != sent]
    assert not any(v in str(request.headers) for v in others)


def test_withholding_wipes_the_values_from_the_processs_proc_environ() -> None:
    if not LINUX:
        pytest.skip("the initial environment block is wiped on Linux only")
    code = (
        "import json, os, subprocess, sys\n"
        "from prime_agent_lab.adapters.withhold_keys import withhold_keys\n"
        "done = withhold_keys(['ANTHROPIC_API_KEY', 'ANTHROPIC_AUTH_TOKEN', 'OPENAI_API_KEY'])\n"
        "child = subprocess.run([sys.executable, '-c', 'import os; "
        'print(open(f"/proc/{os.getppid()}/environ", "rb").read().decode("latin-1"))\'],'
        " capture_output=True, text=True).stdout\n"
        "print(json.dumps({'held': sorted(done.keys), 'wiped_bytes': done.wiped_bytes,"
        " 'undumpable': done.undumpable, 'problems': done.problems, 'child_read': child,"
        " 'left': [n for n in done.keys if n in os.environ], 'repr': repr(done.keys)}))\n"
    )
    env = {**os.environ, **KEYS, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["held"] == sorted(KEYS) and report["left"] == []
    assert report["wiped_bytes"] == sum(len(v) for v in KEYS.values())
    assert report["undumpable"] is True and report["problems"] == []
    assert "ANTHROPIC_API_KEY=" in report["child_read"]  # the names stay, the values are gone
    assert not any(value in report["child_read"] for value in KEYS.values())
    assert not any(value in report["repr"] for value in KEYS.values())


def test_a_process_of_the_same_user_cannot_read_the_environ_of_a_non_dumpable_process() -> None:
    """What non-dumpable adds where the test runs as root (CAP_SYS_PTRACE reads anything): two
    processes of one ordinary user, before and after the target makes itself non-dumpable."""
    if not LINUX or os.geteuid() != 0:
        pytest.skip("needs Linux and root, to run both processes as another user")
    nobody = 65534
    target_code = (
        "import os, sys\n"
        "from prime_agent_lab.adapters import withhold_keys as w\n"
        f"os.setgid({nobody}); os.setuid({nobody})\n"
        "w._prctl()(w.PR_SET_DUMPABLE, 1, 0, 0, 0)  # setuid cleared it; start from dumpable\n"
        "print(w.is_dumpable(), flush=True)\n"
        "sys.stdin.readline()\n"
        "print(w.make_undumpable(), flush=True)\n"
        "sys.stdin.readline()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    target = subprocess.Popen(
        [sys.executable, "-c", target_code],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert target.stdin is not None and target.stdout is not None
    reader = (
        f"import os\nos.setgid({nobody}); os.setuid({nobody})\n"
        "try:\n"
        f"    open('/proc/{target.pid}/environ', 'rb').read(); print('read')\n"
        "except PermissionError:\n"
        "    print('denied')\n"
    )

    def read_as_same_user() -> str:
        run = subprocess.run([sys.executable, "-c", reader], capture_output=True, text=True)
        return run.stdout.strip() or run.stderr

    try:
        assert target.stdout.readline().strip() == "True"
        before = read_as_same_user()
        target.stdin.write("\n")
        target.stdin.flush()
        assert target.stdout.readline().strip() == "True"
        after = read_as_same_user()
        target.stdin.write("\n")
        target.stdin.flush()
        target.wait(timeout=30)
    finally:
        target.kill()
    assert (before, after) == ("read", "denied")
