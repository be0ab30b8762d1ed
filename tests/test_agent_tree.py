"""Issue 7's acceptance scenarios for the agent tree, as one matrix over both hosts.

Every scenario runs twice through the same `AgentRuntime`: headless (`HeadlessRun`: notebook files,
local kernels) and on the server (`host`: live documents, Jupyter kernels). A small adapter per path
starts a tree from a scripted-provider script, runs the root's turn, waits until the tree is quiet
and reads notebooks and sessions; the scenarios only talk to the adapter.

Scripts are small and deterministic: a sub-agent plays the `child` script; where a scenario needs
an agent to wait for another, its cell waits for a file the other writes (an event, not a sleep).
"""

from __future__ import annotations

import dataclasses
import json
import re
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import nbformat
import pytest

from prime_agent_lab.adapters.file_notebook import FileNotebook
from prime_agent_lab.core.agent import Agent
from prime_agent_lab.core.mailbox import MAILBOX_FILE
from prime_agent_lab.core.reach import REACH
from prime_agent_lab.core.runtime import AgentRuntime, last_turn_was_a_task, task_outcome
from prime_agent_lab.core.sessions import SessionRepository
from prime_agent_lab.core.settings import DEFAULTS, Settings
from prime_agent_lab.headless import HeadlessRun
from prime_agent_lab.jupyter.host import AgentHost
from prime_agent_lab.providers import make_provider

from .conftest import read_saved_notebook, use_script, wait_for
from .test_messaging import NUCLEAR, run_in_kernel  # NUCLEAR: root, a, b, grandchild g, root2

ROOT = "analysis.ipynb"
POOL_SIZE = 2
CELL_TIMEOUT = 60.0


@pytest.fixture
def prime_agent_config() -> dict[str, Any]:
    return {"kernel_pool_size": POOL_SIZE, "cell_timeout": CELL_TIMEOUT}


# ------------------------------------------------------------------ one adapter per path


class TreePath(Protocol):
    """What a scenario needs from a host: the same verbs on the server and headless."""

    name: str
    root: Agent
    runtime: AgentRuntime
    workdir: Path  # the server root / the CLI's working directory (kernels work here)

    async def start(self, script: str, max_depth: int = 1) -> Agent: ...
    async def run_root(self, text: str, quiet: bool = True) -> str: ...
    async def add_root(self, path: str, script: str) -> Agent: ...
    async def notebook(self, path: str, ready: Callable[[Any], bool]) -> Any: ...
    async def restart_root_kernel(self) -> None: ...
    async def restart(self) -> int: ...
    async def queued_after_another_restart(self) -> int: ...
    async def close(self) -> None: ...


class HeadlessPath:
    name = "headless"

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.workdir.mkdir()
        self.run: HeadlessRun | None = None
        self._extra: list[FileNotebook] = []

    def _new_run(self, resume: bool = False) -> HeadlessRun:
        return HeadlessRun(
            cwd=self.workdir,
            notebook=ROOT,
            provider="scripted",
            model=None,
            script_path=self._script,
            stream=False,
            kernel_name="python3",
            settings=Settings(cell_timeout=CELL_TIMEOUT),
            resume=resume,
            max_depth=self._max_depth,
            kernel_pool_size=POOL_SIZE,
        )

    async def start(self, script: str, max_depth: int = 1) -> Agent:
        self._script, self._max_depth = script, max_depth
        self.run = self._new_run()
        await self.run.start(lambda event: None)
        return self.root

    @property
    def root(self) -> Agent:
        assert self.run is not None
        return self.run.agent

    @property
    def runtime(self) -> AgentRuntime:
        assert self.run is not None
        return self.run.runtime

    async def run_root(self, text: str, quiet: bool = True) -> str:
        assert self.run is not None
        _, task = self.root.start_turn(text)
        outcome = await task
        if quiet:
            outcome = await self.run.settle(outcome)
        return outcome.final_text

    async def add_root(self, path: str, script: str) -> Agent:
        """A second root in the same runtime (the CLI itself runs one): its own notebook file and
        a kernel of the run's pool, so its bridge calls are proved like any other agent's."""
        assert self.run is not None
        provider = make_provider("scripted", None, script_path=script, stream=False)
        notebook = FileNotebook(self.workdir / path, DEFAULTS.notebook_output_cap)
        self._extra.append(notebook)
        kernel = await self.run.fleet.child_kernel(path, "")
        session = self.runtime.create_session(path, provider)
        agent, _ = await self.runtime.start_agent(session, provider, notebook, kernel)
        return agent

    async def notebook(self, path: str, ready: Callable[[Any], bool]) -> Any:
        assert self.run is not None
        for open_notebook in [*self.run.notebooks.opened, *self._extra]:
            open_notebook.flush()
        nb = nbformat.read(self.workdir / path, as_version=4)
        assert ready(nb), f"{path} is not as expected: {nb}"
        return nb

    async def restart_root_kernel(self) -> None:
        assert self.run is not None
        await self.run.fleet.manager(self.run.kernel_id).restart_kernel(now=True)

    async def restart(self) -> int:
        """Close the run (as the CLI does at its end) and continue its root in a new one."""
        assert self.run is not None
        await self.run.close()
        self.run = self._new_run(resume=True)  # recovers queued messages
        await self.run.start(lambda event: None)
        return self.runtime.mailbox.recover()

    async def queued_after_another_restart(self) -> int:
        again = self._new_run(resume=True)
        try:
            return again.runtime.mailbox.recover()
        finally:
            await again.close()

    async def close(self) -> None:
        if self.run is not None:
            await self.run.close()
        for notebook in self._extra:
            notebook.flush()


