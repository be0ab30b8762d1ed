"""Chat commands, declared once in `core/commands.py`: the panel's list is generated from the
declaration, each form parses as documented, and every declared form runs on a real server."""

from __future__ import annotations

import asyncio
import inspect
import json
import typing
from pathlib import Path
from typing import Any

import pytest

from prime_agent_lab.core import commands
from prime_agent_lab.core.commands import BY_NAME, COMMANDS, VIEWS, CommandError
from tests.conftest import run_turn, use_script
from tests.kernel_clients import wait_for_file
from tests.test_refine_server import call
from tests.test_subagents import CHILD, WAIT_FOR_CHILDREN

REPO = Path(__file__).resolve().parents[1]
COMMANDS_TS = REPO / "labextension" / "src" / "commands.ts"
REGENERATE = "python -m prime_agent_lab.core.commands --ts > labextension/src/commands.ts"


def test_checked_in_typescript_is_generated_from_commands_py() -> None:
    assert COMMANDS_TS.read_text() == commands.typescript(), f"commands.ts is stale: `{REGENERATE}`"


def test_the_typescript_lists_every_command_with_its_forms_help_and_view() -> None:
    listed = commands.typescript().split("export const CHAT_COMMANDS: readonly ICommandSpec[] = ")
    table = json.loads(listed[1].rstrip().rstrip(";"))
    assert [c["name"] for c in table] == [c.name for c in COMMANDS]
    for spec, command in zip(table, COMMANDS, strict=True):
        assert spec == command.spec()
        assert spec["help"] and all(
            form["help"] and form["view"] in VIEWS for form in spec["forms"]
        )
    for view, answer in VIEWS.items():
        assert f"  {view}: I{answer.__name__};" in commands.typescript()


def test_every_declared_form_has_an_async_handler_and_a_view() -> None:
    assert set(VIEWS) == set(typing.get_args(commands.CommandView))
    for command in COMMANDS:
        for form in command.forms:
            assert inspect.iscoroutinefunction(form.run), (command.name, form.keyword)
            assert form.view in VIEWS


def test_a_declaration_with_a_bad_name_or_view_or_two_equal_keywords_is_refused() -> None:
    async def run(host: Any, session_id: str, values: dict[str, Any]) -> None:
        return None

    with pytest.raises(ValueError, match="view"):
        commands.Form("x", "nowhere", run)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="name"):
        commands.Command("Use Me", "x", (commands.Form("x", "note", run),))
    with pytest.raises(ValueError, match="same keyword"):
        commands.Command(
            "x", "x", (commands.Form("a", "note", run), commands.Form("b", "note", run))
        )


def parsed(name: str, text: str) -> tuple[str | None, dict[str, Any]]:
    form, values = BY_NAME[name].parse(text)
    return form.keyword, values


def refused(name: str, text: str) -> str:
    with pytest.raises(CommandError) as caught:
        BY_NAME[name].parse(text)
    assert caught.value.status == 400
    return caught.value.message


def test_refine_reads_a_bare_command_instructions_and_global_before_them() -> None:
    assert parsed("refine", "") == (None, {"global": False, "instructions": None})
    assert parsed("refine", "  ") == (None, {"global": False, "instructions": None})
    assert parsed("refine", "promote the retry pattern\nto a skill") == (
        None,
        {"global": False, "instructions": "promote the retry pattern\nto a skill"},
    )
    assert parsed("refine", "--global house style") == (
        None,
        {"global": True, "instructions": "house style"},
    )
    assert parsed("refine", "--global") == (None, {"global": True, "instructions": None})
    # --global inside the instructions is text
    assert parsed("refine", "explain --global flags") == (
        None,
        {"global": False, "instructions": "explain --global flags"},
    )


def test_goal_reads_a_valued_budget_option_an_objective_and_its_keywords_alone() -> None:
    assert parsed("goal", "") == (None, {"budget": None, "objective": None})
    assert parsed("goal", "fix the tests") == (None, {"budget": None, "objective": "fix the tests"})
    assert parsed("goal", "--budget 5000 fix it") == (None, {"budget": 5000, "objective": "fix it"})
    assert parsed("goal", "--budget=200_000 fix it") == (
        None,
        {"budget": 200_000, "objective": "fix it"},
    )
    for keyword in ("status", "pause", "resume", "clear"):
        assert parsed("goal", keyword) == (keyword, {})
    assert parsed("goal", "status of the paper") == (
        None,
        {"budget": None, "objective": "status of the paper"},
    )
    assert parsed("goal", "-- clear the cache") == (
        None,
        {"budget": None, "objective": "clear the cache"},
    )
    usage = "Usage: /goal [--budget N] [objective]"
    assert refused("goal", "--budget") == f"--budget needs a value (N). {usage}"
    assert refused("goal", "--budget= fix") == f"--budget needs a value (N). {usage}"
    assert (
        refused("goal", "--budget ten fix") == f"--budget takes a whole number, not 'ten'. {usage}"
    )
    assert refused("goal", "--budget 5 status") == "/goal status takes no --budget."
    assert refused("goal", "--global fix").startswith("Unknown option --global. Usage: /goal")
    assert refused("refine", "--global=yes").startswith("Unknown option --global=yes.")


