"""`rlm.harness` from a real kernel (headless host, real bridge): CRUD for the four kinds,
scopes, skills importable at once, the prompt rebuilt after a change and the harness version on
each assistant message, and the host writing while other processes write the same store."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from prime_agent_lab.core.agent import Agent
from prime_agent_lab.core.harness.store import HarnessStore
from prime_agent_lab.core.harness.summary import harness_section
from prime_agent_lab.core.settings import Settings
from prime_agent_lab.core.snapshots import NOT_RESTORED, RESTORED
from prime_agent_lab.headless import HeadlessRun

from .conftest import run_turn, use_script, wait_for
from .test_compaction import RecordingProvider
from .test_harness_store import WRITES, write_many
from .test_messaging import run_in_kernel
from .test_snapshots import quick_snapshots, saved_names


def write_script(tmp_path: Path, turns: list[dict[str, Any]]) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"turns": turns}))
    return str(path)


@contextlib.asynccontextmanager
async def attached(tmp_path: Path) -> AsyncIterator[HeadlessRun]:
    """A headless agent whose kernel is attached (its `rlm.harness` talks to this host); the
    global store is `tmp_path / "global"`."""
    work = tmp_path / "work"
    work.mkdir()
    script = write_script(work, [{"code": "print('ready')"}, {"text": "ok"}])
    headless = HeadlessRun(
        cwd=work,
        notebook="analysis.ipynb",
        provider="scripted",
        model=None,
        script_path=script,
        stream=False,
        kernel_name="python3",
        settings=Settings(cell_timeout=120),
        kernel_pool_size=0,
        harness_dir=str(tmp_path / "global"),
    )
    await headless.start(lambda event: None)
    try:
        await headless.settle(await headless.agent.run_turn("attach"))
        yield headless
    finally:
        await headless.close()


async def kernel(agent: Agent, code: str) -> str:
    out = await run_in_kernel(agent, code)
    assert "Error" not in out or "HarnessError" in out, out
    return out


async def test_the_kernel_creates_updates_lists_gets_and_deletes_every_kind(tmp_path: Path) -> None:
    code = """
h = rlm.harness
m = h.create_memory("flaky test", "retry three times before failing")
p = h.create_prompt_note("units", "report lengths in metres")
s = h.create_subagent("reviewer", "You review a diff for off-by-one errors")
k = h.create_skill("mean", "Average of numbers", reference={"type": "python",
    "import": "statistics", "callable": "mean"}, arguments={"data": "numbers"})
print("CREATED", [(e.kind, e.id, e.version, e.scope) for e in (m, p, s, k)])
m2 = h.update_memory("flaky_test", content="retry five times")
print("UPDATED", m2.version, m2.content, m2.title)
print("PATHS", p.path, m.path)
print("LIST", [(e.kind, e.id) for e in h.list()])
print("GET", h.get("memory", "flaky_test").content, h.get("memory", "nope"))
print("SKILL", h.skill("mean")([1, 2, 3]))
print("DELETED", h.delete_subagent("reviewer").id, [e.id for e in h.list("subagent")])
"""
    async with attached(tmp_path) as run:
        out = await kernel(run.agent, code)
    assert (
        "CREATED [('memory', 'flaky_test', 1, 'local'), ('prompt', 'units', 1, 'local'), "
        "('subagent', 'reviewer', 1, 'local'), ('skill', 'mean', 1, 'local')]"
    ) in out
    assert "UPDATED 2 retry five times flaky test" in out
    assert "PATHS policy general" in out
    assert (
        "LIST [('prompt', 'units'), ('memory', 'flaky_test'), ('skill', 'mean'), "
        "('subagent', 'reviewer')]"
    ) in out
    assert "GET retry five times None" in out
    assert "SKILL 2" in out
    assert "DELETED reviewer []" in out
    local = HarnessStore(run.agent.session.directory / "harness", "local")
    assert local.get("memory", "flaky_test").version == 2  # type: ignore[union-attr]


async def test_errors_are_clear_and_change_nothing(tmp_path: Path) -> None:
    code = """
