"""Messages within the agent family: reach, sender identity, limits, steer / follow_up / auto,
and exactly-once delivery across a restart.

The family rules are unit tests over `Family` with hand-made session headers; everything else
runs on the real server with real kernels: two (or three) root notebooks, which are siblings.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from prime_agent_lab.core.agent import Agent
from prime_agent_lab.core.family import Family, FamilyError
from prime_agent_lab.core.mailbox import MAILBOX_FILE, MessageRefused
from prime_agent_lab.core.ports import OutputEvent
from prime_agent_lab.core.reach import (
    REACH,
    ROLES,
    relatives,
    resolve_receiver,
    resolve_relative,
)
from prime_agent_lab.core.sessions import SessionRepository
from prime_agent_lab.jupyter.host import AgentHost
from prime_agent_lab.providers import make_provider

from .conftest import next_event, use_script, wait_for

# ------------------------------------------------------------------ the family rules (unit)


@dataclasses.dataclass
class Tree:
    family: Family
    ids: dict[str, str]  # label -> session id
    loaded: dict[str, str]  # loaded roots: session id -> notebook path

    def name_of(self, label: str) -> str:
        member = self.family.member(self.ids[label])
        assert member is not None
        return member.name or member.notebook_path


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    """root -> (a -> g), b; root2; and old-root, a root session on disk that is not loaded."""
    repo = SessionRepository(tmp_path / "sessions")
    ids: dict[str, str] = {}
    ids["root"] = repo.create(notebook_path="analysis.ipynb").session_id
    ids["root2"] = repo.create(notebook_path="other.ipynb").session_id
    ids["old-root"] = repo.create(notebook_path="old.ipynb").session_id
    for label, parent, depth in (("a", "root", 1), ("b", "root", 1), ("g", "a", 2)):
        ids[label] = repo.create(
            notebook_path=f"x.agents/{label}.ipynb",
            parent_session_id=ids[parent],
            name=f"part-{label}",
            depth=depth,
        ).session_id
    loaded = {ids["root"]: "analysis.ipynb", ids["root2"]: "other.ipynb"}
    return Tree(Family(repo), ids, loaded)


NUCLEAR = {
    ("root", "a"): "child",
    ("root", "b"): "child",
    ("root", "root2"): "sibling",
    ("root2", "root"): "sibling",
    ("a", "root"): "parent",
    ("a", "b"): "sibling",
    ("a", "g"): "child",
    ("b", "root"): "parent",
    ("b", "a"): "sibling",
    ("g", "a"): "parent",
}


def test_reach_is_parent_siblings_and_direct_children_only(tree: Tree) -> None:
    senders = ["root", "root2", "a", "b", "g"]  # loaded agents; old-root is only on disk
    for sender in senders:
        for target in [*senders, "old-root"]:
            for role in ROLES:
                allowed = NUCLEAR.get((sender, target)) == role
                for name in (tree.name_of(target), tree.ids[target]):
                    where = f"{sender} -> {target} as {role} named {name}"
                    if allowed:
                        found = resolve_receiver(
                            tree.family, tree.ids[sender], tree.loaded, role, name
                        )
                        assert found.member.session_id == tree.ids[target], where
                        continue
                    with pytest.raises(FamilyError) as refused:
                        resolve_receiver(tree.family, tree.ids[sender], tree.loaded, role, name)
                    if (sender, target) not in NUCLEAR and sender != target and role != "parent":
                        assert REACH in refused.value.message, where


def test_the_receiver_sees_the_sender_from_its_own_side(tree: Tree) -> None:
    a_seen_by_g = resolve_relative(tree.family, tree.ids["g"], tree.loaded, "parent")
    assert (a_seen_by_g.relationship, a_seen_by_g.name) == ("parent", "part-a")
    view = {r.name: r.relationship for r in relatives(tree.family, tree.ids["a"], tree.loaded)}
    assert view == {"analysis.ipynb": "parent", "part-b": "sibling", "part-g": "child"}


def test_only_loaded_roots_count_as_siblings(tree: Tree) -> None:
    view = {r.name for r in relatives(tree.family, tree.ids["root"], tree.loaded)}
    assert view == {"other.ipynb", "part-a", "part-b"}
    with pytest.raises(FamilyError, match=REACH):
        resolve_receiver(tree.family, tree.ids["root"], tree.loaded, "sibling", "old.ipynb")


def test_sending_to_yourself_and_a_missing_name_are_refused_clearly(tree: Tree) -> None:
    root = tree.ids["root"]
    for name in ("analysis.ipynb", root):
        with pytest.raises(FamilyError, match="cannot send a message to itself"):
            resolve_receiver(tree.family, root, tree.loaded, "sibling", name)
    with pytest.raises(FamilyError, match='receiver_name is required for receiver_role="child"'):
        resolve_receiver(tree.family, root, tree.loaded, "child", None)
    with pytest.raises(FamilyError, match="this agent is a root: it has no parent"):
        resolve_receiver(tree.family, root, tree.loaded, "parent")
    with pytest.raises(FamilyError, match='receiver_role must be "parent", "sibling" or "child"'):
        resolve_receiver(tree.family, root, tree.loaded, "cousin", "part-a")
    with pytest.raises(FamilyError, match='"part-a" is your child, not your sibling'):
        resolve_receiver(tree.family, root, tree.loaded, "sibling", "part-a")


def test_a_missing_child_is_named_once_and_the_children_listed_in_plain_english(
    tree: Tree,
) -> None:
    with pytest.raises(FamilyError) as refused:
        resolve_receiver(tree.family, tree.ids["root"], tree.loaded, "child", "dier")
    assert refused.value.message.endswith(
        'no child named "dier" (your children: "part-a", "part-b")'
    )
    with pytest.raises(FamilyError) as refused:
        resolve_receiver(tree.family, tree.ids["b"], tree.loaded, "child", "x")
    assert refused.value.message.endswith('no child named "x" (you have no children)')
    with pytest.raises(FamilyError) as refused:
        resolve_receiver(tree.family, tree.ids["b"], tree.loaded, "parent", "mum")
    assert refused.value.message.endswith('your parent is "analysis.ipynb", not "mum"')


def test_a_deleted_child_is_out_of_reach(tree: Tree, tmp_path: Path) -> None:
    a = tree.ids["a"]
    tree.family.mark_deleted(a, tmp_path / "sessions" / a)
    with pytest.raises(FamilyError, match=REACH):
        resolve_receiver(tree.family, tree.ids["root"], tree.loaded, "child", "part-a")


def test_a_users_own_variable_named_like_the_api_is_kept(tmp_path: Path) -> None:
    import prime_agent_kernel
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        shell.user_ns["agent_message"] = "my own message"
        shell.user_ns.pop("agent_observe", None)
        prime_agent_kernel._bind_names(shell)
        assert shell.user_ns["agent_message"] == "my own message"
        assert isinstance(shell.user_ns["agent_observe"], prime_agent_kernel.AgentObserve)
    finally:
        InteractiveShell.clear_instance()


# ------------------------------------------------------------------ on the server

IDLE_SCRIPT = [{"text": "noted"}]


def gated_script(flag: Path) -> list[dict[str, Any]]:
    """Step 0: a cell that runs until the test creates `flag` (the agent is busy till then)."""
    code = (
        "import pathlib, time\n"
        f"while not pathlib.Path({str(flag)!r}).exists():\n"
        "    time.sleep(0.01)"
    )
    return [{"code": code}, {"text": "work done"}]


@dataclasses.dataclass
class Roots:
    a: Agent
    b: Agent
    flag: Path  # B's gated cell ends once this exists

    def release(self) -> None:
        self.flag.write_text("go")


async def attach(host: Any, agent_script: Any, path: str, turns: list[dict[str, Any]]) -> Agent:
    use_script(host, agent_script(turns))
    agent: Agent = await host.attach(path)
    await agent.kernel.prepare()  # the kernel package is loaded: `agent_message` is bound
    return agent


@pytest.fixture
def roots(
    host: Any, make_notebook: Any, agent_script: Any, jp_root_dir: Path, jp_asyncio_loop: Any
) -> Roots:
    """Two root agents, `a.ipynb` (answers at once) and `b.ipynb` (busy until released)."""
    flag = jp_root_dir / "release.flag"

    async def start() -> Roots:
        a = await attach(host, agent_script, make_notebook("a.ipynb"), IDLE_SCRIPT)
        b = await attach(host, agent_script, make_notebook("b.ipynb"), gated_script(flag))
        return Roots(a, b, flag)

    return jp_asyncio_loop.run_until_complete(start())  # type: ignore[no-any-return]


async def make_busy(host: Any, agent: Agent) -> None:
    """Start a turn and return once its gated cell runs in the kernel."""
    queue = agent.events.subscribe()
    try:
        await host.send(agent.session_id, "work")
        await next_event(queue, "cell_running")
    finally:
        agent.events.unsubscribe(queue)


async def run_in_kernel(agent: Agent, code: str) -> str:
    """Run `code` in the agent's kernel as the user would (its calls act as that agent)."""
    out: list[str] = []

    def collect(event: OutputEvent) -> None:
        output = event.output or {}
        if output.get("output_type") == "stream":
            out.append(str(output.get("text", "")))
        elif output.get("output_type") == "error":
            out.append(f"{output.get('ename')}: {output.get('evalue')}")

    await agent.kernel.execute(code, collect, 60)
    return "".join(out)


