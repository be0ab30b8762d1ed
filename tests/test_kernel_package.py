"""A kernel without the kernel package, or with another version of it, on a real server: the
agent still runs its cells, and the chat (a `kernel_package_problem` notice) and the first
cell's observation say what is wrong and what to install (docs/gateway.md, "What a gateway
kernel image needs").

Both kernels are real ipykernel processes of their own kernelspec. One runs with a `sys.path`
that holds no directory with `prime_agent_kernel` in it (a Python where the package is not
installed); the other imports a copy of the package whose version and bridge protocol are older
than the server's (a gateway image that lags behind the server)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import prime_agent_kernel
import pytest
from prime_agent_kernel.operations import WIRE_VERSION

from prime_agent_lab.adapters.kernel_package_check import problem
from prime_agent_lab.version import __version__

from .conftest import next_event, run_turn, use_script

WITHOUT_PACKAGE = "without-agent-package"
OLDER_PACKAGE = "older-agent-package"
OLDER_VERSION = "0.0.9"
# The kernel's Python: every path entry that holds the package is dropped before the kernel
# starts (wherever the product is installed from: the checkout, PYTHONPATH, an editable install).
HIDE_AND_LAUNCH = (
    "import os, sys\n"
    "sys.path[:] = [p for p in sys.path "
    "if not os.path.isdir(os.path.join(p or '.', 'prime_agent_kernel'))]\n"
    "from ipykernel import kernelapp\n"
    "kernelapp.launch_new_instance()\n"
)
PROBE = (
    "import importlib.util\n"
    "spec = importlib.util.find_spec('prime_agent_kernel')\n"
    "print(6 * 7, 'rlm' in dir(), spec.origin if spec else None)"
)


def write_kernelspec(data_dir: Path, name: str, spec: dict[str, Any]) -> None:
    folder = data_dir / "kernels" / name
    folder.mkdir(parents=True)
    spec = {"display_name": name, "language": "python", "metadata": {}, **spec}
    (folder / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")


def older_package(folder: Path) -> Path:
    """A real copy of the kernel package, released before this server: an older version
    number and bridge protocol."""
    source = Path(prime_agent_kernel.__file__).parent
    target = folder / "prime_agent_kernel"
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
    for name, old, new in (
        ("version.py", f'__version__ = "{__version__}"', f'__version__ = "{OLDER_VERSION}"'),
        ("operations.py", "PROTOCOL_VERSION = ", "PROTOCOL_VERSION = -1 + "),
    ):
        path = target / name
        text = path.read_text(encoding="utf-8")
        assert old in text, f"{name} no longer has {old!r}"
        path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return folder


@pytest.fixture
def prime_agent_config(
    request: pytest.FixtureRequest, jp_data_dir: Path, tmp_path: Path
) -> dict[str, Any]:
    """The agent's kernels come from the kernelspec the test names (written before the server
    starts); without one, the server's own `python3`."""
    name = getattr(request, "param", None)
    if name is None:
        return {}
    if name == WITHOUT_PACKAGE:
        argv = [sys.executable, "-c", HIDE_AND_LAUNCH, "-f", "{connection_file}"]
        write_kernelspec(jp_data_dir, name, {"argv": argv})
    else:
        argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        env = {"PYTHONPATH": str(older_package(tmp_path / "older"))}
        write_kernelspec(jp_data_dir, name, {"argv": argv, "env": env})
    return {"kernel_name": name}


def script(tmp_path: Path) -> str:
    turns = [{"code": PROBE}, {"text": "first"}, {"code": PROBE}, {"text": "second"}]
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"turns": turns}), encoding="utf-8")
    return str(path)


async def two_turns(host: Any, make_notebook: Any, tmp_path: Path) -> dict[str, Any]:
    """Two turns of one probe cell each: the entries, the notices the chat was sent, and the
    chat's transcript as the server gives it."""
    use_script(host, script(tmp_path))
    agent = await host.attach(make_notebook())
    queue = agent.events.subscribe()
    for text in ("first", "second"):
        ended = await run_turn(host, agent.session_id, text)
        assert ended["final_text"] == text, ended
    pushed = [queue.get_nowait() for _ in range(queue.qsize())]
    agent.events.unsubscribe(queue)
    return {
        "session_id": agent.session_id,
        "results": [e for e in agent.session.entries if e["type"] == "tool_result"],
        "notices": [e for e in agent.session.entries if e["type"] == "notice"],
        "pushed": [e for e in pushed if e["type"] == "notice"],
    }