class ServerPath:
    name = "server"

    def __init__(self, host: AgentHost, make_notebook: Any, root_dir: Path) -> None:
        self.host = host
        self.original = host
        self.make_notebook = make_notebook
        self.workdir = root_dir
        self.root: Agent = None  # type: ignore[assignment]

    @property
    def runtime(self) -> AgentRuntime:
        return self.host.runtime

    async def start(self, script: str, max_depth: int = 1) -> Agent:
        self._script = script
        use_script(self.host, script)
        self.host.settings = dataclasses.replace(self.host.settings, max_depth=max_depth)
        self.root = await self.host.attach(self.make_notebook(ROOT))
        return self.root

    async def run_root(self, text: str, quiet: bool = True) -> str:
        await self.host.send(self.root.session_id, text)
        task = self.root.turn_task
        assert task is not None
        outcome = await task
        if not quiet:
            return outcome.final_text
        await self.runtime.wait_quiet()
        last = self.root.session.last_of("turn_end")
        assert last is not None
        return str(last["final_text"])

    async def add_root(self, path: str, script: str) -> Agent:
        use_script(self.host, script)
        try:
            return await self.host.attach(self.make_notebook(path))
        finally:
            use_script(self.host, self._script)

    async def notebook(self, path: str, ready: Callable[[Any], bool]) -> Any:
        def saved() -> Any:
            nb = read_saved_notebook(self.workdir / path)
            return nb if nb is not None and ready(nb) else None

        return await wait_for(saved, timeout=30)

    async def restart_root_kernel(self) -> None:
        await self.host.serverapp.kernel_manager.restart_kernel(self.root.kernel.kernel_id)

    def _new_host(self) -> AgentHost:
        """A host over the same sessions with nothing in memory, as after a server restart."""
        again = AgentHost(
            self.host.serverapp,
            SessionRepository(self.host.repository.root),
            self.host.settings,
            lambda: make_provider("scripted", None, script_path=self._script),
        )
        return again

    async def restart(self) -> int:
        """A new host over the same sessions (as `initialize_settings` makes it: queued messages
        recovered first), and the user opens the root notebook again."""
        await self.host.shutdown()
        self.host = self._new_host()
        self.host.serverapp.web_app.settings["prime_agent_host"] = self.host
        queued = self.host.runtime.mailbox.recover()
        self.root = await self.host.attach(ROOT)
        return queued

    async def queued_after_another_restart(self) -> int:
        again = self._new_host()
        try:
            return again.runtime.mailbox.recover()
        finally:
            await again.shutdown()

    async def close(self) -> None:
        if self.host is not self.original:
            await self.host.shutdown()
            self.host.serverapp.web_app.settings["prime_agent_host"] = self.original


def tree_path(name: str, request: Any, tmp_path: Path) -> TreePath:
    if name == "server":
        host = request.getfixturevalue("host")
        return ServerPath(
            host, request.getfixturevalue("make_notebook"), request.getfixturevalue("jp_root_dir")
        )
    return HeadlessPath(tmp_path / "headless")


@pytest.fixture(params=["headless", "server"])
def tree(request: Any, tmp_path: Path, jp_asyncio_loop: Any) -> Iterator[TreePath]:
    path = tree_path(request.param, request, tmp_path)
    yield path
    jp_asyncio_loop.run_until_complete(path.close())


@pytest.fixture
def both_hosts(
    request: Any, tmp_path: Path, jp_asyncio_loop: Any
) -> Iterator[tuple[TreePath, TreePath]]:
    """The headless path and the server's, for one scenario played through each."""
    paths = (tree_path("headless", request, tmp_path), tree_path("server", request, tmp_path))
    yield paths
    for path in paths:
        jp_asyncio_loop.run_until_complete(path.close())