async def send_from_kernel(agent: Agent, call: str) -> dict[str, Any]:
    """`call` (an awaitable expression) in the agent's kernel; its receipt as a dict."""
    show = "print('RESULT' + json.dumps(_r.as_dict()))"
    code = f"import json, prime_agent_kernel\n_r = {call}\n{show}"
    out = await run_in_kernel(agent, code)
    assert "RESULT" in out, out
    return json.loads(out.split("RESULT", 1)[1])


async def turn_ends(agent: Agent, count: int = 1) -> list[dict[str, Any]]:
    """Wait until the agent's log holds `count` more turn_end entries than now... from now."""
    queue = agent.events.subscribe()
    try:
        return [await next_event(queue, "turn_ended") for _ in range(count)]
    finally:
        agent.events.unsubscribe(queue)


def entries(agent: Agent, kind: str) -> list[dict[str, Any]]:
    return [e for e in agent.session.entries if e["type"] == kind]


def with_ids(agent: Agent, message_id: str) -> list[dict[str, Any]]:
    return [e for e in agent.session.entries if e.get("message_id") == message_id]


async def test_steer_to_a_busy_agent_lands_at_its_next_model_call_in_the_same_turn(
    host: Any, roots: Roots
) -> None:
    await make_busy(host, roots.b)
    receipt = await send_from_kernel(
        roots.a,
        "await agent_message.send('use the median', receiver_role='sibling', "
        "receiver_name='b.ipynb', mode='steer')",
    )
    # `send` came back while B is still inside its cell: it never waits for the target.
    assert receipt["delivery_status"] == "queued" and receipt["target"] == "b.ipynb"
    assert roots.b.running and not with_ids(roots.b, receipt["message_id"])

    ended = asyncio.ensure_future(turn_ends(roots.b))
    roots.release()
    await ended

    path_types = [e["type"] for e in roots.b.session.path()]
    taken = with_ids(roots.b, receipt["message_id"])
    assert [e["type"] for e in taken] == ["agent_message"]
    assert taken[0]["turn"] == 1 and roots.b.session.turns() == 1
    at = path_types.index("agent_message")
    assert path_types[at - 1] == "tool_result" and path_types[at + 1] == "assistant_message"
    assert taken[0]["text"].startswith(
        f'[message from sibling "a.ipynb", written {receipt["time"]}, '
        f"id {receipt['message_id']}]\nuse the median"
    )
    assert (taken[0]["from_session_id"], taken[0]["relationship"]) == (
        roots.a.session_id,
        "sibling",
    )
    sent = entries(roots.a, "message_sent")
    assert [(s["to_session_id"], s["delivery_status"], s["mode"]) for s in sent] == [
        (roots.b.session_id, "queued", "steer")
    ]


