"""A notebook kernel that restarts (Kernel menu, another client, the server's auto-restart)
comes up with the kernel API already bound, so the user's first cell finds `rlm` without
waiting for the server's setup cell."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.manager import AsyncKernelManager

from prime_agent_lab.adapters.kernel_startup import (
    CONFIG_ARGUMENT,
    EXTENSION_ARGUMENT,
    STARTUP_EXTENSION,
    load_package_at_start,
)

from .conftest import next_event, run_turn, use_script
from .test_subagents import CHILD, WAIT_FOR_CHILDREN

PROBE = (
    "import json, os, prime_agent_kernel\n"
    "print(json.dumps({'rlm': type(globals().get('rlm')).__name__, 'cwd': os.getcwd(),"
    " 'kernel': prime_agent_kernel.client().kernel_id,"
    " 'at_start': 'prime_agent_kernel.startup' in get_ipython().extension_manager.loaded}))"
)


# RESTART_ON_NEW_PORTS: these tests restart a kernel that may still be booting, to see what the
# next process runs at start. jupyter_client restarts on the ports the first process was given,
# which that process never bound; on two busy CI workers another process took one meanwhile and
# the new kernel died with "Address already in use" (clean-clone CI on e7f9843). The ports are
# not what is tested here, so the restart asks for new ones.


async def first_cell(manager: Any, code: str) -> dict[str, Any]:
    """What `code` prints as the first request a new client sends to the kernel."""
    client = manager.client()
    client.start_channels()
    try:
        await client.wait_for_ready(timeout=60)
        printed: list[str] = []

        def collect(msg: dict[str, Any]) -> None:
            if msg["msg_type"] == "stream":
                printed.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                printed.append(f"{msg['content']['ename']}: {msg['content']['evalue']}")

        await client.execute_interactive(code, output_hook=collect, timeout=60)
    finally:
        client.stop_channels()
    text = "".join(printed)
    try:
        answer: dict[str, Any] = json.loads(text)
    except json.JSONDecodeError:
        raise AssertionError(f"the cell printed {text!r}") from None
    return answer


async def test_a_restarted_kernel_binds_the_api_and_returns_to_its_directory_as_it_starts(
    tmp_path: Path,
) -> None:
    manager = AsyncKernelManager(kernel_name="python3")
    await manager.start_kernel(
        cwd=str(tmp_path), extra_arguments=["--HistoryManager.enabled=False"]
    )
    child_directory = tmp_path / "child"
    child_directory.mkdir()
    try:
        arranged = load_package_at_start(
            manager, "http://127.0.0.1:9/prime-agent/bridge", "kernel-1", str(child_directory)
        )
        load_package_at_start(  # set up again (every setup cell does): one argument, not two
            manager, "http://127.0.0.1:9/prime-agent/bridge", "kernel-1", str(child_directory)
        )
        await manager.restart_kernel(newports=True)  # see RESTART_ON_NEW_PORTS
        seen = await first_cell(manager, PROBE)
        arguments = manager._launch_args["extra_arguments"]
    finally:
        await manager.shutdown_kernel(now=True)

    assert arranged
    assert seen == {
        "rlm": "RLM",
        "cwd": str(child_directory),
        "kernel": "kernel-1",
        "at_start": True,
    }
    assert arguments == ["--HistoryManager.enabled=False", CONFIG_ARGUMENT]


USER_CONFIG_PROBE = (
    "import json\n"
    "print(json.dumps({'exec_lines': globals().get('FROM_EXEC_LINES'),"
    " 'extensions': sorted(get_ipython().extension_manager.loaded),"
    " 'rlm': type(globals().get('rlm')).__name__}))"
)


@pytest.mark.parametrize(
    ("config_lines", "command_line"),
    [
        (["c.IPKernelApp.extra_extensions = ['user_extra']"], []),
        (["c.InteractiveShellApp.extra_extensions = ['user_extra']"], []),
        ([], ["--IPKernelApp.extra_extensions=user_extra"]),
        ([], ["--ext=user_extra"]),
    ],
    ids=["config-IPKernelApp", "config-InteractiveShellApp", "command-line", "command-line-ext"],
)
async def test_the_users_own_ipython_configuration_still_applies_after_a_restart(
    tmp_path: Path, config_lines: list[str], command_line: list[str]
) -> None:
    """The startup extension is added to the user's extensions, wherever they are set; it
    never replaces them."""
    profile = tmp_path / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    settings = [
        "c.IPKernelApp.exec_lines = ['FROM_EXEC_LINES = 42']",
        "c.IPKernelApp.extensions = ['user_ext']",
        *config_lines,
    ]
    (profile / "ipython_kernel_config.py").write_text("\n".join(settings) + "\n")
    modules = tmp_path / "modules"
    modules.mkdir()
    for name in ("user_ext", "user_extra"):
        (modules / f"{name}.py").write_text("def load_ipython_extension(shell):\n    pass\n")
    env = {
        **os.environ,
        "IPYTHONDIR": str(tmp_path / "ipython"),
        "PYTHONPATH": os.pathsep.join([str(modules), os.environ.get("PYTHONPATH", "")]),
    }
    manager = AsyncKernelManager(kernel_name="python3")
    await manager.start_kernel(env=env, extra_arguments=command_line)
    try:
        load_package_at_start(manager, "http://127.0.0.1:9/prime-agent/bridge", "kernel-1")
        await manager.restart_kernel(newports=True)  # see RESTART_ON_NEW_PORTS
        seen = await first_cell(manager, USER_CONFIG_PROBE)
    finally:
        await manager.shutdown_kernel(now=True)

    assert seen["exec_lines"] == 42
    assert {"user_ext", "user_extra", STARTUP_EXTENSION} <= set(seen["extensions"])
    assert seen["rlm"] == "RLM"


def test_a_kernel_that_is_not_ipykernel_is_left_alone() -> None:
    class OtherKernel:
        kernel_spec = type("Spec", (), {"argv": ["xpython", "-f", "{connection_file}"]})()
        _launch_args: dict[str, Any] = {"extra_arguments": ["--x"], "env": {"A": "1"}}

    class GatewayKernel:  # no local launch arguments to restart with
        kernel_spec = type("Spec", (), {"argv": ["python", "-m", "ipykernel_launcher"]})()
        _launch_args = None

    other = OtherKernel()
    assert not load_package_at_start(other, "http://h/b", "k")
    assert other._launch_args == {"extra_arguments": ["--x"], "env": {"A": "1"}}
    assert not load_package_at_start(GatewayKernel(), "http://h/b", "k")


async def agents_kernel(host: Any, make_notebook: Any, agent_script: Any, name: str) -> str:
    """The kernel id of an agent attached to a new notebook, after one turn set it up."""
    use_script(host, agent_script([{"code": "x = 1"}, {"text": "set"}]))
    agent = await host.attach(make_notebook(name))
    queue = agent.events.subscribe()
    await host.send(agent.session_id, "set x")
    await next_event(queue, "turn_ended")
    return str(agent.kernel.kernel_id)


async def restart(jp_fetch: Any, host: Any, kernel_id: str) -> Any:
    """Restart as another client does (REST), and the kernel's manager."""
    await jp_fetch("api", "kernels", kernel_id, "restart", method="POST", body="{}")
    return host.serverapp.kernel_manager.get_kernel(kernel_id)