# ------------------------------------------------------------------ helpers


def write_script(tree: TreePath, turns: list[dict[str, Any]], child: list[dict[str, Any]]) -> str:
    file = tree.workdir.parent / f"script-{secrets.token_hex(4)}.json"
    file.write_text(json.dumps({"turns": turns, "child": {"turns": child}}), encoding="utf-8")
    return str(file)


def wait_for_file(name: str) -> str:
    """Kernel code that waits until the file `name` exists (written by another agent's cell)."""
    return (
        "import pathlib, time\n"
        "_deadline = time.monotonic() + 60\n"
        f"while not pathlib.Path({name!r}).exists():\n"
        "    if time.monotonic() > _deadline:\n"
        f"        raise TimeoutError('no {name}')\n"
        "    time.sleep(0.01)\n"
    )


def wait_for_children(statuses: tuple[str, ...]) -> str:
    """Kernel code that waits until every sub-agent of this agent has one of `statuses`."""
    return (
        "import asyncio, time\n"
        "_deadline = time.monotonic() + 60\n"
        "while True:\n"
        "    _subs = await rlm.list_subagents()\n"
        f"    if _subs and all(s.status in {statuses!r} for s in _subs):\n"
        "        break\n"
        "    if time.monotonic() > _deadline:\n"
        "        raise TimeoutError([(s.name, s.status) for s in _subs])\n"
        "    await asyncio.sleep(0.02)\n"
        "print(sorted((s.name, s.status) for s in _subs))"
    )


def printed(agent: Agent, marker: str = "RESULT") -> list[Any]:
    """The JSON each agent cell of `agent` printed after `marker`, in order."""
    found = []
    for entry in agent.session.entries:
        if entry["type"] != "tool_result":
            continue
        for line in entry["observation"].splitlines():
            if line.startswith(marker):
                found.append(json.loads(line[len(marker) :]))
    return found


def child_named(tree: TreePath, parent: Agent, name: str) -> Agent:
    (member,) = [m for m in tree.runtime.family.children(parent.session_id) if m.name == name]
    agent = tree.runtime.agent(member.session_id)
    assert agent is not None, f"{name} is not loaded"
    return agent


def of_type(agent: Agent, *kinds: str) -> list[dict[str, Any]]:
    return [e for e in agent.session.path() if e["type"] in kinds]


def with_id(agent: Agent, message_id: str) -> list[dict[str, Any]]:
    return [e for e in agent.session.entries if e.get("message_id") == message_id]


def subagent_links(nb: Any) -> list[str]:
    return [
        output["metadata"]["prime_agent"]["path"]
        for cell in nb.cells
        for output in cell.get("outputs", [])
        if output.get("metadata", {}).get("prime_agent", {}).get("role") == "subagent_link"
    ]


# ------------------------------------------------------------------ 0. both hosts alike

PARITY_TURNS = [
    {"code": "x = 21\nprint(x * 2)"},
    {
        "code": 'greeter = await rlm("greet your parent", name="greeter")\n'
        + wait_for_children(("replied",))
    },
    {"text": "done: {messages}"},
]
PARITY_CHILD = [
    {
        "code": 'receipt = await agent_message.send("hello from the child", receiver_role="parent")'
        "\nprint(receipt.delivery_status)"
    },
    {"text": "greeted"},
]
# Session ids, message ids, other ids (uuid hex, with or without dashes) and ISO times.
VARYING = re.compile(
    r"\d{8}-\d{6}-[0-9a-f]{6}|msg_[0-9a-f]+|[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}"
    r"|\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})?"
)
ENTRY_TEXTS = ("text", "observation", "final_text", "task", "name", "status", "stop_reason")


def scrubbed(value: Any) -> Any:
    return json.loads(VARYING.sub("<id>", json.dumps(value, sort_keys=True)))


def session_record(agent: Agent) -> list[Any]:
    """The session's entry types and texts in order (a cell's code is its text)."""
    record = []
    for entry in agent.session.path():
        texts = {k: entry[k] for k in ENTRY_TEXTS if isinstance(entry.get(k), str)}
        code = [json.loads(c["arguments"]).get("code") for c in entry.get("tool_calls", [])]
        record.append([entry["type"], texts, code])
    return scrubbed(record)


def notebook_record(nb: Any) -> list[Any]:
    """Each cell's type, source and outputs; blank cells aside (a live document given a
    notebook without cells makes one, where the user types next)."""
    cells = [c for c in nb.cells if c.source or c.get("outputs")]
    return scrubbed([[c.cell_type, c.source, c.get("outputs", [])] for c in cells])