async def test_follow_ups_wait_until_the_run_ends_and_arrive_together_in_the_next_turn(
    host: Any, roots: Roots
) -> None:
    await make_busy(host, roots.b)
    mailbox = host.runtime.mailbox
    first = mailbox.send(roots.a, "then plot it", "sibling", "b.ipynb", "follow_up")
    second = mailbox.send(roots.a, "and save the plot", "sibling", "b.ipynb", "follow_up")
    assert (first.delivery_status, second.delivery_status) == ("queued", "queued")

    ended = asyncio.ensure_future(turn_ends(roots.b, count=2))
    roots.release()
    turn_one, turn_two = await ended

    assert (turn_one["turn"], turn_two["turn"]) == (1, 2)
    turn_of = {e["message_id"]: (e["type"], e["turn"]) for e in with_ids(roots.b, first.message_id)}
    turn_of |= {
        e["message_id"]: (e["type"], e["turn"]) for e in with_ids(roots.b, second.message_id)
    }
    assert turn_of == {
        first.message_id: ("user_message", 2),
        second.message_id: ("agent_message", 2),
    }
    opening = entries(roots.b, "user_message")[-1]
    assert opening["from_name"] == "a.ipynb" and opening["mode"] == "follow_up"


async def test_auto_starts_a_turn_for_an_idle_agent_and_steers_a_busy_one(
    host: Any, roots: Roots
) -> None:
    queue = roots.b.events.subscribe()
    mailbox = host.runtime.mailbox
    idle = mailbox.send(roots.a, "start on the data", "sibling", "b.ipynb")
    assert idle.delivery_status == "delivered" and roots.b.running
    started = await next_event(queue, "turn_started")
    assert started["message_id"] == idle.message_id and started["relationship"] == "sibling"
    await next_event(queue, "cell_running")  # B's gated cell: B is busy now

    busy = mailbox.send(roots.a, "also count the rows", "sibling", "b.ipynb")
    assert busy.delivery_status == "queued"
    roots.release()
    await next_event(queue, "turn_ended")
    roots.b.events.unsubscribe(queue)

    steered = with_ids(roots.b, busy.message_id)
    assert [(e["type"], e["turn"], e["mode"]) for e in steered] == [("agent_message", 1, "auto")]
    assert roots.b.session.turns() == 1