def test_refine_rollback_takes_one_id_with_global_before_or_after_it() -> None:
    assert parsed("refine", "rollback ref_1") == ("rollback", {"global": False, "id": "ref_1"})
    assert parsed("refine", "rollback ref_1 --global") == (
        "rollback",
        {"global": True, "id": "ref_1"},
    )
    assert parsed("refine", "--global rollback ref_1") == (
        "rollback",
        {"global": True, "id": "ref_1"},
    )
    assert refused("refine", "rollback").startswith("Which refinement?")
    assert "/refine rollback <id>" in refused("refine", "rollback")
    assert refused("refine", "rollback --global").startswith("Which refinement?")
    assert "/refine -- rollback" in refused("refine", "rollback a b")


def test_refine_double_dash_starts_text_that_looks_like_a_form_and_history_is_alone() -> None:
    assert parsed("refine", "-- rollback the retry change") == (
        None,
        {"global": False, "instructions": "rollback the retry change"},
    )
    assert parsed("refine", "--global -- history of errors") == (
        None,
        {"global": True, "instructions": "history of errors"},
    )
    assert parsed("refine", "history") == ("history", {})
    assert parsed("refine", "history of failures") == (
        None,
        {"global": False, "instructions": "history of failures"},
    )
    assert refused("refine", "--global history") == "/refine history takes no --global."


def test_unknown_options_and_text_for_a_command_without_arguments_give_the_usage() -> None:
    assert refused("refine", "--verbose") == (
        "Unknown option --verbose. Usage: /refine [--global] [instructions] · "
        "/refine rollback <id> [--global] · /refine history"
    )
    assert refused("refine", "rollback ref_1 --force").startswith("Unknown option --force.")
    assert refused("tree", "please") == "/tree takes no text. Usage: /tree"
    assert refused("usage", "--all").startswith("Unknown option --all.")
    assert parsed("usage", "") == (None, {})


def test_a_refine_or_rollback_answer_is_said_in_words() -> None:
    describe = commands._describe
    assert describe({"scheduled": True, "note": "planning in the background"}, "x") == (
        "planning in the background"
    )
    assert describe({"scheduled": True}, "scheduled") == "scheduled"
    assert describe({"scheduled": False, "reason": "a plan is in flight"}, "x") == (
        "not scheduled: a plan is in flight"
    )
    queued = {"queued": True, "applied": False, "note": "queued: applies at the next turn boundary"}
    assert describe(queued, "x") == "queued: applies at the next turn boundary"


class TreeHost:
    """The two host calls `/fork` makes, over a given tree."""

    def __init__(self, entries: list[dict[str, Any]]) -> None:
        self.entries = entries
        self.forked: list[object] = []

    async def session_tree(self, session_id: str) -> dict[str, Any]:
        return {"session_id": session_id, "leaf_id": None, "entries": self.entries}

    async def fork(self, session_id: str, entry_id: object) -> dict[str, Any]:
        self.forked.append(entry_id)
        return {"session_id": "copy", "notebook_path": "copy.ipynb"}


def node(entry_id: str, kind: str, on_branch: bool) -> dict[str, Any]:
    return {"id": entry_id, "type": kind, "on_branch": on_branch}


async def test_fork_forks_from_the_newest_user_message_on_the_current_branch() -> None:
    host = TreeHost(
        [
            node("10", "user_message", True),
            node("12", "turn_end", True),
            node("20", "user_message", False),  # another branch, written later
            node("30", "user_message", True),
            node("31", "turn_end", True),
        ]
    )
    await commands._fork(host, "s", {})  # type: ignore[arg-type]
    assert host.forked == ["30"]
    with pytest.raises(CommandError, match="Nothing to fork from"):
        await commands._fork(TreeHost([node("20", "user_message", False)]), "s", {})  # type: ignore[arg-type]


# ---------------------------------------------------------------- on a real server