import prime_agent_kernel
h = rlm.harness
h.create_memory("units", "metres")
def attempt(f):
    try:
        f()
    except prime_agent_kernel.HarnessError as exc:
        print("ERR", exc)
attempt(lambda: h.create_memory("units", "feet"))
attempt(lambda: h.update_memory("missing", content="x"))
attempt(lambda: h.delete_memory("missing"))
attempt(lambda: h.create_prompt_note("x", "y", id="base_system_prompt"))
attempt(lambda: h.create("colour", "x", "y"))
attempt(lambda: h.create_skill("bad", "no contract", reference={"import": "m", "callable": "f"},
    arguments={}))
print("STILL", h.get("memory", "units").content, h.get("memory", "units").version)
"""
    async with attached(tmp_path) as run:
        out = await kernel(run.agent, code)
    assert "ERR a memory with id 'units' already exists (local)" in out
    assert "ERR no memory with id 'missing' in the local store" in out
    assert "ERR the base system prompt is not editable" in out
    assert "ERR unknown kind 'colour'" in out
    assert 'type must be "python"' in out
    assert out.count("ERR") == 6
    assert "STILL metres 1" in out


async def test_a_damaged_global_store_leaves_local_entries_listed_with_a_warning(
    tmp_path: Path,
) -> None:
    code = """
import warnings
h = rlm.harness
h.create_memory("units", "metres")
h.create_memory("style", "terse", global_=True)
open(GLOBAL_FILE, "w").write("{not json")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    print("LIST", [e.id for e in h.list()])
print("WARNED", [str(w.message) for w in caught])
print("GET", h.get("memory", "local:units").content)
"""
    async with attached(tmp_path) as run:
        global_file = tmp_path / "global" / "harness.json"
        out = await kernel(run.agent, f"GLOBAL_FILE = {str(global_file)!r}\n" + code)
    assert "LIST ['units']" in out
    assert "WARNED ['rlm.harness: the harness file" in out and "is damaged" in out
    assert "GET metres" in out


async def test_an_entry_written_in_the_users_own_cell_is_recorded_as_the_users(
    tmp_path: Path,
) -> None:
    async with attached(tmp_path) as run:
        await kernel(
            run.agent,
            "rlm.harness.create_memory('from the agent', 'a')\n"
            "rlm.harness.create_memory('shared', 'b')",
        )
        # another client of the same kernel, as the notebook tab is
        user = run.fleet.manager(run.kernel_id).client()
        user.start_channels()
        try:
            await user.wait_for_ready(timeout=60)
            reply = await user.execute_interactive(
                "rlm.harness.create_memory('from the user', 'u')\n"
                "rlm.harness.update_memory('shared', content='edited by the user')",
                timeout=60,
            )
        finally:
            user.stop_channels()
        assert reply["content"]["status"] == "ok", reply["content"]
        local = HarnessStore(run.agent.session.directory / "harness", "local")
    sources = {e.id: (e.source, e.version) for e in local.list("memory")}
    assert sources == {
        "from_the_agent": ("agent", 1),
        "from_the_user": ("user", 1),
        "shared": ("user", 2),
    }


async def test_global_entries_go_to_the_shared_store_and_prefixes_pick_the_scope(
    tmp_path: Path,
) -> None:
    code = """
h = rlm.harness
h.create_memory("style", "global style", global_=True)
h.create_memory("style", "local style")
h.update_memory("global:style", content="global style v2")
print("BARE", h.get("memory", "style").content)
print("GLOBAL", h.get("memory", "global:style").content, h.get("memory", "global:style").version)
print("SCOPES", sorted(e.scope for e in h.list("memory")))
"""
    async with attached(tmp_path) as run:
        out = await kernel(run.agent, code)
    assert "BARE local style" in out
    assert "GLOBAL global style v2 2" in out
    assert "SCOPES ['global', 'local']" in out
    shared = HarnessStore(tmp_path / "global", "global")
    assert shared.get("memory", "style").content == "global style v2"  # type: ignore[union-attr]


async def test_a_skill_that_brings_its_module_is_importable_at_once_and_reloads_on_update(
    tmp_path: Path,
) -> None:
    helper = tmp_path / "helpers_src.py"
    helper.write_text("def triple(x):\n    return 3 * x\n")
    code = f"""
