"""Branching (docs/branching.md): move the leaf, fork, clone, through a real server and the real
`anthropic` SDK against the fake LLM server, so every assertion about what the model saw is on
the request the SDK sent."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from prime_agent_lab.core.branching import OTHER_BRANCH
from prime_agent_lab.providers import make_provider

from .conftest import next_event, read_saved_notebook, run_turn, wait_for
from .fake_llm_server import FakeLLMServer, RecordedRequest, Reply
from .test_server_e2e import live_agent_cells


def last_user_text(request: RecordedRequest) -> str:
    for message in reversed(request.messages):
        if message.get("role") != "user":
            continue
        content = message["content"]
        if isinstance(content, str):
            return content
        texts = [b["text"] for b in content if b.get("type") == "text"]
        if texts:
            return texts[-1]
    return ""


def word_policy(request: RecordedRequest) -> Reply:
    """Each message is one word W: the model runs `W = "W"; print("ran W")`, then says `done W`."""
    word = last_user_text(request).split()[-1]
    if not request.turn_tool_results():
        return Reply.code(f"{word} = {word!r}\nprint('ran', {word!r})")
    return Reply(text=f"done {word}")


def user_texts(request: RecordedRequest) -> list[str]:
    out = []
    for message in request.messages:
        if message.get("role") != "user":
            continue
        content = message["content"]
        if isinstance(content, str):
            out.append(content)
        else:
            out += [b["text"] for b in content if b.get("type") == "text"]
    return out


@pytest.fixture
def fake_llm(monkeypatch: pytest.MonkeyPatch, host: Any) -> Iterator[FakeLLMServer]:
    with FakeLLMServer(policy=word_policy) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-anthropic")
        host._provider_factory = lambda: make_provider("anthropic", "fake-model", stream=True)
        yield server


async def fetch_json(jp_fetch: Any, *route: str, body: Any = None) -> tuple[int, Any]:
    kwargs: dict[str, Any] = {"method": "GET"}
    if body is not None:
        kwargs = {"method": "POST", "body": json.dumps(body)}
    response = await jp_fetch("prime-agent", "api", *route, raise_error=False, **kwargs)
    return response.code, json.loads(response.body)


async def three_turns(host: Any, path: str) -> Any:
    agent = await host.attach(path)
    for word in ("alpha", "beta", "gamma"):
        ended = await run_turn(host, agent.session_id, word)
        assert ended["final_text"] == f"done {word}", ended
    return agent


def entry(tree: dict[str, Any], kind: str, preview: str) -> dict[str, Any]:
    (found,) = [e for e in tree["entries"] if e["type"] == kind and e["preview"] == preview]
    return found


async def cell_marks(jp_serverapp: Any, path: str) -> dict[str, str | None]:
    """First line of each agent cell -> its branch mark."""
    cells = await live_agent_cells(jp_serverapp, path)
    return {c["source"].splitlines()[0]: c["metadata"]["prime_agent"].get("branch") for c in cells}


async def test_after_branching_back_two_turns_the_next_model_call_sees_only_the_branch(
    host: Any, jp_serverapp: Any, jp_fetch: Any, make_notebook: Any, fake_llm: FakeLLMServer
) -> None:
    path = make_notebook("branch.ipynb")
    agent = await three_turns(host, path)
    status, tree = await fetch_json(jp_fetch, "sessions", agent.session_id, "tree")
    assert status == 200 and tree["leaf_id"] == agent.session.leaf_id
    end_of_alpha = entry(tree, "turn_end", "done alpha")

    status, moved = await fetch_json(
        jp_fetch, "sessions", agent.session_id, "leaf", body={"entry_id": end_of_alpha["id"]}
    )

    assert status == 200 and moved["leaf_id"] == end_of_alpha["id"], moved
    assert moved["marked_cells"] == 2
    assert await cell_marks(jp_serverapp, path) == {
        "alpha = 'alpha'": None,
        "beta = 'beta'": OTHER_BRANCH,
        "gamma = 'gamma'": OTHER_BRANCH,
    }
    before = len(fake_llm.requests)
    ended = await run_turn(host, agent.session_id, "delta")
    assert ended["turn"] == 2 and ended["final_text"] == "done delta"
    first_call = fake_llm.requests[before]
    assert user_texts(first_call) == ["alpha", "delta"]
    sent = json.dumps(first_call.body)
    assert "beta" not in sent and "gamma" not in sent, "abandoned turns reached the model"
    assert "ran alpha" in sent  # the branch's own observations are there

    # Back to the end of gamma: its cells are unmarked, delta's becomes the other branch.
    _, tree = await fetch_json(jp_fetch, "sessions", agent.session_id, "tree")
    end_of_gamma = entry(tree, "turn_end", "done gamma")
    assert not end_of_gamma["on_branch"] and entry(tree, "turn_end", "done delta")["on_branch"]
    _, moved = await fetch_json(
        jp_fetch, "sessions", agent.session_id, "leaf", body={"entry_id": end_of_gamma["id"]}
    )
    assert await cell_marks(jp_serverapp, path) == {
        "alpha = 'alpha'": None,
        "beta = 'beta'": None,
        "gamma = 'gamma'": None,
        "delta = 'delta'": OTHER_BRANCH,
    }
    transcript = (await fetch_json(jp_fetch, "sessions", agent.session_id))[1]["transcript"]
    assert [i["text"] for i in transcript if i["type"] == "user"] == ["alpha", "beta", "gamma"]


async def test_after_a_branch_a_reloaded_page_is_not_replayed_the_abandoned_turns(
    host: Any, jp_fetch: Any, make_notebook: Any, fake_llm: FakeLLMServer
) -> None:
    agent = await three_turns(host, make_notebook("reload.ipynb"))
    assert any(e.get("turn") == 3 for e in agent.events.since(0))
    _, tree = await fetch_json(jp_fetch, "sessions", agent.session_id, "tree")
    end_of_alpha = entry(tree, "turn_end", "done alpha")
    await fetch_json(
        jp_fetch, "sessions", agent.session_id, "leaf", body={"entry_id": end_of_alpha["id"]}
    )
    # A page loads the transcript, then opens the event stream with since=0 (docs/ui.md).
    replayed = agent.events.since(0)
    assert [e["type"] for e in replayed] == ["branch_moved"]


async def test_branching_to_a_user_message_returns_its_text_and_drops_that_turn(
    host: Any, jp_fetch: Any, make_notebook: Any, fake_llm: FakeLLMServer
) -> None:
    agent = await three_turns(host, make_notebook("resend.ipynb"))
    gamma = entry(await host.session_tree(agent.session_id), "user_message", "gamma")

    moved = await host.move_leaf(agent.session_id, gamma["id"])

    assert moved["text"] == "gamma" and moved["leaf_id"] == gamma["parent_id"]
    before = len(fake_llm.requests)
    await run_turn(host, agent.session_id, "omega")
    sent = json.dumps(fake_llm.requests[before].body)
    assert "beta" in sent and "gamma" not in sent


async def test_fork_makes_a_valid_notebook_and_a_session_that_continues_on_a_fresh_kernel(
    host: Any,
    jp_serverapp: Any,
    jp_fetch: Any,
    jp_root_dir: Path,
    make_notebook: Any,
    fake_llm: FakeLLMServer,
) -> None:
    path = make_notebook("work/study.ipynb")
    agent = await three_turns(host, path)
    gamma = entry(await host.session_tree(agent.session_id), "user_message", "gamma")
    leaf_before = agent.session.leaf_id

    status, fork = await fetch_json(
        jp_fetch, "sessions", agent.session_id, "fork", body={"entry_id": gamma["id"]}
    )

    assert status == 201, fork
    assert fork["notebook_path"] == "work/study-fork-1.ipynb"
    assert fork["text"] == "gamma" and fork["kernel_state_copied"] is False
    assert fork["forked_from"] == {"session_id": agent.session_id, "entry_id": gamma["id"]}
    assert agent.session.leaf_id == leaf_before  # the original is unchanged
    notebook = nbformat.read(jp_root_dir / fork["notebook_path"], as_version=4)
    nbformat.validate(notebook)
    code = _agent_cells(notebook)
    assert [c.source.splitlines()[0] for c in code] == ["alpha = 'alpha'", "beta = 'beta'"]
    assert "ran beta" in code[1].outputs[0]["text"]
    assert all(c.metadata["prime_agent"]["session_id"] == fork["session_id"] for c in code)
    header = json.loads(
        (host.repository.directory(fork["session_id"]) / "session.jsonl").read_text().split("\n")[0]
    )
    assert header["forked_from"] == fork["forked_from"]
    records = (host.repository.directory(fork["session_id"]) / "session.jsonl").read_text()
    kinds = [json.loads(line).get("kind") for line in records.splitlines()[1:]]
    assert header["copied_entries"] == kinds.index("forked")  # the copies come first

    forked = await host.attach(fork["notebook_path"], session_id=fork["session_id"])
    assert forked.kernel.kernel_id != agent.kernel.kernel_id  # its own, fresh kernel
    before = len(fake_llm.requests)
    ended = await run_turn(host, forked.session_id, "epsilon")

    assert ended["final_text"] == "done epsilon" and ended["turn"] == 3
    sent = json.dumps(fake_llm.requests[before].body)
    assert "ran beta" in sent and "gamma" not in sent
    assert "were not carried over" in sent  # the model is told its kernel is fresh
    await wait_for(lambda: _saved_agent_cell_count(jp_root_dir / fork["notebook_path"]) == 3)
    nbformat.validate(nbformat.read(jp_root_dir / fork["notebook_path"], as_version=4))
    # A second fork takes the next free name.
    _, second = await fetch_json(
        jp_fetch, "sessions", agent.session_id, "fork", body={"entry_id": gamma["id"]}
    )
    assert second["notebook_path"] == "work/study-fork-2.ipynb"


async def test_forks_asked_for_at_once_each_get_their_own_notebook(
    host: Any, jp_fetch: Any, make_notebook: Any, fake_llm: FakeLLMServer
) -> None:
    agent = await three_turns(host, make_notebook("at-once.ipynb"))
    gamma = entry(await host.session_tree(agent.session_id), "user_message", "gamma")

    forks = await asyncio.gather(
        *(
            fetch_json(
                jp_fetch, "sessions", agent.session_id, "fork", body={"entry_id": gamma["id"]}
            )
            for _ in range(6)
        )
    )

    assert [status for status, _ in forks] == [201] * 6, forks
    paths = sorted(fork["notebook_path"] for _, fork in forks)
    assert paths == [f"at-once-fork-{n}.ipynb" for n in range(1, 7)]
    assert len({fork["session_id"] for _, fork in forks}) == 6


def _agent_cells(notebook: Any) -> list[Any]:
    return [c for c in notebook.cells if c.cell_type == "code" and "prime_agent" in c.metadata]


def _saved_agent_cell_count(path: Path) -> int:
    notebook = read_saved_notebook(path)
    return 0 if notebook is None else len(_agent_cells(notebook))


def _blank_cells(notebook: Any) -> list[int]:
    """Where the notebook's empty code cells are."""
    return [
        index
        for index, cell in enumerate(notebook.cells)
        if cell.cell_type == "code" and not cell.source.strip() and not cell.outputs
    ]


