"""Fast unit tests of the core: session tree, observation shaping, the loop on in-memory ports."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from prime_agent_lab.core.agent import Agent
from prime_agent_lab.core.events import EventBus
from prime_agent_lab.core.messages import Message, ModelRequest, ModelResponse, ToolCall
from prime_agent_lab.core.observation import (
    build_observation,
    cap_text,
    collapse_carriage_returns,
    strip_ansi,
)
from prime_agent_lab.core.ports import (
    CellState,
    ExecutionResult,
    OutputEvent,
    ProviderError,
    ResponseDone,
    TextDelta,
)
from prime_agent_lab.core.prompts import BASE_SYSTEM_PROMPT
from prime_agent_lab.core.redaction import Redactor
from prime_agent_lab.core.sessions import SessionError, SessionLog, SessionRepository
from prime_agent_lab.core.settings import Settings

# ------------------------------------------------------------------ sessions


def test_session_log_is_a_tree_with_a_movable_leaf(tmp_path: Path) -> None:
    repo = SessionRepository(tmp_path)
    log = repo.create(notebook_path="a.ipynb", provider="scripted", model="demo")
    first = log.append("user_message", text="one", turn=1)
    ended = log.append("turn_end", turn=1, stop_reason="end_turn", final_text="")
    second = log.append("user_message", text="two", turn=2)
    log.move_leaf(first["id"])
    branch = log.append("user_message", text="two, differently", turn=2)

    reloaded = repo.load(log.session_id)
    assert [e["text"] for e in reloaded.path() if e["type"] == "user_message"] == [
        "one",
        "two, differently",
    ]
    assert reloaded.by_id[second["id"]]["parent_id"] == ended["id"]  # the old branch is kept
    assert branch["parent_id"] == first["id"]
    assert len(reloaded.entries) == 4  # nothing was rewritten or dropped


def test_a_torn_last_line_from_a_crash_is_ignored_and_later_appends_stay_readable(
    tmp_path: Path,
) -> None:
    log = SessionRepository(tmp_path).create(notebook_path="a.ipynb")
    log.append("user_message", text="kept", turn=1)
    with log.file.open("a") as f:
        f.write('{"id": "abc", "type": "assis')
    reloaded = SessionLog.load(log.directory)
    assert [e["text"] for e in reloaded.entries] == ["kept"]
    assert reloaded.skipped_lines == [3]
    reloaded.close_interrupted_turn()
    again = SessionLog.load(log.directory)
    assert [e["type"] for e in again.entries] == ["user_message", "turn_end"]


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85", "\r", "\x1c"])
def test_text_with_unicode_line_separators_survives_a_reload(
    tmp_path: Path, separator: str
) -> None:
    log = SessionRepository(tmp_path).create(notebook_path="a.ipynb")
    text = f"before{separator}after"
    log.append("tool_result", tool_call_id="c", observation=text, turn=1)
    log.append("user_message", text="next", turn=2)
    reloaded = SessionLog.load(log.directory)
    assert reloaded.entries[0]["observation"] == text
    assert reloaded.skipped_lines == []


def test_a_turn_cut_by_a_crash_is_marked_interrupted_not_replayed(tmp_path: Path) -> None:
    log = SessionRepository(tmp_path).create(notebook_path="a.ipynb")
    log.append("user_message", text="work", turn=1)
    reloaded = SessionLog.load(log.directory)
    assert reloaded.close_interrupted_turn() == 1
    assert reloaded.path()[-1]["stop_reason"] == "interrupted"
    assert SessionLog.load(log.directory).close_interrupted_turn() is None


def test_context_gives_every_tool_call_exactly_one_result(tmp_path: Path) -> None:
    log = SessionRepository(tmp_path).create(notebook_path="a.ipynb")
    log.append("user_message", text="go", turn=1)
    calls = [
        {"id": "c1", "name": "python", "arguments": "{}"},
        {"id": "c2", "name": "python", "arguments": "{}"},
    ]
    log.append("assistant_message", text="", tool_calls=calls, turn=1)
    log.append("tool_result", tool_call_id="c1", observation="one", turn=1)
    messages = log.context_messages()
    tool_ids = [m.tool_call_id for m in messages if m.role == "tool"]
    assert tool_ids == ["c1", "c2"]
    assert "not run" in messages[-1].text


@pytest.mark.parametrize("bad", ["../etc", "a/b", "", ".hidden", "x" * 200])
def test_session_ids_with_path_tricks_are_refused(tmp_path: Path, bad: str) -> None:
    with pytest.raises(SessionError):
        SessionRepository(tmp_path).load(bad)


# ------------------------------------------------------------------ observation


def test_cap_keeps_head_and_tail_and_states_the_cut() -> None:
    text = "".join(f"{i:05d}\n" for i in range(10_000))
    capped = cap_text(text, 1000, "rest is elsewhere")
    assert capped.startswith("00000\n") and capped.endswith("09999\n")
    assert f"of {len(text):,} characters cut here (cap 1,000); rest is elsewhere" in capped
    assert len(capped) < 1200


def test_ansi_codes_are_stripped_and_progress_bars_collapse() -> None:
    assert strip_ansi("\x1b[0;31mError\x1b[0m: x") == "Error: x"
    assert collapse_carriage_returns("10%\r50%\r100%\ndone\n") == "100%\ndone\n"


def _result(*outputs: dict[str, Any], status: str = "ok") -> ExecutionResult:
    return ExecutionResult(status=status, execution_count=1, outputs=list(outputs))  # type: ignore[arg-type]


def test_observation_orders_stdout_stderr_result_error() -> None:
    result = _result(
        {"output_type": "execute_result", "data": {"text/plain": "42"}},
        {"output_type": "stream", "name": "stderr", "text": "warn\n"},
        {
            "output_type": "error",
            "ename": "E",
            "evalue": "v",
            "traceback": ["\x1b[31mTraceback\x1b[0m", "E: v"],
        },
        {"output_type": "stream", "name": "stdout", "text": "hello\n"},
        status="error",
    )
    obs = build_observation(result, cap=100, accepts_images=False, where_rest="")
    assert obs.text == "[stdout]\nhello\n[stderr]\nwarn\n[result]\n42\n[error]\nTraceback\nE: v"
    assert obs.preview == "E: v"


def test_images_are_attached_for_image_models_and_described_otherwise() -> None:
    png = {"output_type": "display_data", "data": {"image/png": "iVBOR", "text/plain": "<Figure>"}}
    with_images = build_observation(_result(png), cap=100, accepts_images=True, where_rest="")
    assert with_images.images[0].media_type == "image/png"
    without = build_observation(_result(png), cap=100, accepts_images=False, where_rest="")
    assert not without.images and "image/png image shown in the notebook: <Figure>" in without.text


def test_system_prompt_states_the_output_cap() -> None:
    assert "{output_cap:,}" in BASE_SYSTEM_PROMPT


# ------------------------------------------------------------------ the loop on in-memory ports


class ListProvider:
    name = "list"
    model = "m"

    def __init__(self, steps: list[ModelResponse | ProviderError]) -> None:
        self.steps = steps
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[Any]:
        self.requests.append(request)
        step = self.steps.pop(0)
        if isinstance(step, ProviderError):
            raise step
        if step.text:
            yield TextDelta(step.text)
        yield ResponseDone(step)


class MemoryCell:
    def __init__(self, cell_id: str) -> None:
        self.cell_id = cell_id
        self.events: list[OutputEvent] = []
        self.count: int | None = -1

    def set_running(self) -> None:
        self.count = None

    def apply(self, event: OutputEvent) -> None:
        self.events.append(event)

    def finish(self, execution_count: int | None) -> None:
        self.count = execution_count


class MemoryNotebook:
    path = "mem.ipynb"

    def __init__(self) -> None:
        self.cells: list[tuple[str, dict[str, Any], MemoryCell]] = []

    async def append_code_cell(self, source: str, metadata: dict[str, Any]) -> MemoryCell:
        cell = MemoryCell(f"cell{len(self.cells)}")
        self.cells.append((source, metadata, cell))
        return cell

    async def save(self) -> None:
        pass


class EchoKernel:
    kernel_id = "k"

    def __init__(self, block: asyncio.Event | None = None) -> None:
        self.block = block
        self.count = 0
        self.stopped = False

    async def execute(
        self,
        code: str,
        on_event: Callable[[OutputEvent], None],
        timeout: float,
        on_state: Callable[[CellState], None] | None = None,
    ) -> ExecutionResult:
        if on_state is not None:
            on_state("running")
        if self.block is not None:
            await self.block.wait()
        self.count += 1
        if self.stopped:
            return ExecutionResult("interrupted", self.count, note="[stopped] interrupted")
        output = {"output_type": "stream", "name": "stdout", "text": f"ran {code}\n"}
        on_event(OutputEvent("output", output=output))
        return ExecutionResult("ok", self.count, [output])

    def stop_cell(self, cause: object = None) -> None:
        self.stopped = True
        if self.block is not None:
            self.block.set()


def call(code: str, call_id: str = "c1") -> ToolCall:
    return ToolCall(call_id, "python", json.dumps({"code": code}))


def make_agent(
    tmp_path: Path, provider: ListProvider, kernel: EchoKernel | None = None, **config: Any
) -> tuple[Agent, MemoryNotebook]:
    session = SessionRepository(tmp_path).create(
        notebook_path="mem.ipynb", provider="list", model="m"
    )
    notebook = MemoryNotebook()
    agent = Agent(
        session,
        provider,
        notebook,
        kernel or EchoKernel(),
        Settings(retry_base_delay=0.001, **config),
    )
    return agent, notebook


def test_loop_runs_each_tool_call_as_a_tagged_cell_and_feeds_the_observation_back(
    tmp_path: Path,
) -> None:
    provider = ListProvider([ModelResponse(tool_calls=[call("x = 1")]), ModelResponse(text="done")])
    agent, notebook = make_agent(tmp_path, provider)

    outcome = asyncio.run(agent.run_turn("go"))

    assert (outcome.stop_reason, outcome.final_text) == ("end_turn", "done")
    source, metadata, cell = notebook.cells[0]
    assert source == "x = 1" and cell.count == 1
    assert metadata == {"prime_agent": {"session_id": agent.session_id, "turn": 1, "role": "agent"}}
    second_request = provider.requests[1]
    assert second_request.messages[-1].role == "tool"
    assert second_request.messages[-1].text == "[stdout]\nran x = 1"


def test_retry_after_from_the_provider_is_honoured(tmp_path: Path) -> None:
    provider = ListProvider(
        [
            ProviderError("slow down", kind="rate_limit", retryable=True, retry_after=0.01),
            ModelResponse(text="ok"),
        ]
    )
    agent, _ = make_agent(tmp_path, provider)
    seen: list[dict[str, Any]] = []
    agent.events.add_listener(seen.append)
    outcome = asyncio.run(agent.run_turn("go"))
    assert outcome.final_text == "ok"
    assert [e["delay"] for e in seen if e["type"] == "retry"] == [0.01]


def test_retries_are_bounded(tmp_path: Path) -> None:
    errors = [ProviderError("boom", kind="server", retryable=True) for _ in range(3)]
    agent, _ = make_agent(tmp_path, ListProvider(errors), max_retries=2)
    outcome = asyncio.run(agent.run_turn("go"))
    assert outcome.stop_reason == "error" and "boom" in (outcome.error or "")


def test_stop_interrupts_the_running_cell_and_records_unrun_calls(tmp_path: Path) -> None:
    provider = ListProvider(
        [ModelResponse(tool_calls=[call("slow()", "c1"), call("next()", "c2")])]
    )
    kernel = EchoKernel(block=asyncio.Event())
    agent, _ = make_agent(tmp_path, provider, kernel)

    async def scenario() -> Any:
        _, task = agent.start_turn("go")
        while not any(
            e["type"] == "tool_result" or e["type"] == "assistant_message"
            for e in agent.session.path()
        ):
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        assert await agent.stop()
        return await task

    outcome = asyncio.run(scenario())
    assert outcome.stop_reason == "stopped"
    results = {
        e["tool_call_id"]: e["status"] for e in agent.session.path() if e["type"] == "tool_result"
    }
    assert results == {"c1": "interrupted", "c2": "skipped"}
    assert agent.session.path()[-1]["type"] == "turn_end"


def test_turn_stops_at_the_iteration_limit(tmp_path: Path) -> None:
    provider = ListProvider([ModelResponse(tool_calls=[call(f"s{i}", f"c{i}")]) for i in range(3)])
    agent, notebook = make_agent(tmp_path, provider, max_iterations=3)
    outcome = asyncio.run(agent.run_turn("go"))
    assert outcome.stop_reason == "max_iterations" and len(notebook.cells) == 3


def test_a_second_turn_while_one_runs_is_refused(tmp_path: Path) -> None:
    kernel = EchoKernel(block=asyncio.Event())
    agent, _ = make_agent(tmp_path, ListProvider([ModelResponse(tool_calls=[call("x")])]), kernel)

    async def scenario() -> None:
        agent.start_turn("one")
        await asyncio.sleep(0.05)
        with pytest.raises(Exception, match="already working"):
            agent.start_turn("two")
        await agent.stop()

    asyncio.run(scenario())


class SplitSecretKernel(EchoKernel):
    """Prints a secret in two writes, as `print(k[:5], end=''); print(k[5:])` would."""

    def __init__(self, secret: str) -> None:
        super().__init__()
        self.secret = secret

    async def execute(
        self,
        code: str,
        on_event: Callable[[OutputEvent], None],
        timeout: float,
        on_state: Callable[[CellState], None] | None = None,
    ) -> ExecutionResult:
        chunks = [f"key: {self.secret[:5]}", f"{self.secret[5:]} end\n"]
        outputs = [{"output_type": "stream", "name": "stdout", "text": c} for c in chunks]
        for output in outputs:
            on_event(OutputEvent("output", output=output))
        return ExecutionResult("ok", 1, outputs)


def test_a_key_split_across_two_writes_is_redacted_everywhere(tmp_path: Path) -> None:
    secret = "sk-test-0123456789abcdef"
    provider = ListProvider([ModelResponse(tool_calls=[call("leak()")]), ModelResponse(text="ok")])
    agent, notebook = make_agent(tmp_path, provider, SplitSecretKernel(secret))
    agent.redactor = Redactor([secret])

    asyncio.run(agent.run_turn("go"))

    written = "".join(e.output["text"] for e in notebook.cells[0][2].events if e.output)
    assert written == "key: [redacted] end\n"
    assert secret not in agent.session.file.read_text()
    assert provider.requests[1].messages[-1].text == "[stdout]\nkey: [redacted] end"


def test_session_summaries_follow_appends_and_reuse_unchanged_logs(tmp_path: Path) -> None:
    repo = SessionRepository(tmp_path)
    log = repo.create(notebook_path="a.ipynb", provider="p", model="m")
    assert repo.summaries()[0].turns == 0
    log.append("user_message", text="one", turn=1)
    first = repo.summaries()[0]
    assert first.turns == 1
    assert repo.summaries()[0] is first  # unchanged file: not read again


def test_a_stalled_event_subscriber_is_dropped_instead_of_growing_without_end() -> None:
    async def scenario() -> tuple[bool, int, bool]:
        bus = EventBus("s")
        stalled = bus.subscribe(maxsize=3)
        live = bus.subscribe()
        for i in range(5):
            bus.emit("text_delta", text=str(i))
        return bus.is_subscribed(stalled), stalled.qsize(), bus.is_subscribed(live)

    assert asyncio.run(scenario()) == (False, 3, True)


def test_the_context_is_extended_per_call_and_equals_a_rebuild_after_branches(
    tmp_path: Path,
) -> None:
    log = SessionRepository(tmp_path).create(notebook_path="nb.ipynb", provider="p", model="m")
    seen: list[list[Message]] = []
    anchor = None
    for turn in range(1, 4):
        log.append("user_message", turn=turn, text=f"ask {turn}")
        for step in range(3):
            call = {"id": f"c{turn}{step}", "name": "python", "arguments": '{"code": "1"}'}
            entry = log.append("assistant_message", turn=turn, text="", tool_calls=[call])
            anchor = anchor or entry["id"]
            seen.append(log.context_messages())  # the open call is settled as "not run"
            log.append("tool_result", turn=turn, tool_call_id=call["id"], observation=f"o{step}")
            seen.append(log.context_messages())
        log.append("turn_end", turn=turn, stop_reason="end_turn", final_text="")
        log.append("notice", kind="kernel_restarted_externally", text="restarted")
    assert log.context_messages() == SessionLog.load(log.directory).context_messages()
    assert seen[0][-1].text.startswith("(this call was not run")
    assert len(seen[1]) == 3 and seen[1][-1].text == "o0"

    log.move_leaf(anchor)  # a branch: the context follows the new leaf
    branched = log.context_messages()
    assert branched == SessionLog.load(log.directory).context_messages()
    assert [m.role for m in branched] == ["user", "assistant", "tool"]
    log.append("tool_result", turn=1, tool_call_id="c10", observation="again")
    assert log.context_messages()[-1].text == "again"