h = rlm.harness
h.create_skill("fit curve", "Fit a line; returns slope and intercept.",
    reference={{"type": "python", "import": "fit_tools", "callable": "fit"}},
    arguments={{"x": "list", "y": "list"}},
    source="def fit(x, y):\\n    return ('v1', len(x))\\n")
import fit_tools
print("CALL", fit_tools.fit([1, 2], [3, 4]), h.skill("fit_curve")([1], [2]))
h.update_skill("fit_curve", source="def fit(x, y):\\n    return ('v2', len(y))\\n")
print("RELOADED", fit_tools.fit([1], [2, 3]))
h.create_skill("triple", "x times three", module_file={str(helper)!r},
    reference={{"type": "python", "import": "triple_tools", "callable": "triple"}}, arguments={{}})
import triple_tools
print("FILE", triple_tools.triple(5))
"""
    async with attached(tmp_path) as run:
        out = await kernel(run.agent, code)
    assert "CALL ('v1', 2) ('v1', 1)" in out
    assert "RELOADED ('v2', 2)" in out
    assert "FILE 15" in out


async def test_a_skills_arguments_keep_their_order_from_the_kernel_to_the_prompt_and_back(
    tmp_path: Path,
) -> None:
    """`def fit(x, y, degree=2)`: the order is the call's, so a positional call made from the
    entry (or from the prompt's summary) must see x, y, degree, never a sorted degree, x, y."""
    code = """
h = rlm.harness
made = h.create_skill("fit curve", "Fit a polynomial.",
    reference={"type": "python", "import": "fit_tools", "callable": "fit"},
    arguments={"x": "list", "y": "list", "degree": "int"},
    source="def fit(x, y, degree=2):\\n    return degree\\n")
print("MADE", list(made.arguments))
print("GOT", list(h.get("skill", "fit_curve").arguments))
print("LISTED", [list(e.arguments) for e in h.list("skill")])
print("UPDATED", list(h.update_skill("fit_curve", content="Fit it.").arguments))
"""
    async with attached(tmp_path) as run:
        out = await kernel(run.agent, code)
        section = harness_section(run.runtime.harnesses.harness_for(run.agent.session_id))
    order = "['x', 'y', 'degree']"
    assert f"MADE {order}" in out and f"GOT {order}" in out, out
    assert f"LISTED [{order}]" in out and f"UPDATED {order}" in out, out
    assert "fit_tools.fit(x, y, degree): Fit it." in section
    local = HarnessStore(run.agent.session.directory / "harness", "local")
    assert list(local.get("skill", "fit_curve").arguments) == ["x", "y", "degree"]  # type: ignore[union-attr]


async def test_a_skill_module_another_session_replaces_is_reloaded_before_the_next_cell(
    tmp_path: Path,
) -> None:
    """Session B updates a global skill; session A's kernel, which imported it, runs the new
    code from its next cell on (same size, same second: no stale bytecode either)."""
    reference = {"type": "python", "import": "shared_tool", "callable": "f"}
    first = """
h = rlm.harness
h.create_skill("shared tool", "f", reference=REFERENCE, arguments={}, global_=True,
    source="def f():\\n    return 'one'\\n")
import shared_tool
print("BEFORE", shared_tool.f())
"""
    async with attached(tmp_path) as run:
        out = await kernel(run.agent, f"REFERENCE = {reference!r}\n" + first)
        other_session = HarnessStore(tmp_path / "global", "global")
        other_session.update(
            "skill",
            "shared_tool",
            {"reference": {**reference, "source": "def f():\n    return 'two'\n"}},
        )
        after = await kernel(run.agent, "print('AFTER', shared_tool.f())")
        other_session.update(
            "skill",
            "shared_tool",
            {"reference": {**reference, "source": "raise RuntimeError('boom')\n"}},
        )
        broken = await run_in_kernel(
            run.agent, "import sys\nprint('GONE', 'shared_tool' in sys.modules)"
        )
    assert "BEFORE one" in out
    assert "AFTER two" in after
    assert "GONE False" in broken and "no longer imports (RuntimeError: boom)" in broken


async def test_a_skill_module_named_like_an_installed_package_is_refused(tmp_path: Path) -> None:
    code = """
import prime_agent_kernel
h = rlm.harness
try:
    h.create_skill("shadow", "would never be imported", source="def hello():\\n    return 1\\n",
        reference={"type": "python", "import": "ipykernel", "callable": "hello"}, arguments={})
except prime_agent_kernel.HarnessError as exc:
    print("ERR", exc)
print("STORED", h.get("skill", "shadow"))
"""
    async with attached(tmp_path) as run:
        out = await kernel(run.agent, code)
    assert "ERR module name 'ipykernel' is already importable in this kernel" in out
    assert "STORED None" in out


async def test_a_skill_whose_module_cannot_import_or_lacks_its_callable_is_refused_unsaved(
    tmp_path: Path,
) -> None:
    """A missing dependency, an error at import, the callable missing or not callable, a module
    the kernel cannot import: refused at create with the reason, and nothing saved."""
    code = """
import prime_agent_kernel
h = rlm.harness
def attempt(id, source, callable="f", module=None):
    module = module or id + "_tools"
    try:
        h.create_skill(id, "c", id=id, source=source, arguments={},
            reference={"type": "python", "import": module, "callable": callable})
    except prime_agent_kernel.HarnessError as exc:
        print("ERR", id, exc)
    try:
        __import__(module)
        print("IMPORTED", id)
    except ImportError:
        pass
    print("STORED", id, h.get("skill", id))
attempt("missing_dep", "import no_such_dependency_xyz\\ndef f():\\n    return 1\\n")
attempt("raises", "def f():\\n    return 1\\nraise RuntimeError('import-time boom')\\n")
attempt("no_callable", "def g():\\n    return 1\\n")
attempt("not_callable", "f = 3\\n")
attempt("syntax", "def f(:\\n")
attempt("elsewhere", None, module="no_such_module_xyz")
attempt("method", "class Fit:\\n    pass\\n", callable="Fit.run")
h.create_skill("fine", "c", source="import json\\ndef f():\\n    return json.dumps(1)\\n",
    reference={"type": "python", "import": "fine_tools", "callable": "f"}, arguments={})
import fine_tools
print("FINE", fine_tools.f(), h.get("skill", "fine").version)
"""
    async with attached(tmp_path) as run:
        out = await run_in_kernel(run.agent, code)
    assert (
        "ERR missing_dep the skill's module 'missing_dep_tools' does not import in this kernel "
        "(ModuleNotFoundError: No module named 'no_such_dependency_xyz'); nothing was saved"
    ) in out
    assert "ERR raises the skill's module 'raises_tools' does not import" in out
    assert "(RuntimeError: import-time boom)" in out
    assert "ERR no_callable module 'no_callable_tools' has no callable 'f' (it has: g)" in out
    assert "ERR not_callable no_callable" not in out
    assert "ERR not_callable not_callable_tools.f is an int, not a callable" in out
    assert "ERR syntax the skill's module does not compile" in out
    assert "ERR elsewhere the skill's module 'no_such_module_xyz' does not import" in out
    assert "ERR method module 'method_tools' has no callable 'Fit.run'" in out
    assert out.count("ERR ") == 7, out
    assert "IMPORTED" not in out and out.count(" None\n") == 7, out
    assert "FINE 1 1" in out


async def test_a_skill_update_to_a_module_that_fails_to_import_is_refused_and_the_old_one_runs(
    tmp_path: Path,
) -> None:
    code = """
import prime_agent_kernel
h = rlm.harness
h.create_skill("boom", "raises later", source="def f():\\n    return 'old'\\n",
    reference={"type": "python", "import": "boom_tools", "callable": "f"}, arguments={})
import boom_tools
print("FIRST", boom_tools.f())
try:
    h.update_skill("boom", source="raise RuntimeError('bad import')\\n")
except prime_agent_kernel.HarnessError as exc:
    print("ERR", exc)
print("VERSION", h.get("skill", "boom").version)
print("CALLED", h.skill("boom")(), boom_tools.f())
"""
    async with attached(tmp_path) as run:
        out = await run_in_kernel(run.agent, code)
    assert "FIRST old" in out
    assert (
        "ERR the skill's module 'boom_tools' does not import in this kernel "
        "(RuntimeError: bad import); nothing was saved"
    ) in out
    assert "VERSION 1" in out
    assert "CALLED old old" in out


async def test_a_saved_skill_module_that_fails_to_reload_says_so_and_never_runs_old_code(
    tmp_path: Path,
) -> None:
    """A module that passes the check but fails when reloaded over the imported one (here: it
    refuses to run twice in one namespace) is saved, and the call says so; the old module is
    dropped, so the next import runs the new module afresh, never the old code."""
    once = (
        "if 'f' in globals():\\n    raise RuntimeError('no reload')\\n"
        "def f():\\n    return 'new'\\n"
    )
    code = f"""
import prime_agent_kernel
h = rlm.harness
h.create_skill("once", "runs once", source="def f():\\n    return 'old'\\n",
    reference={{"type": "python", "import": "once_tools", "callable": "f"}}, arguments={{}})
import once_tools
print("FIRST", once_tools.f())
try:
    h.update_skill("once", source="{once}")
except prime_agent_kernel.HarnessError as exc:
    print("ERR", exc)
print("VERSION", h.get("skill", "once").version)
print("CALLED", h.skill("once")())
"""
    async with attached(tmp_path) as run:
        out = await run_in_kernel(run.agent, code)
    assert "FIRST old" in out
    assert "ERR the skill local:once was saved (version 2), but its module 'once_tools'" in out
    assert "RuntimeError: no reload" in out
    assert "VERSION 2" in out
    assert "CALLED new" in out and "CALLED old" not in out


async def test_refine_run_refuses_a_global_flag_that_is_not_a_bool(tmp_path: Path) -> None:
    code = """
for flag in ("no", 0, None):
    try:
        await refine.run(global_=flag)
    except TypeError as exc:
        print("ERR", repr(flag), exc)
print("PENDING", (await refine.status()).pending)
"""
    async with attached(tmp_path) as run:
        out = await kernel(run.agent, code)
    assert "ERR 'no' global_ must be True or False" in out
    assert "ERR 0 global_ must be True or False" in out
    assert "ERR None global_ must be True or False" in out
    assert "PENDING 0" in out


async def test_the_prompt_is_rebuilt_after_a_change_and_each_answer_names_its_harness_version(
    tmp_path: Path,
) -> None:
    turns = [
        {"code": 'rlm.harness.create_memory("units", "UNITS-ARE-METRES")\nprint("made")'},
        {"text": "noted"},
    ]
    run = HeadlessRun(
        cwd=tmp_path,
        notebook="analysis.ipynb",
        provider="scripted",
        model=None,
        script_path=write_script(tmp_path, turns),
        stream=False,
        kernel_name="python3",
        settings=Settings(cell_timeout=60),
        kernel_pool_size=0,
        harness_dir=str(tmp_path / "global"),
    )
    await run.start(lambda event: None)
    recorder = RecordingProvider(run.agent.provider)
    run.agent.provider = recorder
    try:
        await run.settle(await run.agent.run_turn("remember the units"))
    finally:
        await run.close()
    first, second = (r.system for r in recorder.requests if r.purpose == "turn")
    assert "UNITS-ARE-METRES" not in first and "No harness entries yet." in first
    assert "[local:units] units: UNITS-ARE-METRES" in second
    answers = [e for e in run.agent.session.entries if e["type"] == "assistant_message"]
    assert [a["harness"] for a in answers] == [
        {"local": 0, "global": 0},
        {"local": 1, "global": 0},
    ]


async def test_the_host_and_two_processes_writing_200_updates_each_lose_nothing(
    tmp_path: Path,
) -> None:
    """The host writes for the kernel (every call a bridge request), two other processes write
    the same global store directly, and a reader never sees a torn file."""
    directory = tmp_path / "global"
    path = directory / "harness.json"
    torn: list[str] = []
    done = threading.Event()

    def read_loop() -> None:
        while not done.is_set():
            try:
                json.loads(path.read_bytes())
            except FileNotFoundError:
                continue
            except ValueError as exc:
                torn.append(str(exc))

    reader = threading.Thread(target=read_loop)
    reader.start()
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=write_many, args=(str(directory), n)) for n in ("p1", "p2")]
    for process in processes:
        process.start()
    code = f"""
h = rlm.harness
h.create_memory("kernel", "start", id="kernel", global_=True)
for i in range({WRITES}):
    if i % 2 == 0:
        h.create_memory("n", str(i), id=f"kernel-{{i}}", global_=True)
    else:
        h.update_memory("kernel", content=str(i), global_=True)
print("WROTE")
"""
    try:
        async with attached(tmp_path) as run:
            out = await kernel(run.agent, code)
    finally:
        for process in processes:
            process.join(120)
        done.set()
        reader.join()
    assert "WROTE" in out
    assert [p.exitcode for p in processes] == [0, 0]
    assert torn == []
    state = HarnessStore(directory, "global").read()
    for writer in ("kernel", "p1", "p2"):
        counter = state.get("memory", writer)
        assert counter is not None
        assert (counter.version, counter.content) == (WRITES // 2 + 1, str(WRITES - 1))
        assert len([e for e in state.all("memory") if e.id.startswith(f"{writer}-")]) == 100
    assert state.revision == 3 * (WRITES + 1)


async def test_fork_and_clone_carry_the_local_harness_and_its_skill_modules(
    host: Any, make_notebook: Any, tmp_path: Path
) -> None:
    make = (
        'rlm.harness.create_memory("units", "metres")\n'
        'rlm.harness.create_skill("twice", "x times two", reference={"type": "python", '
        '"import": "twice_tools", "callable": "twice"}, arguments={"x": "number"}, '
        'source="def twice(x):\\n    return 2 * x\\n")\nprint("made")'
    )
    use_script(host, write_script(tmp_path, [{"code": make}, {"text": "done"}]))
    agent = await host.attach(make_notebook("learn.ipynb"))
    await run_turn(host, agent.session_id, "learn")
    first = next(e for e in agent.session.path() if e["type"] == "user_message")
    for copy in (
        await host.fork(agent.session_id, first["id"]),
        await host.clone(agent.session_id),
    ):
        store = HarnessStore(host.repository.directory(copy["session_id"]) / "harness", "local")
        assert store.get("memory", "units").content == "metres"  # type: ignore[union-attr]
        assert (store.skills_dir / "twice_tools.py").read_text().startswith("def twice")
        store.update("memory", "units", {"content": "feet"})  # the copy is its own
    original = HarnessStore(agent.session.directory / "harness", "local")
    assert original.get("memory", "units").content == "metres"  # type: ignore[union-attr]


async def test_a_clone_restores_an_imported_skill_module_and_says_so(
    host: Any, make_notebook: Any, tmp_path: Path
) -> None:
    """The clone's kernel imports its copy of the skill module while the snapshot comes back,
    so the restore notice names it restored, never "Could not be restored: ... (ModuleNotFound".
    """
    make = (
        'rlm.harness.create_skill("twice", "x times two", reference={"type": "python", '
        '"import": "twice_tools", "callable": "twice"}, arguments={"x": "number"}, '
        'source="def twice(x):\\n    return 2 * x\\n")\nimport twice_tools\n'
        "doubled = twice_tools.twice(21)"
    )
    use_script(host, write_script(tmp_path, [{"code": make}, {"text": "done"}]))
    quick_snapshots(host)
    agent = await host.attach(make_notebook("learn-clone.ipynb"))
    await run_turn(host, agent.session_id, "learn")
    await wait_for(lambda: saved_names(agent.session.directory) == {"doubled"})

    clone = await host.clone(agent.session_id)
    copy = await host.attach(clone["notebook_path"])
    told = (RESTORED, NOT_RESTORED)
    notice = await wait_for(
        lambda: next((e for e in copy.session.path() if e.get("kind") in told), None), timeout=60
    )

    assert notice["kind"] == RESTORED, notice
    assert "Could not be restored" not in notice["text"], notice["text"]
    assert "twice_tools (import twice_tools)" in notice["text"] and "doubled" in notice["text"]