async def test_a_users_first_cell_after_a_restart_from_the_kernel_menu_finds_rlm(
    jp_fetch: Any, host: Any, make_notebook: Any, agent_script: Any
) -> None:
    kernel_id = await agents_kernel(host, make_notebook, agent_script, "restart-bound.ipynb")
    seen = await first_cell(await restart(jp_fetch, host, kernel_id), PROBE)

    assert seen["rlm"] == "RLM" and seen["kernel"] == kernel_id
    assert seen["at_start"], "the API was bound by the server's setup cell, not at start"


async def test_the_api_stays_bound_over_repeated_restarts(
    jp_fetch: Any, host: Any, make_notebook: Any, agent_script: Any
) -> None:
    kernel_id = await agents_kernel(host, make_notebook, agent_script, "restart-twice.ipynb")
    for _ in range(2):
        manager = await restart(jp_fetch, host, kernel_id)
        seen = await first_cell(manager, PROBE)
        assert seen["rlm"] == "RLM" and seen["at_start"]
    arguments = manager._launch_args["extra_arguments"]
    assert [a for a in arguments if a in (CONFIG_ARGUMENT, EXTENSION_ARGUMENT)] == [CONFIG_ARGUMENT]


async def test_a_harness_write_in_the_first_cell_after_a_restart_completes(
    jp_fetch: Any, host: Any, make_notebook: Any, agent_script: Any
) -> None:
    kernel_id = await agents_kernel(host, make_notebook, agent_script, "restart-write.ipynb")
    seen = await first_cell(
        await restart(jp_fetch, host, kernel_id),
        "import json\nm = rlm.harness.create_memory('after restart', 'yes')\n"
        "print(json.dumps({'id': m.id}))",
    )
    assert seen == {"id": "after_restart"}


async def test_a_childs_kernel_restarted_once_starts_in_the_parent_notebooks_folder_as_the_child(
    jp_fetch: Any, host: Any, make_notebook: Any, tmp_path: Path
) -> None:
    """The child's kernel came from the pool (set up before it had a folder): its first
    restart already starts in the parent notebook's folder, bound as the child."""
    script = tmp_path / "tree-script.json"
    turns = [
        {"code": 'a = await rlm("alpha words", name="alpha")'},
        {"code": WAIT_FOR_CHILDREN},
        {"text": "{last_output_line}"},
    ]
    script.write_text(json.dumps({"turns": turns, "child": CHILD}), encoding="utf-8")
    use_script(host, str(script))
    parent = await host.attach(make_notebook("work/analysis.ipynb"))
    await run_turn(host, parent.session_id, "fan out")
    child = next(a for a in host.agents.values() if a.session.header.get("parent_session_id"))
    kernel_id = child.kernel.kernel_id
    manager = host.serverapp.kernel_manager.get_kernel(kernel_id)

    await jp_fetch("api", "kernels", kernel_id, "restart", method="POST", body="{}")
    seen = await first_cell(manager, PROBE.replace("}))", ", 'cells': len(history.cells())}))"))

    assert Path(seen["cwd"]).name == "work"
    assert seen["kernel"] == kernel_id and seen["at_start"]
    assert seen["cells"] == 1  # the child's own history, not the parent's (two cells)