async def test_fork_and_clone_notebooks_end_in_one_empty_cell_that_stays_below_new_agent_cells(
    host: Any, jp_fetch: Any, jp_root_dir: Path, make_notebook: Any, fake_llm: FakeLLMServer
) -> None:
    agent = await three_turns(host, make_notebook("typing.ipynb"))
    gamma = entry(await host.session_tree(agent.session_id), "user_message", "gamma")

    _, fork = await fetch_json(
        jp_fetch, "sessions", agent.session_id, "fork", body={"entry_id": gamma["id"]}
    )
    _, clone = await fetch_json(jp_fetch, "sessions", agent.session_id, "clone", body={})

    for copy, agent_cells in ((fork, 2), (clone, 3)):
        notebook = nbformat.read(jp_root_dir / copy["notebook_path"], as_version=4)
        nbformat.validate(notebook)
        assert _blank_cells(notebook) == [len(notebook.cells) - 1], copy["notebook_path"]
        assert "prime_agent" not in notebook.cells[-1].metadata  # nobody's agent cell
        assert len(_agent_cells(notebook)) == agent_cells
    forked = await host.attach(fork["notebook_path"], session_id=fork["session_id"])
    ended = await run_turn(host, forked.session_id, "epsilon")
    assert ended["final_text"] == "done epsilon"
    path = jp_root_dir / fork["notebook_path"]
    await wait_for(lambda: _saved_agent_cell_count(path) == 3)
    notebook = read_saved_notebook(path)
    assert [c.source.splitlines()[0] for c in _agent_cells(notebook)][-1] == "epsilon = 'epsilon'"
    assert _blank_cells(notebook) == [len(notebook.cells) - 1]  # still one, still last