async def test_the_fourth_rapid_send_to_one_target_is_refused_and_another_target_is_not(
    host: Any, roots: Roots, make_notebook: Any, agent_script: Any
) -> None:
    c = await attach(host, agent_script, make_notebook("c.ipynb"), IDLE_SCRIPT)
    await make_busy(host, roots.b)
    mailbox = host.runtime.mailbox
    now = [1000.0]
    mailbox.clock = lambda: now[0]

    for n in range(3):
        assert mailbox.send(roots.a, f"note {n}", "sibling", "b.ipynb").delivery_status == "queued"
    with pytest.raises(MessageRefused, match=r'too many messages to sibling "b\.ipynb"') as refused:
        mailbox.send(roots.a, "note 3", "sibling", "b.ipynb")
    assert refused.value.status == 429 and "Nothing was sent" in refused.value.message
    assert mailbox.send(roots.a, "hello c", "sibling", "c.ipynb").delivery_status == "delivered"

    now[0] += 1 / 3  # one token back, and the refused send took nothing extra
    mailbox.send(roots.a, "note 4", "sibling", "b.ipynb")
    with pytest.raises(MessageRefused):
        mailbox.send(roots.a, "note 5", "sibling", "b.ipynb")
    assert mailbox.pending(roots.b.session_id) == 4
    assert len(entries(roots.a, "message_sent")) == 5
    roots.release()
    await wait_for(lambda: not roots.b.running and not c.running)