def cells_ran(count: int) -> Callable[[Any], bool]:
    def ready(nb: Any) -> bool:
        ran = [c for c in nb.cells if c.cell_type == "code" and c.get("execution_count")]
        return len(ran) == count

    return ready


async def play_parity_scenario(tree: TreePath) -> dict[str, Any]:
    root = await tree.start(write_script(tree, PARITY_TURNS, PARITY_CHILD))
    final = await tree.run_root("count, then have a child greet you")
    child = child_named(tree, root, "greeter")
    return {
        "final": final,
        "root log": session_record(root),
        "child log": session_record(child),
        "root notebook": notebook_record(await tree.notebook(ROOT, cells_ran(2))),
        "child notebook": notebook_record(
            await tree.notebook("analysis.agents/greeter.ipynb", cells_ran(1))
        ),
    }


async def test_two_cells_a_child_and_a_message_leave_the_same_logs_and_notebooks_on_both_hosts(
    both_hosts: tuple[TreePath, TreePath],
) -> None:
    headless, server = both_hosts

    on_headless = await play_parity_scenario(headless)
    on_server = await play_parity_scenario(server)

    assert on_headless["final"] == "done: hello from the child"
    for part, seen in on_headless.items():
        assert on_server[part] == seen, part


# ------------------------------------------------------------------ 1. fan-out

FAN_OUT = (
    "import pathlib\n"
    "handles = []\n"
    "for n in range(1, 5):\n"
    '    handles.append(await rlm(f"part {n}", name=f"part-{n}"))\n'
    # The children wait for this file: none can finish before all four were admitted, and an
    # rlm() that waited for its child would never get here.
    'pathlib.Path("fanout.flag").write_text("go")\n'
    "print([h.name for h in handles])"
)

FAN_OUT_CHILD = (
    wait_for_file("fanout.flag") + 'result = "{task}".upper()\n'
    "print(result)\n"
    'await agent_message.send(f"{result} done", receiver_role="parent")'
)


async def test_fan_out_of_four_children_from_one_cell_reaches_the_parents_answer(
    tree: TreePath,
) -> None:
    script = write_script(
        tree,
        [
            {"code": FAN_OUT},
            {"code": wait_for_children(("replied",))},
            {"text": "all: {messages}"},
        ],
        [{"code": FAN_OUT_CHILD}, {"text": "replied"}],
    )
    root = await tree.start(script)

    final = await tree.run_root("fan out")

    names = [f"part-{n}" for n in range(1, 5)]
    for n in range(1, 5):
        assert f"PART {n} done" in final, final
    spawned = of_type(root, "child_spawned")
    assert [e["name"] for e in spawned] == names
    # All four admitted before any child finished its task.
    children = [child_named(tree, root, name) for name in names]
    first_end = min(of_type(c, "turn_end")[0]["ts"] for c in children)
    assert max(e["ts"] for e in spawned) < first_end
    assert len({e["spawn_cell_id"] for e in spawned}) == 1  # one cell spawned them all
    # Each reply reached the parent labelled with the child's name.
    replies = {e.get("from_name"): e for e in of_type(root, "agent_message", "user_message")}
    for name, child in zip(names, children, strict=True):
        reply = replies[name]
        assert (reply["from_session_id"], reply["relationship"]) == (child.session_id, "child")
        assert reply["text"].startswith(f'[message from child "{name}", written ')
        assert child.session.header["parent_session_id"] == root.session_id
    statuses = [e["status"] for e in tree.runtime.list_children(root.session_id)]
    assert statuses == ["replied"] * 4
    # Four child notebooks, valid, linked both ways.
    parent_nb = await tree.notebook(ROOT, lambda nb: len(subagent_links(nb)) == 4)
    assert subagent_links(parent_nb) == [f"analysis.agents/{name}.ipynb" for name in names]
    for n, name in enumerate(names, start=1):
        nb = await tree.notebook(
            f"analysis.agents/{name}.ipynb",
            lambda nb: any(c.get("outputs") for c in nb.cells),
        )
        nbformat.validate(nb)
        backlink = nb.cells[0]
        assert backlink.cell_type == "markdown"
        assert f"[{ROOT}](../{ROOT})" in backlink.source and f"> part {n}" in backlink.source
        outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
        assert outputs[0]["text"] == f"PART {n}\n"


# ------------------------------------------------------------------ 2. follow-up after a restart