async def test_clone_copies_the_whole_branch_and_the_kernel_snapshot(
    host: Any, jp_fetch: Any, jp_root_dir: Path, make_notebook: Any, fake_llm: FakeLLMServer
) -> None:
    agent = await three_turns(host, make_notebook("clone.ipynb"))
    await wait_for(lambda: not host.runtime.snapshots.pending_save(agent.session_id))
    state = agent.session.directory / "kernel-state"  # each turn's start took a snapshot
    state.mkdir(exist_ok=True)
    (state / "manifest.json").write_text('{"saved": ["alpha"]}')

    status, clone = await fetch_json(jp_fetch, "sessions", agent.session_id, "clone", body={})

    assert status == 201 and clone["notebook_path"] == "clone-clone-1.ipynb", clone
    assert clone["kernel_state_copied"] is True
    copied = host.repository.directory(clone["session_id"]) / "kernel-state" / "manifest.json"
    assert copied.read_text() == '{"saved": ["alpha"]}'
    log = host.repository.load(clone["session_id"])
    assert [e["id"] for e in log.path()] == [e["id"] for e in agent.session.path()]
    assert log.header["cloned_from"] == {
        "session_id": agent.session_id,
        "entry_id": agent.session.leaf_id,
    }
    notebook = nbformat.read(jp_root_dir / clone["notebook_path"], as_version=4)
    nbformat.validate(notebook)
    assert len(_agent_cells(notebook)) == 3