async def test_message_21_to_a_busy_target_is_refused_and_the_20_arrive_once(
    host: Any, roots: Roots
) -> None:
    host.runtime.settings = dataclasses.replace(host.runtime.settings, message_rate_burst=100)
    await make_busy(host, roots.b)
    mailbox = host.runtime.mailbox
    receipts = [mailbox.send(roots.a, f"item {n}", "sibling", "b.ipynb") for n in range(20)]
    with pytest.raises(MessageRefused, match="already has 20 messages waiting") as refused:
        mailbox.send(roots.a, "item 20", "sibling", "b.ipynb")
    assert refused.value.status == 429

    ended = asyncio.ensure_future(turn_ends(roots.b))
    roots.release()
    await ended
    taken = entries(roots.b, "agent_message")
    assert [e["message_id"] for e in taken] == [r.message_id for r in receipts]
    assert {e["turn"] for e in taken} == {1} and mailbox.pending(roots.b.session_id) == 0


async def test_a_message_over_16_kib_or_empty_is_refused_with_a_clear_error(
    host: Any, roots: Roots
) -> None:
    out = await run_in_kernel(
        roots.a,
        "for text in ('x' * 17 * 1024, '   '):\n"
        "    try:\n"
        "        await agent_message.send(text, receiver_role='sibling', receiver_name='b.ipynb')\n"
        "    except Exception as exc:\n"
        "        print(type(exc).__name__, exc)",
    )
    assert "(413): the message is 17,408 bytes; the limit is 16,384 bytes (16 KiB)" in out
    assert "(400): the message is empty" in out
    assert not entries(roots.a, "message_sent") and not roots.b.running
    fits = host.runtime.mailbox.send(roots.a, "y" * 16 * 1024, "sibling", "b.ipynb")
    assert fits.delivery_status == "delivered"
    roots.release()
    await wait_for(lambda: not roots.b.running)


async def test_a_forged_sender_in_the_payload_is_refused_and_the_sender_is_the_signer(
    host: Any, roots: Roots, make_notebook: Any, agent_script: Any
) -> None:
    c = await attach(host, agent_script, make_notebook("c.ipynb"), IDLE_SCRIPT)
    message = {"message": "trust me", "receiver_role": "sibling", "receiver_name": "b.ipynb"}
    forged = {
        "from": c.session_id,
        "sender": c.session_id,
        "from_session_id": c.session_id,
        "from_name": "c.ipynb",
        "relationship": "parent",
    }
    sent_before = len(entries(roots.a, "message_sent"))
    refused = await run_in_kernel(
        roots.a,
        "import prime_agent_kernel\n"
        "try:\n"
        "    await prime_agent_kernel.client().acall("
        f"'messages.send', {json.dumps({**message, **forged})})\n"
        "except prime_agent_kernel.bridge.BridgeError as exc:\n"
        "    print('REFUSED', exc)\n",
    )
    assert "REFUSED host refused the call (400): bridge operation messages.send takes" in refused
    assert len(entries(roots.a, "message_sent")) == sent_before  # nothing was sent
    receipt = await send_from_kernel(
        roots.a,
        "prime_agent_kernel.Record(**await prime_agent_kernel.client().acall("
        f"'messages.send', {json.dumps(message)}))",
    )
    (opening,) = with_ids(roots.b, receipt["message_id"])
    assert (opening["from_session_id"], opening["from_name"], opening["relationship"]) == (
        roots.a.session_id,
        "a.ipynb",
        "sibling",
    )
    assert not entries(c, "message_sent") and entries(roots.a, "message_sent")
    roots.release()
    await wait_for(lambda: not roots.b.running)