@pytest.mark.parametrize("prime_agent_config", [WITHOUT_PACKAGE], indirect=True)
async def test_a_kernel_without_the_package_runs_cells_and_the_chat_says_what_to_install(
    host: Any, make_notebook: Any, tmp_path: Path, jp_fetch: Any
) -> None:
    seen = await two_turns(host, make_notebook, tmp_path)

    first, second = seen["results"]
    assert (first["status"], second["status"]) == ("ok", "ok")
    assert "42 False None" in first["observation"]  # ran, no `rlm`, no package to find
    assert "42 False None" in second["observation"]
    [notice] = seen["notices"]
    assert notice["kind"] == "kernel_package_problem" and notice["turn"] == 1
    text = notice["text"]
    assert text.startswith("This kernel has no `prime_agent_kernel`:")
    assert "`rlm`, `history`, snapshots and sub-agents are unavailable" in text
    assert "install `prime-agent-kernel` in the kernel's environment" in text
    assert "docs/gateway.md" in text and "Cells still run." in text
    assert f"[note] {text}" in first["observation"]  # the model is told in the same words
    assert "prime_agent_kernel" not in second["observation"]  # once, not at every cell
    assert [(e["kind"], e["text"]) for e in seen["pushed"]] == [(notice["kind"], text)]
    detail = json.loads((await jp_fetch("prime-agent", "api", "sessions", seen["session_id"])).body)
    assert text in [i["text"] for i in detail["transcript"] if i["type"] == "notice"]


@pytest.mark.parametrize("prime_agent_config", [OLDER_PACKAGE], indirect=True)
async def test_a_kernel_with_another_version_of_the_package_is_told_with_both_versions(
    host: Any, make_notebook: Any, tmp_path: Path
) -> None:
    seen = await two_turns(host, make_notebook, tmp_path)

    first, _ = seen["results"]
    older = tmp_path / "older" / "prime_agent_kernel" / "__init__.py"
    assert f"42 True {older}" in first["observation"]  # the kernel set up the older copy
    [notice] = seen["notices"]
    assert notice["kind"] == "kernel_package_problem"
    text = notice["text"]
    older_wire = f"{int(WIRE_VERSION.split('.')[0]) - 1}.{WIRE_VERSION.split('.')[1]}"
    assert text.startswith(
        f"This kernel's `prime_agent_kernel` is version {OLDER_VERSION}, bridge wire version "
        f"{older_wire}; the server's is version {__version__}, wire version {WIRE_VERSION}."
    )
    assert f"Install `prime-agent-kernel=={__version__}` in the kernel's environment" in text
    assert f"[note] {text}" in first["observation"]
    assert [e["text"] for e in seen["pushed"]] == [text]


async def test_the_server_s_own_kernel_has_the_package_of_its_version_and_no_notice(
    host: Any, make_notebook: Any, tmp_path: Path
) -> None:
    use_script(host, script(tmp_path))
    agent = await host.attach(make_notebook())
    queue = agent.events.subscribe()
    ended = await run_turn(host, agent.session_id, "first")
    assert ended["final_text"] == "first"
    with pytest.raises(TimeoutError):
        await next_event(queue, "notice", timeout=0.5)
    [result] = [e for e in agent.session.entries if e["type"] == "tool_result"]
    assert "42 True" in result["observation"] and "[note]" not in result["observation"]


MISSING = {
    "status": "error",
    "ename": "ModuleNotFoundError",
    "evalue": "No module named 'prime_agent_kernel'",
}


def versions(version: str | None, wire: str | None) -> dict[str, Any]:
    """The versions expression's result, as ipykernel answers it."""
    return {"status": "ok", "data": {"text/plain": repr((version, wire))}, "metadata": {}}


@pytest.mark.parametrize(
    ("setup", "found", "expected"),
    [
        ({"status": "ok"}, versions(__version__, WIRE_VERSION), None),
        (MISSING, MISSING, "This kernel has no `prime_agent_kernel`:"),
        # a package from before the version check: no version number, no wire version
        (
            {"status": "error", "ename": "TypeError", "evalue": "configure() takes 2 arguments"},
            versions(None, None),
            "This kernel's `prime_agent_kernel` is an older version (it has no version number), "
            "bridge wire version unknown;",
        ),
        (
            {"status": "ok"},
            versions("9.9.9", WIRE_VERSION),
            "This kernel's `prime_agent_kernel` is version 9.9.9",
        ),
        # the package is right, the setup itself failed
        (
            {"status": "error", "ename": "OSError", "evalue": "no route"},
            versions(__version__, WIRE_VERSION),
            "The Prime Agent kernel package could not be loaded in this kernel (OSError: no route)",
        ),
    ],
)
def test_what_is_told_of_each_kind_of_kernel_package(
    setup: dict[str, Any], found: dict[str, Any], expected: str | None
) -> None:
    told = problem(setup, found)
    if expected is None:
        assert told is None
        return
    assert told is not None and told.text.startswith(expected), told
    assert "Cells still run." in told.text and "docs/gateway.md" in told.text
    assert told.notice == ("kernel_package_problem", told.text)
    if setup["status"] != "ok":
        assert "unavailable" in told.text
