"""The agent loop: user message, model, one notebook cell per tool call, observation, repeat.

One code path serves JupyterLab and the headless CLI; only the ports differ.

Size: over 600 lines because the loop, its stop handling and the recording of each cell are one
state machine (`_stop_requested`, `_in_cell` and the turn task are shared by all three); what
can live outside it does (hooks in the runtime, restore wording in `snapshots.py`, observation,
recovery, compaction).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from .answer_cost import answer_cost
from .compaction import Compactor
from .events import EventBus
from .jsonfile import BadJson, parse_json
from .locked import limit_name
from .messages import PYTHON_TOOL, Message, ModelRequest, ModelResponse, ToolCall
from .narration import ANSWER, USER, narration
from .observation import build_observation
from .permission import (
    AWAITING_NOTE,
    SKIPPED_OBSERVATION,
    Approvals,
    Decision,
    PermissionRefused,
    allowed,
    checked_mode,
    lowest,
    recorded_mode,
)
from .permission_texts import PLAN_NOT_RUN_TEXT, PLAN_OBSERVATION
from .ports import (
    CellState,
    CellWriter,
    ExecutionResult,
    KernelCameBack,
    KernelPort,
    KernelUnavailable,
    ModelProvider,
    NotebookPort,
    NotebookUnavailable,
    OutputEvent,
    ProviderError,
    ResponseDone,
    TextDelta,
)
from .prompts import PromptSettings, build_system_prompt
from .recovery import LOG_NOT_WRITTEN, close_interrupted_turn, record_unfinished_cells
from .redaction import Redactor, StreamRedactor
from .sessions import SessionLog, SessionWriteError
from .settings import Settings
from .stop_cause import USER_STOP, StopCause
from .token_counts import counted, described

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TurnOutcome:
    turn: int
    stop_reason: str  # end_turn | stopped | shutdown | error | max_iterations
    final_text: str
    error: str | None = None


@dataclass(frozen=True)
class InboxMessage:
    """A message that enters a running turn between two model calls (a steer, a reply from a
    child). `text` is what the model reads, sender and compose time included; `fields` go into
    the session entry as they are (message id, sender, ...)."""

    text: str
    fields: dict[str, Any] = field(default_factory=dict)


def _no_messages() -> list[InboxMessage]:
    return []


async def _compacted_context(agent: Agent, turn: int) -> list[Message]:
    """The default `transform_context`: the context compacted first when it is due
    (`core/compaction.py`), then the conversation as the log holds it."""
    await agent.compactor.before_model_call(turn)
    return agent.session.context_messages()


async def _stop_at_answer(agent: Agent, outcome: TurnOutcome) -> bool:
    return False


def _nothing(agent: Agent, outcome: TurnOutcome) -> None:
    return None


def _no_version() -> Any:
    return None


async def _ready(agent: Agent) -> None:
    return None


async def _nothing_restored(agent: Agent, result: ExecutionResult) -> KernelCameBack | None:
    return None


async def _nothing_before_cell(agent: Agent) -> KernelCameBack | None:
    return None


async def _nothing_before_call(agent: Agent, turn: int) -> None:
    return None


@dataclass
class AgentHooks:
    """The loop's named hook points, each a small callable the runtime supplies.

    - `inbox`: messages to take into the running turn, asked between model calls and when the
      model answers without a tool call (a message that came in meanwhile is answered in the
      same turn);
    - `transform_context`: the conversation the next model call reads, after the inbox was
      taken (default: compaction when it is due, then the log's context);
    - `system_prompt`: the system prompt of each model call (None: the base prompt);
    - `prompt_version`: the harness version that prompt was built from, recorded on each
      `assistant_message` (None: not recorded);
    - `should_continue`: after an answer without tool calls and an empty inbox, whether the turn
      goes on (the continue-or-stop policy: goals, autonomous runs, `core/continuation.py`); it
      may wait (for children, a user's cell) and records what the model reads next
      (`Agent.continue_with`); the model-call count of `max_iterations` starts again after it;
    - `turn_ended`: called once the turn's task is done (the agent is no longer running), for
      what comes after a turn (follow-up messages, notices to a parent);
    - `before_turn`: awaited before the turn's message is recorded (a kernel snapshot that is
      due comes back first; its notice reaches the model with that message);
    - `after_restart`: the kernel restarted under an agent cell (`result.restarted`); what came
      back (`KernelCameBack`: a notice and the cell's note) joins the cell's observation;
    - `before_cell`: awaited before each agent cell is sent; a `KernelCameBack` when it
      restored the kernel first (it died while the model was thinking), told with that cell.
    - `before_model_call`: awaited at each turn boundary of a running turn, before the inbox
      and the compaction check (a refinement planned meanwhile is applied there).
    """

    inbox: Callable[[], list[InboxMessage]] = _no_messages
    transform_context: Callable[[Agent, int], Awaitable[list[Message]]] = _compacted_context
    system_prompt: Callable[[], str] | None = None
    prompt_version: Callable[[], Any] = _no_version
    should_continue: Callable[[Agent, TurnOutcome], Awaitable[bool]] = _stop_at_answer
    turn_ended: Callable[[Agent, TurnOutcome], None] = _nothing
    before_turn: Callable[[Agent], Awaitable[None]] = _ready
    after_restart: Callable[[Agent, ExecutionResult], Awaitable[KernelCameBack | None]] = (
        _nothing_restored
    )
    before_cell: Callable[[Agent], Awaitable[KernelCameBack | None]] = _nothing_before_cell
    before_model_call: Callable[[Agent, int], Awaitable[None]] = _nothing_before_call


class TurnInProgress(Exception):
    pass


class _Stopped(Exception):
    """The turn was stopped (`Agent.stop`) at a point where it could end cleanly."""


class ToolArgumentsError(ValueError):
    pass


WAITING_TEXT = "waiting for your cell to finish"


def _not_sent_note(cause: StopCause) -> str:
    return (
        f"[not run] {cause.sentence} while this cell was being written; it was never sent to "
        "the kernel, so nothing in it ran."
    )


def _cancelled_note(cause: StopCause) -> str:
    if cause == USER_STOP:
        return "[stopped] The turn was cancelled; the cell is interrupted as soon as it runs."
    return f"[stopped] {cause.sentence}; the cell is interrupted as soon as it runs."


RESTART_NOTICE_KINDS: dict[str, str] = {
    "agent": "kernel_restarted",
    "died": "kernel_died",
    "external": "kernel_restarted_externally",
}


def _stream(name: str, text: str) -> dict[str, Any]:
    return {"output_type": "stream", "name": name, "text": text}


def _notebook_note(result: ExecutionResult) -> str:
    """A line written into the cell when the harness did something the user must see there."""
    if result.restarted in ("agent", "died") or result.status == "skipped":
        return f"[Prime Agent] {result.note}"
    return ""


def parse_python_call(call: ToolCall) -> str:
    """The `code` of a `python` tool call, or a ToolArgumentsError that explains the problem."""
    if call.name != PYTHON_TOOL.name:
        raise ToolArgumentsError(
            f"unknown tool {call.name!r}: the only tool is `python` with one argument `code`"
        )
    try:
        arguments = parse_json(call.arguments) if call.arguments.strip() else {}
    except BadJson as exc:
        raise ToolArgumentsError(
            f"the tool arguments are not valid JSON: the text {exc.reason}; "
            'send {"code": "<python source>"}'
        ) from None
    if not isinstance(arguments, dict) or not isinstance(arguments.get("code"), str):
        raise ToolArgumentsError('the tool arguments must be an object {"code": "<python source>"}')
    code = arguments["code"]
    if not code.strip():
        raise ToolArgumentsError("the `code` argument is empty")
    return code


class Agent:
    """One agent: a session log, a model, a notebook and the notebook's kernel."""

    def __init__(
        self,
        session: SessionLog,
        provider: ModelProvider,
        notebook: NotebookPort,
        kernel: KernelPort,
        config: Settings,
        events: EventBus | None = None,
        redactor: Redactor | None = None,
        hooks: AgentHooks | None = None,
    ) -> None:
        self.session = session
        self.hooks = hooks or AgentHooks()
        self.redactor = redactor or Redactor.from_environ()
        self.provider = provider
        self._chosen_provider: ModelProvider | None = None  # the user's choice, for the next call
        self._model_calls = 0  # calls under way on `provider`
        self.notebook = notebook
        self.kernel = kernel
        self.config = config
        self.events = events or EventBus(session.session_id)
        self._task: asyncio.Task[TurnOutcome] | None = None
        self._stop_requested = False
        self._stop_cause = USER_STOP  # who asked, once _stop_requested
        self._in_cell = False  # between writing a cell and recording its result
        self.current_cell_id: str | None = None  # the agent cell running now, if any
        self.current_turn: int | None = None  # the turn running now, if any
        self._system = build_system_prompt(
            PromptSettings(output_cap=config.output_cap, cell_timeout_seconds=config.cell_timeout)
        )
        self._record_model_if_changed()
        self.permission = self._start_permission()
        self.compactor = Compactor(self)

    # ------------------------------------------------------------ public surface

    @property
    def session_id(self) -> str:
        return self.session.session_id

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def turn_task(self) -> asyncio.Task[TurnOutcome] | None:
        """The latest turn's task (done or not), or None before the first turn."""
        return self._task

    @property
    def system_prompt(self) -> str:
        """The system prompt the next model call uses."""
        build = self.hooks.system_prompt
        return build() if build is not None else self._system

    def start_turn(
        self, text: str, fields: dict[str, Any] | None = None
    ) -> tuple[int, asyncio.Task[TurnOutcome]]:
        """Begin a turn in the background; its progress arrives as events. `fields` are kept on
        the turn's user message entry (who sent it, when it was written)."""
        if self.running:
            raise TurnInProgress("the agent is already working on a turn; stop it or wait")
        turn = self.session.turns() + 1
        self._task = asyncio.create_task(
            self._run_turn(turn, text, fields or {}), name=f"agent-turn-{turn}"
        )
        self._task.add_done_callback(self._turn_done)
        return turn, self._task

    def _turn_done(self, task: asyncio.Task[TurnOutcome]) -> None:
        if task.cancelled() or task.exception() is not None:
            return
        try:
            self.hooks.turn_ended(self, task.result())
        except Exception:
            log.exception("the turn_ended hook of session %s failed", self.session_id)

    async def run_turn(self, text: str) -> TurnOutcome:
        _, task = self.start_turn(text)
        return await task

    async def stop(self, cause: StopCause = USER_STOP) -> bool:
        """Stop the running turn. True if a turn was running.

        While the model is answering, the turn is cancelled. While a cell is in the kernel, the
        kernel port stops the agent's own cell (withdrawn if it was still waiting for the user's
        cell, interrupted if it runs) and the turn ends once that cell's result is recorded, so
        its output, its execution count and any kernel restart are reported truthfully.
        `cause` (the user, or the server shutting down) gives the turn's `stop_reason` and the
        words of the notes; the first stop of a turn names it.
        """
        task = self._task
        if task is None or task.done():
            return False
        if not self._stop_requested:
            self._stop_cause = cause
        self._stop_requested = True
        if self._in_cell:
            if not self.permission.withdraw():  # a cell waiting for approval ends unrun
                self.kernel.stop_cell(self._stop_cause)
        elif not task.cancelling():  # a second Stop waits for the first
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return True

    def set_provider(self, provider: ModelProvider) -> None:
        self.provider = provider
        self._record_model_if_changed()

    # ------------------------------------------------------------ the user's model choice

    @property
    def chosen_provider(self) -> ModelProvider:
        """The provider the next model call uses."""
        return self._chosen_provider or self.provider

    async def choose_provider(self, provider: ModelProvider) -> None:
        """The user chose another model: recorded now (a `model_change` entry and event), used
        from the next model call. A call under way finishes on the provider it started with,
        which is closed once no call uses it."""
        replaced, self._chosen_provider = self._chosen_provider, provider
        self.session.append("model_change", provider=provider.name, model=provider.model)
        self.events.emit("model_change", provider=provider.name, model=provider.model)
        if replaced is not None:
            await _close_provider(replaced)
        if self._model_calls == 0:
            await self._take_chosen_provider()

    async def close_providers(self) -> None:
        """The agent is going: release its provider and one chosen but not yet used."""
        chosen, self._chosen_provider = self._chosen_provider, None
        if chosen is not None:
            await _close_provider(chosen)
        await _close_provider(self.provider)

    async def _take_chosen_provider(self) -> None:
        chosen, self._chosen_provider = self._chosen_provider, None
        if chosen is not None and chosen is not self.provider:
            replaced, self.provider = self.provider, chosen
            await _close_provider(replaced)

    # ------------------------------------------------------------ the loop

    async def _run_turn(self, turn: int, text: str, fields: dict[str, Any]) -> TurnOutcome:
        await self.hooks.before_turn(self)
        self._stop_requested = False
        self._stop_cause = USER_STOP
        self.current_turn = turn
        unwritten: SessionWriteError | None = None
        try:
            await self._close_unrecorded_turn()
            self.session.append("user_message", text=text, turn=turn, **fields)
        except SessionWriteError as exc:
            unwritten = exc
        self.events.emit("status", status="running")
        self.events.emit("turn_started", turn=turn, text=text, **fields)
        stop_reason, final_text, error = "max_iterations", "", None
        log_failed = False  # a record of this turn could not be written
        try:
            if unwritten is not None:
                raise unwritten
            await self._narrate(turn, USER, narration(USER, text, fields))
            calls = 0  # model calls since the turn began or a continuer kept it going
            while calls < self.config.max_iterations:
                calls += 1
                await self.hooks.before_model_call(self, turn)
                self._take_inbox(turn)
                context = await self.hooks.transform_context(self, turn)
                response = await self._call_model(turn, context)
                if not response.tool_calls:
                    if self._take_inbox(turn):
                        continue
                    if await self.hooks.should_continue(
                        self, TurnOutcome(turn, "end_turn", response.text)
                    ):
                        calls = 0
                        continue
                    stop_reason, final_text = "end_turn", response.text
                    await self._narrate(turn, ANSWER, narration(ANSWER, final_text, {}))
                    break
                for index, call in enumerate(response.tool_calls):
                    try:
                        await self._run_tool_call(turn, call)
                    except asyncio.CancelledError:
                        self._record_skipped(turn, response.tool_calls[index:])
                        raise
                    if self._stop_requested:
                        self._record_skipped(turn, response.tool_calls[index + 1 :])
                        raise _Stopped
                if self._stop_requested:
                    raise _Stopped
        except (asyncio.CancelledError, _Stopped):
            stop_reason = self._stop_cause.reason
            if self._stop_cause != USER_STOP:  # the turn was cut, not ended by choice
                error = self._stop_cause.sentence
        except SessionWriteError as exc:
            stop_reason, error, log_failed = "error", str(exc), True
            message = f"the turn was stopped: {exc}"
            if unwritten is None:
                self._record_error(turn, message, "disk")
            else:  # no entry for a turn whose message is not in the log
                self.events.emit("error", turn=turn, message=message, kind="disk")
        except KernelUnavailable as exc:
            stop_reason, error = "error", str(exc)
            self._record_error(turn, f"kernel unavailable: {exc}", "kernel")
        except NotebookUnavailable as exc:
            stop_reason, error = "error", str(exc)
            self._record_error(turn, f"notebook unavailable: {exc}", "notebook")
        except ProviderError as exc:
            stop_reason, error = "error", str(exc)
            self._record_error(turn, f"model call failed ({exc.kind}): {exc}", "provider")
        except Exception as exc:
            log.exception("agent turn %s failed", turn)
            stop_reason, error = "error", f"{type(exc).__name__}: {exc}"
            self._record_error(turn, f"internal error: {error}", "internal")
        if stop_reason == "max_iterations":
            final_text = (
                f"Stopped after {self.config.max_iterations} model calls in one turn "
                f"({self.config.spell('max_iterations')})."
            )
        self.current_turn = None
        try:
            await self._write_turn_end(turn, stop_reason, final_text, log_failed)
        except SessionWriteError as exc:  # left open: the next turn or a restart closes it
            if not log_failed:
                stop_reason, error = "error", f"{error}; {exc}" if error else str(exc)
                self.events.emit("error", turn=turn, message=str(exc), kind="disk")
        self.events.emit("turn_ended", turn=turn, stop_reason=stop_reason, final_text=final_text)
        self.events.emit("status", status="idle")
        return TurnOutcome(turn, stop_reason, final_text, error)

    def _take_inbox(self, turn: int) -> bool:
        """Record the messages waiting for this turn; the next model call reads them."""
        messages = self.hooks.inbox()
        for message in messages:
            self.session.append("agent_message", turn=turn, text=message.text, **message.fields)
            self.events.emit("agent_message", turn=turn, text=message.text, **message.fields)
        return bool(messages)

    async def _call_model(self, turn: int, context: list[Message]) -> ModelResponse:
        system = self.system_prompt
        harness = self.hooks.prompt_version()
        request = ModelRequest(
            system=system,
            messages=context,
            tools=[PYTHON_TOOL],
            max_tokens=self.config.max_tokens,
            accepts_images=self.config.accepts_images,
        )
        response = await self._with_retries(turn, request, show_text=True)
        usage, recorded = self._usage(response)
        self.session.append(
            "assistant_message",
            turn=turn,
            text=response.text,
            tool_calls=[
                {"id": c.id, "name": c.name, "arguments": c.arguments} for c in response.tool_calls
            ],
            usage=recorded,
            provider=self.provider.name,
            model=response.model or self.provider.model,
            stop_reason=response.stop_reason,
            **({"harness": harness} if harness is not None else {}),
        )
        self.events.emit(
            "assistant_message",
            turn=turn,
            text=response.text,
            tool_calls=len(response.tool_calls),
            usage=usage,
            **answer_cost(self.provider.name, response.model or self.provider.model, recorded),
        )
        return response

    def _usage(self, response: ModelResponse) -> tuple[dict[str, int], dict[str, int | None]]:
        """The call's token figures, and the usage as recorded: a figure the provider reported
        that is not a token count (NaN, out of range: core/token_counts.py) is null there, so
        the log loads back and the call's cost stays unknown."""
        reported = response.usage.as_dict()
        usage, ignored = counted(reported)
        if ignored:
            log.warning(
                "session %s: %s reported usage figures that are not token counts: %s",
                self.session_id,
                self.provider.name,
                described(ignored, reported),
            )
        return usage, {key: usage.get(key) for key in reported}

    async def side_call(self, turn: int, request: ModelRequest) -> ModelResponse:
        """A model call of the harness itself (a compaction summary, a kernel clean-up plan) on
        this agent's provider, with the loop's retries; its text is not streamed to the chat."""
        return await self._with_retries(turn, request, show_text=False)

    async def _with_retries(
        self, turn: int, request: ModelRequest, show_text: bool
    ) -> ModelResponse:
        attempt = 0
        while True:
            try:
                return await self._stream_once(turn, request, show_text)
            except ProviderError as exc:
                if not exc.retryable or attempt >= self.config.max_retries:
                    raise
                delay = self.retry_delay(exc, attempt)
                attempt += 1
                self.events.emit(
                    "retry", turn=turn, attempt=attempt, delay=delay, message=f"{exc.kind}: {exc}"
                )
                await asyncio.sleep(delay)

    def retry_delay(self, exc: ProviderError, attempt: int) -> float:
        """The server's Retry-After wins (retrying sooner only earns another refusal); without one,
        exponential backoff capped at retry_max_delay. A Retry-After longer than max_retry_after
        ends the turn with the error rather than holding it silently."""
        if exc.retry_after is None:
            return min(self.config.retry_base_delay * 2**attempt, self.config.retry_max_delay)
        if exc.retry_after > self.config.max_retry_after:
            raise ProviderError(
                f"{exc} (the server asks to retry after {exc.retry_after:g} s, longer than "
                f"{self.config.spell('max_retry_after')} = {self.config.max_retry_after:g} s)",
                kind=exc.kind,
                status=exc.status,
            ) from exc
        return exc.retry_after

    async def _stream_once(
        self, turn: int, request: ModelRequest, show_text: bool
    ) -> ModelResponse:
        response: ModelResponse | None = None
        if self._model_calls == 0:
            await self._take_chosen_provider()
        self._model_calls += 1
        try:
            async for event in self.provider.stream(request):
                if isinstance(event, TextDelta):
                    if event.text and show_text:
                        self.events.emit("text_delta", turn=turn, text=event.text)
                elif isinstance(event, ResponseDone):
                    response = event.response
        except ProviderError as exc:
            if exc.setting is None:
                raise
            raise exc.naming(self.config.spell(exc.setting)) from exc
        finally:
            self._model_calls -= 1
        if response is None:
            raise ProviderError("the model stream ended without a response", kind="protocol")
        return response

    async def _run_tool_call(self, turn: int, call: ToolCall) -> None:
        try:
            code = parse_python_call(call)
        except ToolArgumentsError as exc:
            message = f"Tool call rejected: {exc}. Nothing was run."
            self.session.append(
                "tool_result",
                turn=turn,
                tool_call_id=call.id,
                cell_id=None,
                status="invalid_arguments",
                execution_count=None,
                observation=message,
            )
            self.events.emit("error", turn=turn, message=message, kind="tool_arguments")
            return

        if self._stop_requested:
            self._record_skipped(turn, [call])
            return
        if self.permission.mode == "plan":
            self._record_not_run(turn, call, None, PLAN_OBSERVATION)
            self.events.emit(
                "notice", turn=turn, kind="plan_not_run", text=PLAN_NOT_RUN_TEXT, code=code
            )
            return
        self._in_cell = True
        try:
            if self.permission.mode == "ask":
                await self._run_when_approved(turn, call, code)
            else:
                await self._run_cell(turn, call, code)
        finally:
            self._in_cell = False
            self.current_cell_id = None

    async def _run_cell(
        self,
        turn: int,
        call: ToolCall,
        code: str,
        written: CellWriter | None = None,
        told: str = "",
    ) -> None:
        """Run `code` in a new agent cell, or in `written` (an approved cell already in the
        notebook). `told` goes before the cell's note (what the user did to it)."""
        if written is None:
            cell = await self.notebook.append_code_cell(code, self._cell_metadata(turn))
            self.current_cell_id = cell.cell_id
            self.events.emit("cell_started", turn=turn, cell_id=cell.cell_id, code=code)
        else:
            cell = written
        self._record_cell_started(turn, call, cell.cell_id)
        cell.set_running()

        streams = StreamRedactor(self.redactor)

        def write(event: OutputEvent) -> None:
            output = event.output
            if output is not None and output.get("output_type") == "stream":
                text = streams.feed(str(output.get("name")), str(output.get("text", "")))
                if not text:
                    return
                event = replace(event, output={**output, "text": text})
            elif output is not None and self.redactor:
                event = replace(event, output=self.redactor.output(output))
            elif event.kind == "clear":  # text held back came before the clear
                for name, text in streams.flush():
                    cell.apply(OutputEvent("output", output=_stream(name, text)))
            cell.apply(event)

        def on_state(state: CellState) -> None:
            if state == "waiting":
                self.events.emit("cell_waiting", turn=turn, cell_id=cell.cell_id, text=WAITING_TEXT)
            else:
                self.events.emit("cell_running", turn=turn, cell_id=cell.cell_id)

        async def close_cell(execution_count: int | None, note: str = "") -> None:
            for name, text in streams.flush():
                cell.apply(OutputEvent("output", output=_stream(name, text)))
            if note:  # what the harness did, visible in the notebook itself
                cell.apply(OutputEvent("note", output=_stream("stderr", f"{note}\n")))
            cell.finish(execution_count)
            try:
                await self.notebook.save()
            except Exception:  # the cell is in the document; the room retries saving on its own
                log.warning("saving notebook %s failed", self.notebook.path, exc_info=True)

        came_back: KernelCameBack | None = None
        try:
            if self._stop_requested:  # Stop arrived while the cell was being written
                result = ExecutionResult(status="skipped", note=_not_sent_note(self._stop_cause))
            else:
                came_back = await self.hooks.before_cell(self)
                result = await self.kernel.execute(code, write, self.config.cell_timeout, on_state)
        except asyncio.CancelledError:
            await close_cell(None)
            stopped = ExecutionResult(status="interrupted", note=_cancelled_note(self._stop_cause))
            self._record_result(turn, call, cell.cell_id, stopped)
            raise
        except KernelUnavailable as exc:
            await close_cell(None)
            gone = ExecutionResult(status="died", note=f"[kernel unavailable] {exc}.")
            self._record_result(turn, call, cell.cell_id, gone)
            raise
        except Exception as exc:
            log.exception("running agent cell %s failed", cell.cell_id)
            await close_cell(None)
            failed = ExecutionResult(
                status="error",
                note=f"[harness error] The cell could not be run or observed: "
                f"{type(exc).__name__}: {exc}. It may or may not have run in the kernel.",
            )
            self._record_result(turn, call, cell.cell_id, failed)
            self._record_error(turn, failed.note, "kernel")
            return
        if came_back is not None:
            result.note = "\n".join(n for n in (came_back.note, result.note) if n)
            self.notice(*came_back.notice, turn=turn)
        restored = None
        if result.restarted is not None:
            restored = await self.hooks.after_restart(self, result)
        if restored is not None and restored.note is not None:
            result.note = restored.note
        await close_cell(result.execution_count, _notebook_note(result))
        restart_note = result.note
        if restored is not None:
            kind, text = restored.notice
            result.note = f"{result.note}\n[{kind}] {text}"
        self._record_result(turn, call, cell.cell_id, result, told)
        if result.restarted is not None:
            self.notice(RESTART_NOTICE_KINDS[result.restarted], restart_note, turn=turn)
        if restored is not None:
            self.notice(*restored.notice, turn=turn)
        if result.notice is not None:
            self.notice(*result.notice, turn=turn)

    # ------------------------------------------------------------ permission modes

    def _start_permission(self) -> Approvals:
        """The session's recorded mode (else the `permission` setting), held to the cap; a mode
        the cap lowered, or a first mode other than auto, is recorded."""
        cap = checked_mode(self.config.max_permission)
        recorded = recorded_mode(self.session)
        mode = lowest(recorded or checked_mode(self.config.permission), cap)
        if mode != (recorded or "auto"):
            self.session.append("permission_change", mode=mode)
        return Approvals(mode, cap)

    def set_permission(self, value: object) -> None:
        """The user's choice of mode (400 unknown, 403 above the cap); takes effect at the next
        cell. Leaving ask mode answers nothing: a waiting cell still waits."""
        mode = checked_mode(value)
        cap = self.permission.cap
        if not allowed(mode, cap):
            raise PermissionRefused(
                403,
                f"permission mode {mode!r} is above this server's limit {cap!r} "
                f"({limit_name(self.config, 'max_permission')}); choose {cap!r} or lower",
            )
        if mode != self.permission.mode:
            self.session.append("permission_change", mode=mode)
            self.permission.mode = mode
        self.events.emit("permission", mode=mode, cap=cap)

    def approve(self, tool_call_id: str, code: object = None) -> None:
        """Run the waiting cell, `code` (a string) instead of its own when given."""
        if code is not None and (not isinstance(code, str) or not code.strip()):
            raise PermissionRefused(400, "code must be a non-empty string when given")
        self._decide(tool_call_id, Decision("run", code))

    def skip(self, tool_call_id: str) -> None:
        self._decide(tool_call_id, Decision("skip"))

    def _decide(self, tool_call_id: str, decision: Decision) -> None:
        if self.permission.decide(tool_call_id, decision):
            return
        known = any(
            c.get("id") == tool_call_id
            for e in self.session.path()
            if e["type"] == "assistant_message"
            for c in e.get("tool_calls", [])
        )
        if not known:
            raise PermissionRefused(404, f"no tool call {tool_call_id!r} in this session")
        raise PermissionRefused(409, f"the cell of tool call {tool_call_id!r} is not waiting")

    async def _narrate(self, turn: int, part: str, markdown: str | None) -> None:
        """With `narrate_cells` (docs/teaching.md), the turn's message or its final answer as a
        markdown cell (core/narration.py), so the notebook reads on its own. Its role is
        "narration", not "agent": a turn's review (its cells come from the log) leaves it alone."""
        if not self.config.narrate_cells or markdown is None:
            return
        metadata = self._cell_metadata(turn, role="narration", narrates=part)
        await self.notebook.append_markdown_cell(markdown, metadata)
        await self.notebook.save()

    def _cell_metadata(self, turn: int, **more: Any) -> dict[str, Any]:
        return {
            "prime_agent": {"session_id": self.session_id, "turn": turn, "role": "agent", **more}
        }

    async def _run_when_approved(self, turn: int, call: ToolCall, code: str) -> None:
        """Ask mode: the cell goes into the notebook marked as waiting; it runs after Run, an
        edited copy runs in a new cell after Edit, and after Skip or Stop nothing runs."""
        cell = await self.notebook.append_code_cell(
            code, self._cell_metadata(turn, permission="ask")
        )
        self.current_cell_id = cell.cell_id
        ids = {"turn": turn, "cell_id": cell.cell_id, "tool_call_id": call.id}
        self.events.emit("cell_started", turn=turn, cell_id=cell.cell_id, code=code)
        cell.apply(OutputEvent("note", output=_stream("stderr", f"{AWAITING_NOTE}\n")))
        self.events.emit("cell_awaiting_approval", code=code, **ids)
        try:
            if self._stop_requested:  # Stop came while the cell was being written
                decision = Decision("stop")
            else:
                decision = await self.permission.wait(call.id)
        except asyncio.CancelledError:
            decision = Decision("stop")
            await self._close_unrun(turn, call, cell, decision)
            raise
        if decision.action != "run":
            await self._close_unrun(turn, call, cell, decision)
            return
        cell.apply(OutputEvent("clear"))
        edited = decision.code is not None and decision.code != code
        record: dict[str, Any] = {"decision": "edit", "code": decision.code} if edited else {}
        self.session.append("cell_approval", **{"decision": "run", **ids, **record})
        self.events.emit("cell_approved", edited=edited, **ids)
        if not edited:
            await self._run_cell(turn, call, code, written=cell)
            return
        note = "[Prime Agent] the user edited this cell; the edited code ran in the next cell"
        cell.apply(OutputEvent("note", output=_stream("stderr", f"{note}\n")))
        cell.finish(None)
        self._emit_unrun(
            turn, cell.cell_id, "edited: the edited code runs in the next cell", decision="edit"
        )
        told = (
            f"[edited] The user edited your code before it ran; this ran instead:\n{decision.code}"
        )
        await self._run_cell(turn, call, str(decision.code), told=told)

    async def _close_unrun(
        self, turn: int, call: ToolCall, cell: CellWriter, decision: Decision
    ) -> None:
        if decision.action == "skip":
            self.session.append(
                "cell_approval",
                turn=turn,
                tool_call_id=call.id,
                cell_id=cell.cell_id,
                decision="skip",
            )
            note, observation = "[Prime Agent] skipped: not run", SKIPPED_OBSERVATION
        else:
            sentence = self._stop_cause.sentence
            note = f"[Prime Agent] not run: {sentence} while it waited for approval"
            observation = f"(not run: {sentence} while this cell waited for the user's approval)"
        cell.apply(OutputEvent("clear"))
        cell.apply(OutputEvent("note", output=_stream("stderr", f"{note}\n")))
        cell.finish(None)
        with contextlib.suppress(Exception):
            await self.notebook.save()
        skipped = {"decision": "skip"} if decision.action == "skip" else {}
        ids = {"turn": turn, "cell_id": cell.cell_id, "tool_call_id": call.id}
        self.events.emit("cell_skipped", **ids, **skipped)
        self._record_not_run(turn, call, cell.cell_id, observation)
        self._emit_unrun(turn, cell.cell_id, observation, **skipped)

    def _emit_unrun(self, turn: int, cell_id: str, preview: str, **decision: str) -> None:
        """The cell's `cell_finished` (status `skipped`): it is done without running;
        `decision`: the user's Skip or Edit (none: withdrawn by Stop)."""
        self.events.emit(
            "cell_finished",
            turn=turn,
            cell_id=cell_id,
            status="skipped",
            execution_count=None,
            preview=preview,
            **decision,
        )

    def _record_not_run(
        self, turn: int, call: ToolCall, cell_id: str | None, observation: str
    ) -> None:
        self.session.append(
            "tool_result",
            turn=turn,
            tool_call_id=call.id,
            cell_id=cell_id,
            status="skipped",
            execution_count=None,
            observation=observation,
        )

    def continue_with(self, text: str, reason: str, summary: str) -> None:
        """What the model reads next in a turn a continuer keeps going (`should_continue`):
        recorded as a `continuation` entry, shown in the chat as one notice line."""
        turn = self.current_turn
        self.session.append("continuation", turn=turn, text=text, reason=reason, summary=summary)
        self.events.emit("notice", turn=turn, kind="continuation", text=summary, reason=reason)

    def notice(self, kind: str, text: str, turn: int | None = None) -> None:
        """Something the user must know that is not an error (a kernel restart, ...)."""
        fields: dict[str, Any] = {"kind": kind, "text": text}
        if turn is not None:
            fields["turn"] = turn
        self.session.append("notice", **fields)
        self.events.emit("notice", **fields)

    def _record_result(
        self, turn: int, call: ToolCall, cell_id: str, result: ExecutionResult, told: str = ""
    ) -> None:
        """`told`: what the model reads before the cell's observation (the user edited it)."""
        observation = build_observation(
            result,
            cap=self.config.output_cap,
            accepts_images=self.config.accepts_images,
            where_rest=f"the full output is in notebook cell {cell_id}",
            redact=self.redactor.text,
        )
        entry: dict[str, Any] = {
            "turn": turn,
            "tool_call_id": call.id,
            "cell_id": cell_id,
            "status": result.status,
            "execution_count": result.execution_count,
            "observation": f"{told}\n{observation.text}" if told else observation.text,
            "preview": observation.preview,
        }
        if observation.images:
            entry["images"] = [
                self.session.store_image(i.media_type, i.data_base64) for i in observation.images
            ]
        self.session.append("tool_result", **entry)
        self.events.emit(
            "cell_finished",
            turn=turn,
            cell_id=cell_id,
            status=result.status,
            execution_count=result.execution_count,
            preview=observation.preview,
        )

    def _record_cell_started(self, turn: int, call: ToolCall, cell_id: str) -> None:
        """Logged before the cell runs, so a crash mid-cell can later tell the model that the
        cell ran partly (core/recovery.py) instead of "not run"."""
        self.session.append("cell_started", turn=turn, tool_call_id=call.id, cell_id=cell_id)

    def _record_skipped(self, turn: int, calls: list[ToolCall]) -> None:
        if not calls:
            return
        recorded = {
            e.get("tool_call_id") for e in self.session.path() if e["type"] == "tool_result"
        }
        for call in calls:
            if call.id in recorded:
                continue
            self.session.append(
                "tool_result",
                turn=turn,
                tool_call_id=call.id,
                cell_id=None,
                status="skipped",
                execution_count=None,
                observation=f"(not run: {self._stop_cause.who})",
            )

    def _record_error(self, turn: int, message: str, kind: str) -> None:
        """Logged and told; told even when the log cannot take it (the turn_end that follows
        reports that)."""
        with contextlib.suppress(SessionWriteError):
            self.session.append("error", turn=turn, message=message, kind=kind)
        self.events.emit("error", turn=turn, message=message, kind=kind)

    async def _write_turn_end(
        self, turn: int, stop_reason: str, final_text: str, log_failed: bool
    ) -> None:
        """The turn's `turn_end`, if its message is in the log (nothing to end otherwise). After
        a failed write, cells whose result is missing get one from the notebook first: a turn is
        never closed with a cell the model would then be told was not run."""
        if self.session.open_turn() != turn:
            return
        if log_failed:
            await record_unfinished_cells(
                self.session,
                self.notebook,
                output_cap=self.config.output_cap,
                accepts_images=self.config.accepts_images,
                redactor=self.redactor,
                cause=LOG_NOT_WRITTEN,
            )
        self.session.append("turn_end", turn=turn, stop_reason=stop_reason, final_text=final_text)

    async def _close_unrecorded_turn(self) -> None:
        """A turn whose end could not be written (the session log failed, a full disk): its
        cells get their results from the notebook and the turn its `turn_end` before the next
        turn begins, as after a crash, so the model's history stays whole."""
        if self.session.open_turn() is None:
            return
        await close_interrupted_turn(
            self.session,
            self.notebook,
            output_cap=self.config.output_cap,
            accepts_images=self.config.accepts_images,
            redactor=self.redactor,
            cause=LOG_NOT_WRITTEN,
        )

    def _record_model_if_changed(self) -> None:
        provider, model = self.session.current_model()
        if (provider, model) != (self.provider.name, self.provider.model):
            self.session.append(
                "model_change", provider=self.provider.name, model=self.provider.model
            )


async def _close_provider(provider: ModelProvider) -> None:
    """Release a provider's HTTP connections (those with an SDK client hold some)."""
    close = getattr(provider, "aclose", None)
    if close is not None:
        await close()