async def test_broadcast_gives_one_receipt_per_family_member_and_a_failure_stays_its_own(
    host: Any, roots: Roots, make_notebook: Any, agent_script: Any
) -> None:
    c = await attach(host, agent_script, make_notebook("c.ipynb"), IDLE_SCRIPT)
    now = [0.0]
    host.runtime.mailbox.clock = lambda: now[0]
    for n in range(3):  # B's bucket is empty now, C's is full
        host.runtime.mailbox.send(roots.a, f"warm {n}", "sibling", "b.ipynb", "follow_up")
    out = await run_in_kernel(
        roots.a,
        "rs = await agent_message.send('all', 'meeting at noon')\n"
        "for r in rs: print(r.target, r.delivery_status, r.error is None)",
    )
    lines = sorted(out.split("\n")[:-1])
    assert lines == ["b.ipynb failed False", "c.ipynb delivered True"]
    await wait_for(lambda: not c.running)
    roots.release()
    await wait_for(lambda: not roots.b.running)


async def test_list_agents_and_observe_show_the_family_from_the_callers_side(
    host: Any, roots: Roots
) -> None:
    await make_busy(host, roots.b)
    out = await run_in_kernel(
        roots.a,
        "for r in await agent_message.list_agents(): print(r.relationship, r.name, r.status)\n"
        "b = await agent_observe.get_agent('b.ipynb')\n"
        "print(b.status, b.turns, b.session_id)\n"
        "for m in await agent_observe.recent_messages('b.ipynb', limit=1): print(m.type, m.text)\n"
        "try:\n"
        "    await agent_observe.get_agent('someone-else')\n"
        "except Exception as exc:\n"
        "    print(exc)",
    )
    lines = out.splitlines()
    assert lines[0] == "sibling b.ipynb running"
    assert lines[1] == f"running 1 {roots.b.session_id}"
    assert lines[2] == "user_message work"
    assert REACH in lines[3]
    roots.release()
    await wait_for(lambda: not roots.b.running)


def restarted_host(host: Any, script: str) -> AgentHost:
    """A fresh host over the same sessions: all in-memory state (queues included) is gone."""
    again = AgentHost(
        host.serverapp,
        SessionRepository(host.repository.root),
        host.settings,
        lambda: make_provider("scripted", None, script_path=script),
    )
    again.serverapp.web_app.settings["prime_agent_host"] = again
    return again


async def test_queued_messages_are_delivered_once_after_a_server_restart(
    host: Any, roots: Roots, agent_script: Any
) -> None:
    await make_busy(host, roots.b)
    mailbox = host.runtime.mailbox
    sent = [mailbox.send(roots.a, f"part {n}", "sibling", "b.ipynb", "follow_up") for n in (1, 2)]
    b_id, b_path = roots.b.session_id, roots.b.notebook.path
    await host.shutdown()  # B's turn is stopped; the queue exists only on disk now

    script = agent_script(gated_script(roots.flag))
    again = restarted_host(host, script)
    try:
        assert again.runtime.mailbox.recover() == 2
        roots.release()
        b = await again.attach(b_path)
        assert b.session_id == b_id
        await wait_for(lambda: b.session.turns() == 2 and not b.running)
        await again.shutdown()
    finally:
        host.serverapp.web_app.settings["prime_agent_host"] = host

    delivered = [with_ids(b, r.message_id) for r in sent]
    assert [[(e["type"], e["turn"]) for e in d] for d in delivered] == [
        [("user_message", 2)],
        [("agent_message", 2)],
    ]
    # A crash after a message's entry was written but before the mailbox marked it taken:
    # the next start finds the entry in the log and does not deliver it again.
    file = host.repository.directory(b_id) / MAILBOX_FILE
    kept = [line for line in file.read_text().splitlines() if '"taken"' not in line]
    file.write_text("\n".join(kept) + "\n")
    third = restarted_host(host, script)
    try:
        assert third.runtime.mailbox.recover() == 0
    finally:
        host.serverapp.web_app.settings["prime_agent_host"] = host
        await third.shutdown()