# The parent's cell waits for the answer, so it enters this turn at the next model call.
WAIT_FOR_ANSWERS = wait_for_children(("replied",))
SPAWN_KEEPER = 'keeper = await rlm("remember a secret", name="keeper")\n' + WAIT_FOR_ANSWERS
KEEPER_FIRST = (
    "import secrets\n"
    "secret = secrets.token_hex(4)\n"
    'await agent_message.send(f"made {secret}", receiver_role="parent")'
)
KEEPER_AGAIN = 'await agent_message.send(f"still {secret}", receiver_role="parent")'
ASK_KEEPER = (
    "import json\n"
    "seen = {'kept_my_variable': 'keeper' in globals()}\n"
    "subs = {s.name: s for s in await rlm.list_subagents()}\n"
    "seen['status'] = subs['keeper'].status\n"
    "r = await agent_message.send('what was your secret?', receiver_role='child', "
    "receiver_name=subs['keeper'].name)\n"
    "seen['delivery_status'] = r.delivery_status\n"
    "print('RESULT' + json.dumps(seen))\n" + WAIT_FOR_ANSWERS
)


async def test_after_the_parent_kernel_restarts_a_completed_child_answers_from_its_variables(
    tree: TreePath,
) -> None:
    script = write_script(
        tree,
        [
            {"code": SPAWN_KEEPER},
            {"text": "first: {messages}"},
            {"code": ASK_KEEPER},
            {"text": "second: {messages}"},
        ],
        [{"code": KEEPER_FIRST}, {"text": "first done"}, {"code": KEEPER_AGAIN}, {"text": "ok"}],
    )
    root = await tree.start(script)
    first = await tree.run_root("spawn the keeper")
    assert first.startswith("first: made "), first
    secret = first.removeprefix("first: made ")

    await tree.restart_root_kernel()
    second = await tree.run_root("ask the keeper again")

    (seen,) = printed(root)
    assert seen == {"kept_my_variable": False, "status": "replied", "delivery_status": "delivered"}
    assert second.endswith(f"still {secret}"), second
    keeper = child_named(tree, root, "keeper")
    asked = of_type(keeper, "user_message")[-1]
    assert (asked["from_session_id"], asked["turn"]) == (root.session_id, 2)
    assert keeper.session.turns() == 2


# ------------------------------------------------------------------ 3. steer, follow_up, auto

SEND_TO_BUSY_WORKER = (
    "import json\n"
    'worker = await rlm("work until released", name="worker")\n'
    + wait_for_file("worker.started")
    + "receipts = {}\n"
    "for mode in ('steer', 'follow_up', 'auto'):\n"
    "    r = await agent_message.send(f'{mode} note', receiver_role='child', "
    "receiver_name='worker', mode=mode)\n"
    "    receipts[mode] = r.as_dict()\n"
    # Released only after every send came back: a send that waited for the worker would hang.
    "pathlib.Path('worker.release').write_text('go')\n"
    "print('RESULT' + json.dumps(receipts))"
)
WORKER = (
    "import pathlib\n"
    "pathlib.Path('worker.started').write_text('in')\n"
    + wait_for_file("worker.release")
    + "print('released')"
)


async def test_steer_lands_at_the_next_boundary_follow_up_after_the_run_and_auto_picks_by_state(
    tree: TreePath,
) -> None:
    script = write_script(
        tree,
        [{"code": SEND_TO_BUSY_WORKER}, {"text": "sent"}],
        [
            {"code": WORKER},
            {"text": "turn one saw: {messages}"},
            {"text": "turn two"},
            {"text": "turn three"},
        ],
    )
    root = await tree.start(script)
    # Four sends to the worker in this test; the rate limit has its own tests.
    tree.runtime.settings = dataclasses.replace(tree.runtime.settings, message_rate_burst=10)
    await tree.run_root("drive the worker")

    (receipts,) = printed(root)
    worker = child_named(tree, root, "worker")
    gated = next(e for e in of_type(worker, "tool_result"))
    started = next(e for e in of_type(worker, "cell_started"))
    for mode in ("steer", "follow_up", "auto"):
        receipt = receipts[mode]
        assert (receipt["delivery_status"], receipt["mode"]) == ("queued", mode), receipt
        # The sender had its receipt while the worker was still inside its cell.
        assert started["ts"] <= receipt["time"] < gated["ts"]
    ids = {mode: receipts[mode]["message_id"] for mode in receipts}
    path = [(e["type"], e.get("turn"), e.get("message_id")) for e in worker.session.path()]
    at = path.index(("tool_result", 1, None))
    # steer and auto (to a busy worker) enter its running turn at the next model call...
    assert path[at + 1 : at + 4] == [
        ("agent_message", 1, ids["steer"]),
        ("agent_message", 1, ids["auto"]),
        ("assistant_message", 1, None),
    ]
    # ...follow_up waits until that run ended and starts the next turn.
    end_one = path.index(("turn_end", 1, None))
    assert path[end_one + 1] == ("user_message", 2, ids["follow_up"])
    assert [len(with_id(worker, i)) for i in ids.values()] == [1, 1, 1]

    # auto to an idle worker starts a turn at once.
    out = await run_in_kernel(
        root,
        "import json\n"
        "r = await agent_message.send('idle note', receiver_role='child', receiver_name='worker')\n"
        "print('RESULT' + json.dumps(r.as_dict()))",
    )
    idle = json.loads(out.split("RESULT", 1)[1])
    assert idle["delivery_status"] == "delivered"
    await wait_for(lambda: worker.session.turns() == 3 and not worker.running)
    (opening,) = with_id(worker, idle["message_id"])
    assert (opening["type"], opening["turn"], opening["mode"]) == ("user_message", 3, "auto")
    await tree.runtime.wait_quiet()


