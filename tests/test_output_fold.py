"""The one fold of a cell's output events (core/output_fold.py), without a kernel.

The comparison with nbclient on real kernels is tests/test_cell_outputs.py; these pin the rules
and check that the changes a writer replays onto a document give exactly the folded outputs.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prime_agent_lab.adapters.file_notebook import FileNotebook
from prime_agent_lab.adapters.output_cap import NotebookOutputCap
from prime_agent_lab.core.agent import Agent
from prime_agent_lab.core.messages import ModelResponse
from prime_agent_lab.core.output_fold import (
    Appended,
    Change,
    Cleared,
    OutputFold,
    Replaced,
    StreamExtended,
)
from prime_agent_lab.core.ports import CellState, ExecutionResult, OutputEvent
from prime_agent_lab.core.redaction import Redactor
from prime_agent_lab.core.sessions import SessionRepository
from prime_agent_lab.core.settings import Settings

from .test_core import EchoKernel, ListProvider, call


def stream(text: str, name: str = "stdout") -> OutputEvent:
    return OutputEvent("output", output={"output_type": "stream", "name": name, "text": text})


def display(text: str, display_id: str | None = None) -> OutputEvent:
    output = {"output_type": "display_data", "data": {"text/plain": text}, "metadata": {}}
    return OutputEvent("output", output=output, display_id=display_id)


def update(text: str, display_id: str) -> OutputEvent:
    output = {"output_type": "display_data", "data": {"text/plain": text}, "metadata": {}}
    return OutputEvent("update_display", output=output, display_id=display_id)


def fold_of(*events: OutputEvent) -> OutputFold:
    fold = OutputFold()
    for event in events:
        fold.apply(event)
    return fold


def texts(fold: OutputFold) -> list[str]:
    return [o.get("text") or o["data"]["text/plain"] for o in fold.outputs()]


def test_consecutive_text_of_one_stream_is_one_output_and_keeps_carriage_returns() -> None:
    fold = fold_of(stream("\r 10%"), stream("\r100%"), stream("oops", "stderr"), stream("\n"))
    assert fold.outputs() == [
        {"output_type": "stream", "name": "stdout", "text": "\r 10%\r100%"},
        {"output_type": "stream", "name": "stderr", "text": "oops"},
        {"output_type": "stream", "name": "stdout", "text": "\n"},
    ]


def test_a_clear_with_wait_and_nothing_after_it_leaves_the_output() -> None:
    assert texts(fold_of(stream("kept"), OutputEvent("clear", wait=True))) == ["kept"]


def test_a_clear_with_wait_happens_when_the_next_output_arrives() -> None:
    fold = fold_of(stream("old"), OutputEvent("clear", wait=True), stream("new"))
    assert texts(fold) == ["new"]


def test_a_display_update_or_a_harness_note_is_not_the_output_a_waiting_clear_waits_for() -> None:
    fold = fold_of(
        display("a", "d1"),
        OutputEvent("clear", wait=True),
        update("b", "d1"),
        OutputEvent("note", output=stream("[n]", "stderr").output),
    )
    assert texts(fold) == ["b", "[n]"]
    fold.apply(stream("next"))
    assert texts(fold) == ["next"]


def test_a_clear_without_wait_clears_at_once_and_forgets_display_ids() -> None:
    fold = fold_of(display("a", "d1"), OutputEvent("clear"), update("b", "d1"))
    assert fold.outputs() == []
    fold.apply(display("c", "d1"))
    assert texts(fold) == ["c"]


def test_an_update_replaces_every_output_with_the_id_and_keeps_its_type() -> None:
    result = {
        "output_type": "execute_result",
        "data": {"text/plain": "1"},
        "metadata": {},
        "execution_count": 3,
    }
    fold = fold_of(
        OutputEvent("output", output=result, display_id="d"),
        display("2", "d"),
        display("other", "e"),
        update("new", "d"),
    )
    assert texts(fold) == ["new", "new", "other"]
    assert fold.outputs()[0]["output_type"] == "execute_result"
    assert fold.outputs()[0]["execution_count"] == 3


def test_a_second_display_with_a_known_id_updates_the_first() -> None:
    assert texts(fold_of(display("one", "d"), display("two", "d"))) == ["two", "two"]


def test_an_update_of_an_unknown_id_changes_nothing() -> None:
    fold = fold_of(display("a", "d1"))
    assert fold.apply(update("b", "elsewhere")) == []
    assert texts(fold) == ["a"]


def test_the_notebook_cap_cuts_stream_text_but_a_waiting_clear_still_happens() -> None:
    fold = OutputFold(admit_stream=NotebookOutputCap(5).admit)
    fold.apply(stream("abc"))
    fold.apply(OutputEvent("clear", wait=True))
    fold.apply(stream("defghij"))
    [output] = fold.outputs()
    assert output["text"].startswith("de") and "not stored in the notebook" in output["text"]
    fold.apply(OutputEvent("clear", wait=True))
    fold.apply(stream("more"))
    assert fold.outputs() == []


def test_finish_gives_the_execution_count_to_the_result() -> None:
    result = {"output_type": "execute_result", "data": {"text/plain": "1"}, "metadata": {}}
    fold = fold_of(OutputEvent("output", output=result))
    fold.finish(7)
    assert fold.outputs()[0]["execution_count"] == 7


def test_outputs_are_copies_the_caller_may_change() -> None:
    fold = fold_of(display("a", "d"))
    fold.outputs()[0]["data"] = {}
    assert texts(fold) == ["a"]


def replay(changes: list[Change], document: list[dict[str, Any]]) -> None:
    """What a writer does with the changes (the live notebook does it to the Y document)."""
    for change in changes:
        if isinstance(change, Cleared):
            document.clear()
        elif isinstance(change, Appended):
            document.append(dict(change.output))
        elif isinstance(change, StreamExtended):
            assert change.index == len(document) - 1
            assert document[change.index]["name"] == change.name
            document[change.index]["text"] += change.text
        elif isinstance(change, Replaced):
            document[change.index] = dict(change.output)


def test_replaying_the_changes_of_any_event_sequence_gives_the_folded_outputs() -> None:
    rng = random.Random(16)
    makers = [
        lambda: stream(rng.choice(["a", "b\n", "\rc"]), rng.choice(["stdout", "stderr"])),
        lambda: display(str(rng.random()), rng.choice([None, "d1", "d2"])),
        lambda: update(str(rng.random()), rng.choice(["d1", "d2", "d3"])),
        lambda: OutputEvent("clear", wait=rng.random() < 0.5),
        lambda: OutputEvent("note", output=stream("!", "stderr").output),
    ]
    for _ in range(300):
        fold = OutputFold()
        document: list[dict[str, Any]] = []
        for _ in range(rng.randint(1, 25)):
            replay(fold.apply(rng.choice(makers)()), document)
            assert document == fold.outputs()
        replay(fold.reset(), document)
        assert document == [] == fold.outputs()


class ClearingKernel(EchoKernel):
    """Prints text ending in what could start a key, clears with wait, prints again; its result
    is folded as the kernel executor folds it."""

    async def execute(
        self,
        code: str,
        on_event: Callable[[OutputEvent], None],
        timeout: float,
        on_state: Callable[[CellState], None] | None = None,
    ) -> ExecutionResult:
        fold = OutputFold()
        for event in (stream("progress s"), OutputEvent("clear", wait=True), stream("new\n")):
            fold.apply(event)
            on_event(event)
        return ExecutionResult("ok", 1, fold.outputs())


def test_text_the_redactor_holds_back_is_written_before_a_clear_as_the_kernel_sent_it(
    tmp_path: Path,
) -> None:
    provider = ListProvider([ModelResponse(tool_calls=[call("go()")]), ModelResponse(text="ok")])
    session = SessionRepository(tmp_path).create(notebook_path="a.ipynb", provider="l", model="m")
    notebook = FileNotebook(tmp_path / "a.ipynb", output_cap=1000)
    agent = Agent(session, provider, notebook, ClearingKernel(), Settings())
    agent.redactor = Redactor(["sk-test-0123456789abcdef"])  # "progress s" may end in a key

    asyncio.run(agent.run_turn("go"))
    notebook.flush()

    written = json.loads((tmp_path / "a.ipynb").read_text())["cells"][0]["outputs"]
    assert written == [{"output_type": "stream", "name": "stdout", "text": "new\n"}]
    assert provider.requests[1].messages[-1].text == "[stdout]\nnew"


class RestartedKernel(EchoKernel):
    """A cell that cleared with wait and then ignored the interrupt: the kernel was restarted."""

    NOTE = "[stopped] This cell ignored the interrupt, so the kernel was restarted."

    async def execute(
        self,
        code: str,
        on_event: Callable[[OutputEvent], None],
        timeout: float,
        on_state: Callable[[CellState], None] | None = None,
    ) -> ExecutionResult:
        fold = OutputFold()
        for event in (stream("step 41\n"), OutputEvent("clear", wait=True)):
            fold.apply(event)
            on_event(event)
        return ExecutionResult("interrupted", None, fold.outputs(), self.NOTE, restarted="agent")


def test_the_harness_note_of_a_restart_does_not_clear_what_the_model_saw(tmp_path: Path) -> None:
    provider = ListProvider([ModelResponse(tool_calls=[call("loop()")]), ModelResponse(text="ok")])
    session = SessionRepository(tmp_path).create(notebook_path="a.ipynb", provider="l", model="m")
    notebook = FileNotebook(tmp_path / "a.ipynb", output_cap=1000)
    agent = Agent(session, provider, notebook, RestartedKernel(), Settings())

    asyncio.run(agent.run_turn("go"))
    notebook.flush()

    written = json.loads((tmp_path / "a.ipynb").read_text())["cells"][0]["outputs"]
    assert [o["text"] for o in written] == ["step 41\n", f"[Prime Agent] {RestartedKernel.NOTE}\n"]
    assert "[stdout]\nstep 41" in provider.requests[1].messages[-1].text