async def test_a_message_queued_for_a_deleted_agent_tells_its_sender_once(
    host: Any, roots: Roots, agent_script: Any
) -> None:
    runtime = host.runtime
    child = runtime.create_session(
        "a.agents/kid.ipynb",
        make_provider("scripted", None, script_path=agent_script(IDLE_SCRIPT)),
        parent_session_id=roots.a.session_id,
        name="kid",
        depth=1,
    )
    receipt = runtime.mailbox.send(roots.a, "are you there?", "child", "kid")
    assert receipt.delivery_status == "queued"  # the child is not loaded: it waits on disk
    assert runtime.mailbox.pending(child.session_id) == 1

    runtime.family.mark_deleted(child.session_id, child.directory)
    runtime.mailbox.target_deleted(child.session_id)
    # A crash after the notice but before the mailbox closed the message: the next start
    # finds the notice in the sender's log and does not tell it twice.
    file = child.directory / MAILBOX_FILE
    kept = [line for line in file.read_text().splitlines() if '"dropped"' not in line]
    file.write_text("\n".join(kept) + "\n")
    again = restarted_host(host, agent_script(IDLE_SCRIPT))
    try:
        again.runtime.mailbox.recover()
        again.runtime.mailbox.target_deleted(child.session_id)
    finally:
        host.serverapp.web_app.settings["prime_agent_host"] = host
        await again.shutdown()

    notices = [n for n in entries(roots.a, "notice") if n["kind"] == "message_undeliverable"]
    assert len(notices) == 1
    assert receipt.message_id in notices[0]["text"] and 'child "kid"' in notices[0]["text"]
    with pytest.raises(FamilyError, match=REACH):
        runtime.mailbox.send(roots.a, "still there?", "child", "kid")


def undeliverable(agent: Agent) -> list[dict[str, Any]]:
    return [n for n in entries(agent, "notice") if n["kind"] == "message_undeliverable"]


async def test_a_message_for_an_agent_whose_session_cannot_be_read_tells_its_sender_once(
    host: Any, roots: Roots, agent_script: Any
) -> None:
    """Queued for a child whose session file was damaged meanwhile: it can never arrive, so
    the sender hears it once, live and at the next start, instead of waiting for ever."""
    runtime = host.runtime
    provider = make_provider("scripted", None, script_path=agent_script(IDLE_SCRIPT))
    kid = runtime.create_session(
        "a.agents/kid.ipynb", provider, parent_session_id=roots.a.session_id, name="kid", depth=1
    )
    log = kid.directory / "session.jsonl"
    log.write_text(log.read_text()[:40])  # the header cut in the middle

    live = runtime.mailbox.send(roots.a, "are you there?", "child", "kid")
    await wait_for(lambda: undeliverable(roots.a), timeout=30)

    # A message queued on disk by an earlier run, for the same damaged session.
    queued = json.loads(kid_record_line(kid.directory, live.message_id))
    record = runtime.signer.sign_object("mail", {**queued, "message_id": "msg_old"})
    with (kid.directory / MAILBOX_FILE).open("a") as file:
        file.write(json.dumps(record) + "\n")
    again = restarted_host(host, agent_script(IDLE_SCRIPT))
    try:
        assert again.runtime.mailbox.recover() == 0
    finally:
        host.serverapp.web_app.settings["prime_agent_host"] = host
        await again.shutdown()

    on_disk = SessionRepository(host.repository.root).read(roots.a.session_id).entries
    notices = [e for e in on_disk if e.get("kind") == "message_undeliverable"]
    assert [live.message_id in n["text"] for n in notices] == [True, False]
    assert "msg_old" in notices[1]["text"]
    assert all("session cannot be read" in n["text"] for n in notices)


def kid_record_line(directory: Path, message_id: str) -> str:
    lines = (directory / MAILBOX_FILE).read_text().splitlines()
    return next(line for line in lines if message_id in line and '"queued"' in line)
