"""A deterministic provider that plays assistant turns from a JSON script.

Script format::

    {"turns": [
        {"text": "...", "code": "print(1)"},                         # text + one tool call
        {"text": "...", "tool_calls": [{"code": "..."}, {"arguments": "{raw"}]},
        {"error": {"status": 500, "message": "boom", "retry_after": 1}, "repeat": 2},
        {"text": "The answer is {last_output_line}"}                 # final answer
    ]}

The turn for a call is chosen by how many assistant messages the request already holds, so the
n-th model call of a conversation gets the n-th turn, a resumed session continues where it was,
and a new conversation starts from the top. An error step fails the call that would play the turn
after it, `repeat` times (default 1, counted per provider instance), so the loop's retries see the
errors and then the turn. `error` may give `kind` "timeout" or "connection" instead of `status`.

In `text`, `{last_output}` is the text of the newest tool result in the request (stripped) and
`{last_output_line}` its last non-empty line. In `text` and `code`, `{task}` is the task of a
sub-agent (its first message without the `[task from parent]` label) and `{messages}` the bodies
of the messages other agents sent into this conversation, one per line.

`"child": {"turns": [...]}` is the script of sub-agents: a conversation whose first message is a
`[task from parent]` task plays it instead of the top-level turns. `"children": {"<name>": {...}}`
gives a sub-agent a script of its own by its name (read from the sub-agent doctrine of its system
prompt); it nests, a child script's `children` being its own sub-agents'. A step with
`"verbatim": true` is played as written: no template is filled in (an exported session's text).

Two optional top-level keys make a script behave like a walkthrough (the bundled demo uses both):
`"restart_each_message": true` counts turns from the newest user message instead, so every
message (including one sent after a Stop) plays the script from its first step; and
`"follow_up": "..."` is the answer, with no tool call, to a message sent after the script has
already been played to its end in this conversation.

Side calls of the harness (`request.purpose` other than `turn`: a compaction's `summary`, a
`kernel_gc` review, a `refine` plan, a `refine_review`) never play the turns. `"side": {"summary":
[{"text": "..."}, ...], "kernel_gc": [...]}` gives their answers in order (error steps too), per
provider instance; without one, a summary call gets a short generated summary, a `kernel_gc` call
`{"actions": []}`, a `refine` call a proposal without edits and a `refine_review` a "no". A side
step may also give `"stop_reason"` (e.g. "max_tokens", a reply cut off by the output budget) and
`"wait_for": "<path>"`: the call answers only once that file exists (a test holds a side call
pending that way, deterministically). After a compaction dropped earlier assistant messages, the
position continues from the newest scripted tool call id the request still holds.

`step_delay` (seconds, default 0) paces the playback so a person can watch it: about half of it
passes before the step's text, the rest while the text streams.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.jsonfile import MiB, UnreadableFile, read_json
from ..core.messages import Message, ModelRequest, ModelResponse, ToolCall, Usage
from ..core.ports import ErrorMapping, ProviderError, ProviderEvent, ResponseDone, TextDelta
from .errors import error_for_status
from .fenced import apply_fenced_fallback

DEFAULT_SCRIPT = Path(__file__).resolve().parent.parent / "demo" / "demo_script.json"
EXHAUSTED_TEXT = "The demo script has no more steps."


def exhausted_text(script_path: str) -> str:
    """What a finished script answers: the demo's words, or the custom script's file name (a
    custom script is never called the demo)."""
    if Path(script_path) == DEFAULT_SCRIPT:
        return EXHAUSTED_TEXT
    return f"The script {Path(script_path).name} has no more steps."


_WORD_GROUP = re.compile(r"(?:\S+\s*){1,3}|\s+")


@dataclass(frozen=True)
class ScriptTurn:
    text: str = ""
    arguments: tuple[str, ...] = ()  # raw JSON arguments of each `python` tool call
    stop_reason: str | None = None  # side steps: as the provider reports it
    wait_for: str | None = None  # side steps: answer once this file exists
    verbatim: bool = False  # text and code played as written: no {task}, {last_output}, ...


SIDE_DEFAULTS = {
    "kernel_gc": '{"actions": []}',
    "refine": '{"summary": "scripted: no change", "rationale": "", "edits": []}',
    "refine_review": '{"should_refine": false, "rationale": "scripted"}',
}
WAIT_POLL_SECONDS = 0.02


@dataclass(frozen=True)
class ScriptError:
    status: int | None
    kind: str | None
    message: str
    retry_after: float | None
    repeat: int

    def to_error(self, errors: ErrorMapping) -> ProviderError:
        if self.kind in ("timeout", "connection"):
            message = f"{errors.vendor}: {self.message}"
            return ProviderError(message, kind=self.kind, retryable=True)
        return error_for_status(self.status or 500, self.message, errors, self.retry_after)


@dataclass
class Script:
    turns: list[ScriptTurn] = field(default_factory=list)
    # turn index -> (step number in the file, error) for the error steps just before that turn
    errors: dict[int, list[tuple[int, ScriptError]]] = field(default_factory=dict)
    restart_each_message: bool = False
    follow_up: str | None = None
    child: Script | None = None  # what sub-agents play
    children: dict[str, Script] = field(default_factory=dict)  # by sub-agent name
    side: dict[str, list[ScriptTurn | ScriptError]] = field(default_factory=dict)


MAX_SCRIPT_BYTES = 64 * MiB
TASK_LABEL = "[task from parent]"
_MESSAGE_HEADER = re.compile(r"^\[message from [^\]]*\]\n?", re.MULTILINE)


def load_script(path: str | Path) -> Script:
    """Read and validate a script file; raises ValueError naming the bad step."""
    path = Path(path)
    try:
        data = read_json(path, MAX_SCRIPT_BYTES)
    except UnreadableFile as exc:
        raise ValueError(f"the script file {exc}") from None
    return _parse_script(data, path)


def _parse_script(data: Any, path: str | Path) -> Script:
    if not isinstance(data, dict) or not isinstance(data.get("turns"), list):
        raise ValueError(f'Script {path} must be an object with a "turns" list')
    restart = data.get("restart_each_message", False)
    follow_up = data.get("follow_up")
    if not isinstance(restart, bool):
        raise ValueError(f'Script {path}: "restart_each_message" must be true or false')
    if follow_up is not None and not isinstance(follow_up, str):
        raise ValueError(f'Script {path}: "follow_up" must be a string')
    script = Script(restart_each_message=restart, follow_up=follow_up)
    if "child" in data:
        script.child = _parse_script(data["child"], f"{path} (child)")
    children = data.get("children", {})
    if not isinstance(children, dict):
        raise ValueError(f'Script {path}: "children" must map a sub-agent name to a script')
    for name, child in children.items():
        script.children[name] = _parse_script(child, f"{path} (child {name})")
    script.side = _parse_side(data.get("side", {}), path)
    for number, step in enumerate(data["turns"]):
        where = f"{path} turn {number}"
        if not isinstance(step, dict):
            raise ValueError(f"{where}: each turn must be an object")
        if "error" in step:
            error = _parse_error(step, where)
            script.errors.setdefault(len(script.turns), []).append((number, error))
        else:
            script.turns.append(_parse_turn(step, where))
    return script


def _parse_side(data: Any, path: str | Path) -> dict[str, list[ScriptTurn | ScriptError]]:
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise ValueError(f'Script {path}: "side" must map a purpose to a list of steps')
    side: dict[str, list[ScriptTurn | ScriptError]] = {}
    for purpose, steps in data.items():
        for number, step in enumerate(steps):
            where = f"{path} side {purpose} step {number}"
            if not isinstance(step, dict):
                raise ValueError(f"{where}: each step must be an object")
            parsed = _parse_error(step, where) if "error" in step else _parse_side_turn(step, where)
            side.setdefault(purpose, []).append(parsed)
    return side


def _parse_side_turn(step: dict[str, Any], where: str) -> ScriptTurn:
    turn = _parse_turn(step, where)
    stop_reason, wait_for = step.get("stop_reason"), step.get("wait_for")
    if stop_reason is not None and not isinstance(stop_reason, str):
        raise ValueError(f'{where}: "stop_reason" must be a string')
    if wait_for is not None and not isinstance(wait_for, str):
        raise ValueError(f'{where}: "wait_for" must be a file path (a string)')
    return ScriptTurn(turn.text, turn.arguments, stop_reason, wait_for, turn.verbatim)


def _parse_turn(step: dict[str, Any], where: str) -> ScriptTurn:
    text, verbatim = step.get("text", ""), step.get("verbatim", False)
    if not isinstance(text, str):
        raise ValueError(f'{where}: "text" must be a string')
    if not isinstance(verbatim, bool):
        raise ValueError(f'{where}: "verbatim" must be true or false')
    if "code" in step and "tool_calls" in step:
        raise ValueError(f'{where}: use either "code" or "tool_calls", not both')
    raw_calls = [{"code": step["code"]}] if "code" in step else step.get("tool_calls", [])
    if not isinstance(raw_calls, list):
        raise ValueError(f'{where}: "tool_calls" must be a list')
    arguments = []
    for call in raw_calls:
        if isinstance(call, dict) and isinstance(call.get("code"), str):
            arguments.append(json.dumps({"code": call["code"]}))
        elif isinstance(call, dict) and isinstance(call.get("arguments"), str):
            arguments.append(call["arguments"])
        else:
            raise ValueError(f'{where}: a tool call needs a "code" or "arguments" string')
    return ScriptTurn(text=text, arguments=tuple(arguments), verbatim=verbatim)


def _parse_error(step: dict[str, Any], where: str) -> ScriptError:
    error = step["error"]
    repeat = step.get("repeat", 1)
    if not isinstance(error, dict):
        raise ValueError(f'{where}: "error" must be an object')
    status = error.get("status")
    kind = error.get("kind")
    if status is None and kind not in ("timeout", "connection"):
        raise ValueError(f'{where}: an error needs a "status" or kind "timeout"/"connection"')
    if status is not None and not isinstance(status, int):
        raise ValueError(f'{where}: "status" must be an integer')
    if not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f'{where}: "repeat" must be a positive integer')
    retry_after = error.get("retry_after")
    return ScriptError(
        status=status,
        kind=kind,
        message=str(error.get("message", "scripted failure")),
        retry_after=float(retry_after) if retry_after is not None else None,
        repeat=repeat,
    )


class ScriptedProvider:
    """`name` and `errors` come from the provider's declaration (providers/builtin.py)."""

    def __init__(
        self,
        model: str,
        *,
        name: str,
        errors: ErrorMapping,
        script_path: str | None = None,
        stream: bool = True,
        fenced_code: bool = False,
        step_delay: float = 0.0,
    ) -> None:
        self.name = name
        self.model = model
        self._errors = errors
        self.streaming = stream
        self.fenced_code = fenced_code
        self.step_delay = max(0.0, step_delay)
        self.script_path = str(script_path) if script_path else str(DEFAULT_SCRIPT)
        self.script = load_script(self.script_path)
        self._failures: dict[int, int] = {}  # step number -> times it has failed so far
        self._side_played: dict[str, int] = {}  # purpose -> side steps played so far

    async def aclose(self) -> None:
        """Nothing to release; present so every provider can be closed the same way."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        if request.purpose != "turn":
            response, wait_for = self._side_call(request)
            while wait_for is not None and not Path(wait_for).exists():
                await asyncio.sleep(WAIT_POLL_SECONDS)
            yield ResponseDone(response)
            return
        script = self._script_for(request)
        position = self._position(request, script)
        for number, error in script.errors.get(position, ()):
            failed = self._failures.get(number, 0)
            if failed < error.repeat:
                self._failures[number] = failed + 1
                raise error.to_error(self._errors)

        turn = self._turn_at(position, request, script)
        text = turn.text if turn.verbatim else _fill_agents(_fill(turn.text, request), request)
        prefix = _call_prefix(request) if script.restart_each_message else ""
        calls = [
            ToolCall(
                id=f"scripted_{prefix}{position}_{i}",
                name="python",
                arguments=arguments
                if turn.verbatim
                else _fill_agents(arguments, request, in_json=True),
            )
            for i, arguments in enumerate(turn.arguments)
        ]
        await asyncio.sleep(self.step_delay / 2)
        if text:
            chunks = _WORD_GROUP.findall(text) if self.streaming else [text]
            pause = self.step_delay / 2 / len(chunks)
            for chunk in chunks:
                yield TextDelta(chunk)
                await asyncio.sleep(pause)  # 0 without a step delay: just let a UI see the chunk

        output_chars = len(text) + sum(len(call.arguments) for call in calls)
        response = ModelResponse(
            text=text,
            tool_calls=calls,
            usage=Usage(input_tokens=_request_chars(request) // 4, output_tokens=output_chars // 4),
            stop_reason="tool_use" if calls else "end_turn",
            model=self.model,
        )
        yield ResponseDone(
            apply_fenced_fallback(response, id_prefix="scripted_", enabled=self.fenced_code)
        )

    def _side_call(self, request: ModelRequest) -> tuple[ModelResponse, str | None]:
        """The answer of a side call, and the file it waits for (None: answer at once)."""
        steps = self.script.side.get(request.purpose, [])
        played = self._side_played.get(request.purpose, 0)
        self._side_played[request.purpose] = played + 1
        step = steps[played] if played < len(steps) else None
        if isinstance(step, ScriptError):
            raise step.to_error(self._errors)
        if step is not None:
            text = step.text
        elif request.purpose in SIDE_DEFAULTS:
            text = SIDE_DEFAULTS[request.purpose]
        else:
            chars = _request_chars(request)
            text = f"## Goal\n(scripted summary of {chars:,} characters of earlier work)"
        response = ModelResponse(
            text=text,
            usage=Usage(input_tokens=_request_chars(request) // 4, output_tokens=len(text) // 4),
            stop_reason=(step.stop_reason if step is not None else None) or "end_turn",
            model=self.model,
        )
        return response, step.wait_for if step is not None else None

    def _script_for(self, request: ModelRequest) -> Script:
        first = request.messages[0] if request.messages else None
        is_child = first is not None and first.role == "user" and TASK_LABEL in first.text
        if not is_child:
            return self.script
        named = _CHILD_NAMES.search(request.system)
        own = _named_child(self.script, *named.groups()) if named else None
        return own or self.script.child or self.script

    def _position(self, request: ModelRequest, script: Script) -> int:
        """Which script turn this call plays: assistant messages so far, in the whole
        conversation or (restart_each_message) since the newest user message."""
        messages = request.messages
        if script.restart_each_message:
            users = [i for i, m in enumerate(messages) if m.role == "user"]
            messages = messages[users[-1] + 1 :] if users else messages
            return sum(1 for m in messages if m.role == "assistant")
        for index in range(len(messages) - 1, -1, -1):  # after a compaction: from the last id
            played = _scripted_position(messages[index])
            if played is not None:
                later = messages[index + 1 :]
                return played + 1 + sum(1 for m in later if m.role == "assistant")
        return sum(1 for m in messages if m.role == "assistant")

    def _turn_at(self, position: int, request: ModelRequest, script: Script) -> ScriptTurn:
        if position == 0 and script.follow_up is not None and _walkthrough_finished_before(request):
            return ScriptTurn(text=script.follow_up)
        if position < len(script.turns):
            return script.turns[position]
        return ScriptTurn(text=exhausted_text(self.script_path))


_SCRIPTED_ID = re.compile(r"^scripted_(\d+)_\d+$")
# The sub-agent doctrine of a child's system prompt (core/prompts.py CHILD_DOCTRINE).
_CHILD_NAMES = re.compile(r"You are `([^`\n]+)`, a sub-agent spawned by `([^`\n]+)`")


def _named_child(root: Script, name: str, parent: str) -> Script | None:
    """The script under `children` for the sub-agent `name` of `parent`: one listed under a
    child script called `parent` (a sub-agent's own sub-agents) first, else one the top level
    lists."""
    stack = list(root.children.items())
    while stack:
        owner, script = stack.pop(0)
        if owner == parent and name in script.children:
            return script.children[name]
        stack.extend(script.children.items())
    return root.children.get(name)


def _scripted_position(message: Message) -> int | None:
    """The script position an assistant message of this provider played (from its call ids)."""
    if message.role != "assistant" or not message.tool_calls:
        return None
    match = _SCRIPTED_ID.match(message.tool_calls[0].id)
    return int(match.group(1)) if match else None


def _walkthrough_finished_before(request: ModelRequest) -> bool:
    """An earlier turn of the conversation ended with a final answer (no tool call)."""
    users = [i for i, m in enumerate(request.messages) if m.role == "user"]
    earlier = request.messages[: users[-1]] if users else []
    return any(m.role == "assistant" and not m.tool_calls for m in earlier)


def _call_prefix(request: ModelRequest) -> str:
    """Tool call ids must be unique in a conversation, also when a script plays again."""
    users = sum(1 for m in request.messages if m.role == "user")
    return f"{users}_" if users > 1 else ""


def _fill(text: str, request: ModelRequest) -> str:
    if "{last_output" not in text:
        return text
    output = ""
    for message in reversed(request.messages):
        if message.role == "tool":
            output = message.text.strip()
            break
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return text.replace("{last_output_line}", lines[-1] if lines else "").replace(
        "{last_output}", output
    )


def _message_body(message: Message) -> str | None:
    """The body of a message from another agent, also when notices from between turns were
    told with it (they come first, each `[notice] ...`); None for any other message."""
    if message.role != "user" or not message.text.startswith(("[message from", "[notice] ")):
        return None
    header = _MESSAGE_HEADER.search(message.text)
    if header is None:
        return None
    return message.text[header.end() :].strip()


def _fill_agents(text: str, request: ModelRequest, in_json: bool = False) -> str:
    """`{task}` and `{messages}` (see the module docstring); JSON-escaped inside arguments."""
    if "{task}" not in text and "{messages}" not in text:
        return text
    first = request.messages[0].text if request.messages else ""
    task = first.split(TASK_LABEL, 1)[1].strip() if TASK_LABEL in first else ""
    bodies = [body for m in request.messages if (body := _message_body(m)) is not None]
    values = {"{task}": task, "{messages}": "\n".join(bodies)}
    for key, value in values.items():
        text = text.replace(key, json.dumps(value)[1:-1] if in_json else value)
    return text


def _request_chars(request: ModelRequest) -> int:
    total = len(request.system)
    for message in request.messages:
        total += len(message.text) + sum(len(call.arguments) for call in message.tool_calls)
    return total