# ------------------------------------------------------------------ 4. scope in a tree

NAMES = {"root": ROOT, "root2": "other.ipynb", "a": "a", "b": "b", "g": "g"}
BUILD_TREE = (
    "a = await rlm('g = await rlm(\"print(7)\", name=\"g\")', name='a')\n"
    "b = await rlm('print(8)', name='b')"
)


def probe(names: list[str]) -> str:
    """Kernel code: send to every name under every role; print what happened to each."""
    return (
        "import json\n"
        "_out = {}\n"
        "for _role in ('parent', 'sibling', 'child'):\n"
        f"    for _name in {names!r}:\n"
        "        try:\n"
        "            await agent_message.send('probe', receiver_role=_role, receiver_name=_name)\n"
        "            _out[f'{_role} {_name}'] = 'sent'\n"
        "        except Exception as exc:\n"
        "            _out[f'{_role} {_name}'] = str(exc)\n"
        "print('RESULT' + json.dumps(_out))"
    )


def forged_send(payload: dict[str, Any]) -> str:
    return (
        "import json, prime_agent_kernel\n"
        "try:\n"
        "    _r = await prime_agent_kernel.client().acall("
        f"'messages.send', {json.dumps(payload)})\n"
        "except Exception as exc:\n"
        "    _r = {'error': str(exc)}\n"
        "print('RESULT' + json.dumps(_r))"
    )


async def test_in_a_tree_every_send_outside_the_nuclear_family_is_refused_and_forged_senders_fail(
    tree: TreePath,
) -> None:
    script = write_script(
        tree, [{"code": BUILD_TREE}, {"text": "built"}], [{"code": "{task}"}, {"text": "done"}]
    )
    root = await tree.start(script, max_depth=2)
    await tree.run_root("build the tree")
    a, b = child_named(tree, root, "a"), child_named(tree, root, "b")
    g = child_named(tree, a, "g")
    other = await tree.add_root("other.ipynb", write_script(tree, [{"text": "noted"}], []))
    agents = {"root": root, "root2": other, "a": a, "b": b, "g": g}

    for sender, agent in agents.items():
        out = await run_in_kernel(agent, probe(list(NAMES.values())))
        tried = json.loads(out.split("RESULT", 1)[1])
        for target, name in NAMES.items():
            for role in ("parent", "sibling", "child"):
                result, where = tried[f"{role} {name}"], f"{sender} -> {role} {name}"
                if NUCLEAR.get((sender, target)) == role:
                    assert result == "sent", where
                    continue
                assert result != "sent", where
                if (sender, target) not in NUCLEAR and sender != target and role != "parent":
                    assert REACH in result, f"{where}: {result}"
        await tree.runtime.wait_quiet()

    forged = {
        "from": a.session_id,
        "sender": a.session_id,
        "from_session_id": a.session_id,
        "from_name": "a",
        "relationship": "parent",
    }
    # A payload that claims a sender is refused before any handler reads it (the host checks
    # the keys against the operation's declaration), whatever it sends and to whom...
    to_uncle = {"message": "hi", "receiver_role": "sibling", "receiver_name": "b"}
    to_parent = {"message": "from g", "receiver_role": "parent"}
    for payload in ({**to_uncle, **forged}, {**to_parent, **forged, "from": root.session_id}):
        out = await run_in_kernel(g, forged_send(payload))
        refused = json.loads(out.split("RESULT", 1)[1])
        assert "host refused the call (400): bridge operation messages.send takes" in (
            refused.get("error") or ""
        ), refused
    # ...g may not reach its uncle through the bridge itself...
    out = await run_in_kernel(g, forged_send(to_uncle))
    refused = json.loads(out.split("RESULT", 1)[1])
    assert REACH in (refused.get("error") or ""), refused
    # ...and what it may send arrives as from g.
    out = await run_in_kernel(g, forged_send(to_parent))
    receipt = json.loads(out.split("RESULT", 1)[1])
    (arrived,) = await wait_for(lambda: with_id(a, receipt["message_id"]))
    assert (arrived["from_session_id"], arrived["from_name"], arrived["relationship"]) == (
        g.session_id,
        "g",
        "child",
    )
    sent_by = {
        label: [e["message_id"] for e in of_type(agent, "message_sent")]
        for label, agent in agents.items()
    }
    assert receipt["message_id"] in sent_by["g"]
    assert all(receipt["message_id"] not in ids for label, ids in sent_by.items() if label != "g")
    await tree.runtime.wait_quiet()