async def test_clone_without_a_snapshot_tells_the_model_its_kernel_is_fresh(
    host: Any, make_notebook: Any, fake_llm: FakeLLMServer
) -> None:
    agent = await three_turns(host, make_notebook("fresh.ipynb"))
    # Each turn's start took a snapshot: a session without one is a session that lost it.
    await wait_for(lambda: not host.runtime.snapshots.pending_save(agent.session_id))
    shutil.rmtree(agent.session.directory / "kernel-state")

    clone = await host.clone(agent.session_id)

    log = host.repository.load(clone["session_id"])
    assert clone["kernel_state_copied"] is False
    assert log.path()[-1]["type"] == "notice" and log.path()[-1]["kind"] == "forked"


# ---------------------------------------------------------------- what the routes refuse


async def test_unknown_forged_and_wrong_entries_get_clear_errors_and_move_nothing(
    host: Any, jp_fetch: Any, make_notebook: Any, fake_llm: FakeLLMServer
) -> None:
    agent = await three_turns(host, make_notebook("errors.ipynb"))
    sid = agent.session_id
    tree = await host.session_tree(sid)
    cell_result = next(e for e in tree["entries"] if e["type"] == "tool_result")
    end_of_alpha = entry(tree, "turn_end", "done alpha")
    leaf = agent.session.leaf_id
    cases = [
        (("sessions", "20990101-000000-abcdef", "tree"), None, 404, "no session"),
        (("sessions", "20990101-000000-abcdef", "leaf"), {"entry_id": "x"}, 404, "no session"),
        (("sessions", sid, "leaf"), {}, 400, "entry_id must be an entry id"),
        (("sessions", sid, "leaf"), {"entry_id": 7}, 400, "not a number"),
        (("sessions", sid, "leaf"), {"entry_id": "deadbeef"}, 404, "no entry 'deadbeef'"),
        (("sessions", sid, "leaf"), {"entry_id": "../../etc"}, 404, "no entry"),
        (("sessions", sid, "leaf"), {"entry_id": cell_result["id"]}, 400, "is a tool_result"),
        (("sessions", sid, "fork"), {"entry_id": end_of_alpha["id"]}, 400, "from a user message"),
        (("sessions", sid, "fork"), {"entry_id": ["a"]}, 400, "not an array"),
        (("sessions", "..", "tree"), None, 404, "no such API route"),
        (("sessions", sid, "leaf"), "[1]", 400, "must be a JSON object"),
    ]
    for route, body, status, text in cases:
        if isinstance(body, str):
            response = await jp_fetch(
                "prime-agent", "api", *route, method="POST", body=body, raise_error=False
            )
            code, answer = response.code, json.loads(response.body)
        else:
            code, answer = await fetch_json(jp_fetch, *route, body=body)
        assert (code, text in answer.get("message", "")) == (status, True), (route, body, answer)

    assert agent.session.leaf_id == leaf
    assert [s["session_id"] for s in await host.list_sessions()] == [sid]  # nothing forked