# The text after the name for every declared form (a new form must be added here: it is run).
EXAMPLES: dict[tuple[str, str | None], str] = {
    ("help", None): "",
    ("tree", None): "",
    ("fork", None): "",
    ("clone", None): "",
    ("refine", None): "--global",
    ("refine", "history"): "history",
    ("refine", "rollback"): "rollback {refinement}",
    ("usage", None): "",
    ("context", None): "",
    ("model", None): "",
    ("heartbeat", None): "every 10m --follow-up check the training log",
    ("heartbeat", "status"): "status",
    ("heartbeat", "pause"): "pause",
    ("heartbeat", "resume"): "resume",
    ("heartbeat", "stop"): "stop",
    ("goal", None): "--budget 100000 write a haiku",
    ("goal", "status"): "status",
    ("goal", "pause"): "pause",
    ("goal", "resume"): "resume",
    ("goal", "clear"): "clear",
}

PROPOSAL = {
    "summary": "remember the house style",
    "edits": [{"action": "create", "kind": "memory", "title": "house style", "content": "short"}],
}


@pytest.fixture
def prime_agent_config(tmp_path: Path) -> dict[str, Any]:
    return {"harness_dir": str(tmp_path / "global-harness")}


async def command(
    jp_fetch: Any, session_id: str, name: str, args: str | None = None
) -> tuple[int, Any]:
    body = {} if args is None else {"args": args}
    return await call(jp_fetch, "POST", "sessions", session_id, "commands", name, body=body)


async def test_every_declared_form_runs_through_the_rest_route(
    host: Any, jp_fetch: Any, make_notebook: Any, tmp_path: Path
) -> None:
    declared = {(c.name, f.keyword) for c in COMMANDS for f in c.forms}
    assert set(EXAMPLES) == declared, "every declared form needs an example here"
    script = tmp_path / "script.json"
    side = {"refine": [{"text": json.dumps(PROPOSAL)}]}
    held = tmp_path / "release-goal-turn"  # the turn /goal starts holds in a cell meanwhile
    turns = [{"text": "ok"}, {"code": wait_for_file(held)}]
    script.write_text(json.dumps({"turns": turns, "side": side}), encoding="utf-8")
    use_script(host, str(script))
    agent = await host.attach(make_notebook("commands.ipynb"))
    await run_turn(host, agent.session_id, "hello")

    replies: dict[tuple[str, str | None], Any] = {}
    for (name, keyword), example in EXAMPLES.items():
        if keyword == "rollback":
            await asyncio.wait_for(_refinement_recorded(host, agent.session_id), 30)
            refinements = await host.refinements(agent.session_id)
            example = example.format(refinement=refinements["refinements"][-1]["id"])
        code, reply = await command(jp_fetch, agent.session_id, name, example)
        assert code == 200, (name, keyword, reply)
        form = BY_NAME[name]._form(keyword)
        assert form is not None
        assert (reply["command"], reply["form"], reply["view"]) == (name, keyword, form.view)
        replies[name, keyword] = reply

    helped = replies["help", None]["answer"]["commands"]
    assert [c["name"] for c in helped] == [c.name for c in COMMANDS]
    assert replies["tree", None]["answer"]["session_id"] == agent.session_id
    assert replies["fork", None]["answer"]["text"] == "hello"
    assert replies["clone", None]["answer"]["notebook_path"].endswith(".ipynb")
    assert replies["refine", None]["answer"]["text"].startswith("/refine --global: ")
    assert replies["refine", "rollback"]["answer"]["text"].startswith("Rollback of ref")
    assert replies["usage", None]["answer"]["session_id"] == agent.session_id
    assert replies["context", None]["answer"]["parts"][0]["part"] == "base prompt"
    assert replies["model", None]["answer"]["current"] == "scripted/script.json"
    assert replies["heartbeat", None]["answer"]["text"].startswith("Heartbeat hb_")
    assert "every 10m, follow-up" in replies["heartbeat", "status"]["answer"]["text"]
    assert "stopped" in replies["heartbeat", "stop"]["answer"]["text"]
    goal = {k: reply["answer"]["text"] for (name, k), reply in replies.items() if name == "goal"}
    assert goal[None].startswith("Goal active: write a haiku · Budget: ")
    assert goal[None].endswith("The agent starts on it.")
    assert goal["status"].startswith("Goal active: write a haiku")
    assert goal["pause"].startswith("Goal paused (paused by the user): write a haiku")
    assert goal["resume"].startswith("Goal active: write a haiku")
    assert goal["clear"] == "Goal cleared."
    held.touch()
    await asyncio.wait_for(_idle(agent), 60)
    assert host.runtime.goals.current(agent.session_id) is None
    assert [e["change"] for e in agent.session.path() if e["type"] == "goal"] == [
        "created",
        "paused",
        "resumed",
        "cleared",
    ]


async def _idle(agent: Any) -> None:
    while agent.running:
        await asyncio.sleep(0.05)


async def _refinement_recorded(host: Any, session_id: str) -> None:
    while not (await host.refinements(session_id))["refinements"]:
        await asyncio.sleep(0.05)