# ------------------------------------------------------------------ 5. restart with queued mail

QUEUE_FOR_SLEEPER = (
    "import json\n"
    'sleeper = await rlm("sleep until stopped", name="sleeper")\n'
    + wait_for_file("sleeper.started")
    + "_r = []\n"
    "for t, m in (('first queued', 'follow_up'), ('second queued', 'steer')):\n"
    "    _r.append(await agent_message.send(t, receiver_role='child', receiver_name='sleeper', "
    "mode=m))\n"
    "print('RESULT' + json.dumps([r.as_dict() for r in _r]))"
)
SLEEPER = "import pathlib\npathlib.Path('sleeper.started').write_text('in')\n" + wait_for_file(
    "sleeper.never"
)


async def test_messages_queued_for_a_child_are_delivered_once_after_a_restart(
    tree: TreePath,
) -> None:
    script = write_script(
        tree,
        [{"code": QUEUE_FOR_SLEEPER}, {"text": "queued"}],
        [{"code": SLEEPER}, {"text": "woke to: {messages}"}],
    )
    root = await tree.start(script)
    await tree.run_root("queue two messages", quiet=False)
    (receipts,) = printed(root)
    assert [r["delivery_status"] for r in receipts] == ["queued", "queued"]
    sleeper = child_named(tree, root, "sleeper")
    sleeper_id = sleeper.session_id
    assert sleeper.running and tree.runtime.mailbox.pending(sleeper_id) == 2

    assert await tree.restart() == 2  # the sleeper's turn was stopped; its mail waits on disk
    assert tree.runtime.agent(sleeper_id) is None
    child = await tree.runtime.ensure_loaded(sleeper_id)
    await wait_for(lambda: child.session.turns() == 2 and not child.running)
    await tree.runtime.wait_quiet()

    first, second = (r["message_id"] for r in receipts)
    assert [(e["type"], e["turn"]) for e in with_id(child, first)] == [("user_message", 2)]
    assert [(e["type"], e["turn"]) for e in with_id(child, second)] == [("agent_message", 2)]
    last = child.session.last_of("turn_end")
    assert last is not None and last["final_text"] == "woke to: first queued\nsecond queued"
    # Nothing is delivered again by a later start, also when the mailbox's own "taken" marks
    # were lost (a crash after the entries were written): the log says they arrived.
    assert await tree.queued_after_another_restart() == 0
    file = tree.runtime.repository.directory(sleeper_id) / MAILBOX_FILE
    kept = [line for line in file.read_text().splitlines() if '"taken"' not in line]
    file.write_text("\n".join(kept) + "\n")
    assert await tree.queued_after_another_restart() == 0


# ------------------------------------------------------------------ 6. names

TRY_NAMES = (
    "import json\n"
    'first = await rlm("print(1)", name="alpha")\n'
    "tried = {}\n"
    "for name in ('alpha', 'ALPHA', '../x', 'a/b', 'all'):\n"
    "    try:\n"
    '        await rlm("print(2)", name=name)\n'
    "        tried[name] = 'admitted'\n"
    "    except Exception as exc:\n"
    "        tried[name] = str(exc)\n"
    "print('RESULT' + json.dumps(tried))"
)


async def test_duplicate_sibling_names_paths_and_reserved_words_are_refused(
    tree: TreePath,
) -> None:
    script = write_script(
        tree, [{"code": TRY_NAMES}, {"text": "tried"}], [{"code": "{task}"}, {"text": "ok"}]
    )
    root = await tree.start(script)
    await tree.run_root("name children")

    (tried,) = printed(root)
    assert "already has a sub-agent named 'alpha'" in tried["alpha"]
    assert "already has a sub-agent named 'ALPHA'" in tried["ALPHA"]
    assert "may not hold a path" in tried["../x"]
    assert "may not hold a path" in tried["a/b"]
    assert "'all' is reserved" in tried["all"]
    assert [m.name for m in tree.runtime.family.children(root.session_id)] == ["alpha"]
    notebooks = (tree.workdir / "analysis.agents").glob("*.ipynb")
    assert [p.name for p in notebooks] == ["alpha.ipynb"]