async def test_branch_and_clone_are_refused_while_a_turn_runs(
    host: Any, jp_fetch: Any, make_notebook: Any, fake_llm: FakeLLMServer
) -> None:
    agent = await three_turns(host, make_notebook("busy.ipynb"))
    end_of_alpha = entry(await host.session_tree(agent.session_id), "turn_end", "done alpha")
    queue = agent.events.subscribe()
    fake_llm.delay_next(30)
    await host.send(agent.session_id, "slow")
    await next_event(queue, "turn_started")
    leaf = agent.session.leaf_id

    moved = await fetch_json(
        jp_fetch, "sessions", agent.session_id, "leaf", body={"entry_id": end_of_alpha["id"]}
    )
    cloned = await fetch_json(jp_fetch, "sessions", agent.session_id, "clone", body={})

    assert moved[0] == 409 and "working on a turn" in moved[1]["message"]
    assert cloned[0] == 409 and "working on a turn" in cloned[1]["message"]
    assert agent.session.leaf_id == leaf
    await host.stop(agent.session_id)
    await asyncio.wait_for(agent.turn_task, 30)


async def test_a_damaged_session_shows_its_tree_but_cannot_be_branched(
    host: Any, jp_fetch: Any, make_notebook: Any, fake_llm: FakeLLMServer
) -> None:
    agent = await three_turns(host, make_notebook("damaged.ipynb"))
    first_user = entry(await host.session_tree(agent.session_id), "user_message", "alpha")
    session_id = "20200101-000000-badbad"
    directory = host.repository.directory(session_id)
    directory.mkdir()
    header = {"type": "session", "session_id": session_id, "notebook_path": "damaged.ipynb"}
    good = {"id": "aaaa0001", "parent_id": None, "ts": "t", "type": "user_message", "text": "hi"}
    (directory / "session.jsonl").write_text(
        "\n".join(json.dumps(r) for r in (header, good, [1, 2])) + "\n"
    )

    status, tree = await fetch_json(jp_fetch, "sessions", session_id, "tree")
    leaf = await fetch_json(jp_fetch, "sessions", session_id, "leaf", body={"entry_id": "aaaa0001"})
    fork = await fetch_json(jp_fetch, "sessions", session_id, "fork", body={"entry_id": "aaaa0001"})

    assert status == 200 and "line 3" in tree["broken"] and len(tree["entries"]) == 1
    for code, answer in (leaf, fork):
        assert code == 409 and "is damaged" in answer["message"], answer
    assert first_user["branch_point"]


async def test_a_session_on_disk_can_be_branched_without_being_attached(
    host: Any, jp_fetch: Any, jp_serverapp: Any, make_notebook: Any, fake_llm: FakeLLMServer
) -> None:
    agent = await three_turns(host, make_notebook("stored.ipynb"))
    sid = agent.session_id
    end_of_alpha = entry(await host.session_tree(sid), "turn_end", "done alpha")
    host.runtime.detach(agent)

    status, moved = await fetch_json(
        jp_fetch, "sessions", sid, "leaf", body={"entry_id": end_of_alpha["id"]}
    )

    assert status == 200 and moved["marked_cells"] == 2
    reattached = await host.attach("stored.ipynb", session_id=sid)
    assert reattached.session.leaf_id == end_of_alpha["id"]
    ended = await run_turn(host, sid, "delta")
    assert ended["turn"] == 2