async def test_a_bad_form_an_unknown_command_or_session_answers_clearly(
    host: Any, jp_fetch: Any, make_notebook: Any, tmp_path: Path
) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [{"text": "ok"}]}), encoding="utf-8")
    use_script(host, str(script))
    agent = await host.attach(make_notebook("bad-commands.ipynb"))

    code, reply = await command(jp_fetch, agent.session_id, "refine", "rollback")
    assert code == 400 and reply["message"].startswith("Which refinement?")
    code, reply = await command(jp_fetch, agent.session_id, "refine", "rollback ref_nope")
    assert code == 404 and "ref_nope" in reply["message"]
    code, reply = await command(jp_fetch, agent.session_id, "fork")
    assert (code, reply["message"]) == (
        409,
        "Nothing to fork from: this branch has no message yet.",
    )
    code, reply = await command(jp_fetch, agent.session_id, "summon")
    assert (code, reply["message"]) == (404, "no chat command /summon; /help lists them")
    code, reply = await command(jp_fetch, "nosuchsession", "usage")
    assert code == 404 and "nosuchsession" in reply["message"]
    code, reply = await call(
        jp_fetch, "POST", "sessions", agent.session_id, "commands", "tree", body={"args": 3}
    )
    assert (code, reply["message"]) == (400, "args must be a string, not a number")
    too_long = "x" * (host.settings.max_message_chars + 1)
    code, reply = await command(jp_fetch, agent.session_id, "refine", too_long)
    assert code == 413 and "max_message_chars" in reply["message"], reply
    assert not list(agent.session.directory.rglob("refinements.jsonl"))  # nothing planned
    code, reply = await command(jp_fetch, agent.session_id, "goal", "--budget lots do it")
    assert (code, reply["message"]) == (
        400,
        "--budget takes a whole number, not 'lots'. Usage: /goal [--budget N] [objective]",
    )
    for budget in ("0", "-5"):  # the chat names its own option, not the Python API's argument
        code, reply = await command(jp_fetch, agent.session_id, "goal", f"--budget {budget} x")
        assert (code, reply["message"]) == (400, "--budget must be a positive whole number")
    code, reply = await command(jp_fetch, agent.session_id, "goal", "pause")
    assert (code, reply["message"]) == (409, "there is no goal to pause in this session")


async def test_usage_through_the_rest_route_gives_own_and_total_per_agent_of_the_tree(
    host: Any, jp_fetch: Any, make_notebook: Any, tmp_path: Path
) -> None:
    spawn = 'a = await rlm("alpha words", name="alpha")'
    script = tmp_path / "tree-script.json"
    turns = [{"code": spawn}, {"code": WAIT_FOR_CHILDREN}, {"text": "{last_output_line}"}]
    script.write_text(json.dumps({"turns": turns, "child": CHILD}), encoding="utf-8")
    use_script(host, str(script))
    parent = await host.attach(make_notebook("work/usage.ipynb"))
    await run_turn(host, parent.session_id, "fan out")

    code, reply = await command(jp_fetch, parent.session_id, "usage")

    assert code == 200 and reply["view"] == "usage"
    root = reply["answer"]
    (child,) = root["children"]
    (listed,) = host.runtime.list_children(parent.session_id)
    assert (child["name"], child["status"], child["session_id"]) == (
        "alpha",
        "completed",
        listed["rlm_child_id"],
    )
    assert child["usage"] == listed["usage"] and child["usage_total"] == listed["usage_total"]
    assert child["calls"] == 2 and child["children"] == []
    assert root["name"] == "" and root["model"] == "scripted/tree-script.json"
    assert root["calls"] == 3 and root["status"] == "idle"
    for key, value in root["usage"].items():
        assert root["usage_total"][key] == value + child["usage_total"].get(key, 0)
    assert root["usage_total"] == host.runtime.tree_usage(parent.session_id)
    # The scripted provider plays a script: its calls are known to cost nothing.
    assert (root["cost"], root["cost_total"], child["cost"]) == (0.0, 0.0, 0.0)


def test_heartbeat_takes_its_schedule_as_text_and_its_keywords_alone() -> None:
    assert parsed("heartbeat", "every 5m --follow-up look") == (
        None,
        {"steer": False, "follow-up": False, "schedule": "every 5m --follow-up look"},
    )
    assert parsed("heartbeat", "--follow-up every 10s look") == (
        None,
        {"steer": False, "follow-up": True, "schedule": "every 10s look"},
    )
    for keyword in ("pause", "resume", "stop", "status"):
        assert parsed("heartbeat", keyword) == (keyword, {})
    assert parsed("heartbeat", "stop the run when the loss explodes")[0] is None