# ------------------------------------------------------------------ a child from before a restart

ASK_AFTER_RESTART = (
    "import json\n"
    "subs = {s.name: s for s in await rlm.list_subagents()}\n"
    "r = await agent_message.send('are you back?', receiver_role='child', receiver_name='keeper')\n"
    "print('RESULT' + json.dumps([subs['keeper'].status, r.delivery_status]))"
)


def slow_to_open(repository: SessionRepository, session_id: str, monkeypatch: Any) -> None:
    """Reading `session_id`'s log from disk takes a while (a long transcript, a slow disk): its
    root's turn ends before the child it messaged is loaded."""
    load = repository.load

    def slow_load(wanted: str) -> Any:
        if wanted == session_id:
            time.sleep(0.3)
        return load(wanted)

    monkeypatch.setattr(repository, "load", slow_load)


async def test_a_child_from_before_a_restart_is_loaded_when_messaged_and_the_tree_waits_for_it(
    tree: TreePath, monkeypatch: Any
) -> None:
    script = write_script(
        tree,
        [
            {"code": SPAWN_KEEPER},
            {"text": "first: {messages}"},
            {"code": ASK_AFTER_RESTART},
            # The answer comes in this turn or starts the next one: the same words either way.
            {"text": "second: {messages}"},
            {"text": "second: {messages}"},
        ],
        [
            {"code": KEEPER_FIRST},
            {"text": "first done"},
            {"code": 'await agent_message.send("back", receiver_role="parent")'},
            {"text": "ok"},
        ],
    )
    root = await tree.start(script)
    first = await tree.run_root("spawn the keeper")
    assert first.startswith("first: made "), first
    (keeper_id,) = [m.session_id for m in tree.runtime.family.children(root.session_id)]

    await tree.restart()
    slow_to_open(tree.runtime.repository, keeper_id, monkeypatch)
    second = await tree.run_root("ask the keeper again")

    assert printed(tree.root) == [["replied", "queued"]]  # not loaded: it waits
    assert second == f"second: {first.removeprefix('first: ')}\nback"


def test_a_member_read_from_disk_names_its_model_as_the_live_handle_does(tmp_path: Path) -> None:
    """`rlm.list_subagents()` says `scripted/demo` for a child spawned in this process; after a
    restart (or in the next CLI run) the registry comes from the session header and must agree."""
    from prime_agent_lab.core.family import Family

    repository = SessionRepository(tmp_path)
    session = repository.create(
        notebook_path="a.agents/kid.ipynb", provider="scripted", model="demo", name="kid"
    )
    from_disk = Family(repository).member(session.session_id)
    assert from_disk is not None and from_disk.model == "scripted/demo"


def test_a_childs_task_outcome_counts_only_turns_its_parents_messages_started_or_entered(
    tmp_path: Path,
) -> None:
    """The user's own turns and a sibling's are not the parent's tasks: they leave the outcome
    as the task ended (a reply sent in one of them still counts), and no completion is told."""
    log = SessionRepository(tmp_path).create(notebook_path="c.ipynb", parent_session_id="p")
    parent = {"from_session_id": "p", "relationship": "parent"}
    sibling = {"from_session_id": "s", "relationship": "sibling"}

    def turn(start: dict[str, Any], *, reply: bool = False, steer: bool = False) -> None:
        log.append("user_message", text="m", **start)
        if steer:
            log.append("agent_message", text="steer", **parent)
        if reply:
            log.append("message_sent", relationship="parent", text="r")
        log.append("turn_end", stop_reason="end_turn", final_text="done")

    seen = []
    for start, options in [
        (parent, {"reply": True}),  # a task, replied to
        ({}, {}),  # the user's own turn
        (sibling, {}),  # a sibling's
        (parent, {}),  # the next task, ended without a reply
        ({}, {"reply": True}),  # the user's turn in which the child replies to its parent
        ({}, {"steer": True}),  # the parent's steer entered the user's turn: a new task
    ]:
        turn(start, **options)
        seen.append((task_outcome(log), last_turn_was_a_task(log)))

    assert seen == [
        ("replied", True),
        ("replied", False),
        ("replied", False),
        ("completed", True),
        ("replied", False),
        ("completed", True),
    ]
