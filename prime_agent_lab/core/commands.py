"""Every chat command, declared once (docs/architecture.md, "Chat commands").

A command is a name, a line of help and its forms. A form is what follows the name (`/refine
rollback <id> [--global]`): an optional keyword, its arguments, its help, the view the chat panel
shows its answer in, and the host handler that answers it. The rest is derived from this table:

- `POST /prime-agent/api/sessions/<id>/commands/<name> {"args": "..."}` (jupyter/handlers.py)
  parses the text after the name with `Command.parse` and answers `{command, form, view,
  answer}` (`CommandReply`); a bad form is a 400 that gives the usage.
- `/help` answers the table itself.
- `labextension/src/commands.ts` (the panel's completion and help, the answers' types) is
  generated from it: `python -m prime_agent_lab.core.commands --ts > labextension/src/commands.ts`;
  `tests/test_commands.py` fails when the checked-in file differs.

A handler gets the host (`CommandHost`: what the server's `AgentHost` offers), the session id and
the parsed argument values; it returns the answer of its form's view (`VIEWS`).

Size: over 600 lines because it is one table (every command, its forms and their handlers) with
the one parser and the TypeScript generation that read it; a command's domain lives elsewhere
(`usage.py`, `goals.py`, the host), only its words are here. The generator is the part to move
out first when it grows.
"""

from __future__ import annotations

import json
import re
import sys
import typing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypedDict

from . import wire
from .caller import TreeRuntime
from .context_report import ContextReport, context_report
from .family import FamilyError
from .goals import GoalError, describe, opening_text
from .heartbeat_commands import change_heartbeat, set_heartbeat
from .model_ops import ModelSwitchError, model_list, switch_model
from .prompt_parts import McpServerView, ProjectFileInfo, PromptPart
from .text import shorten
from .usage import AgentUsage, usage_report
from .wire import ModelList, RefinementList, SessionCopy, SessionTree

ArgumentKind = Literal["flag", "option", "word", "text"]
"""`flag`: `--name`, before a keyword or the text, or anywhere among a keyword form's words;
`option`: `--name VALUE` (or `--name=VALUE`) where a flag may be, its value read as the argument's
type (None when it is not given); `word`: one word, required; `text`: everything after the name
and the leading flags and options, optional (only the form without a keyword has one)."""

CommandView = Literal["help", "tree", "copy", "note", "refinements", "usage", "context", "models"]
"""How the chat panel shows a form's answer (labextension/src/commandViews.ts)."""


class _ArgumentFields(TypedDict):
    name: str
    kind: ArgumentKind
    help: str


class ArgumentSpec(_ArgumentFields, total=False):
    value: str
    """An option's value as the usage names it (`N`)."""


class FormSpec(TypedDict):
    keyword: str | None
    """The word after the command's name that selects this form; null for the plain form."""
    usage: str
    help: str
    view: CommandView
    arguments: list[ArgumentSpec]


class CommandSpec(TypedDict):
    """A chat command as the panel and `/help` read it."""

    name: str
    help: str
    forms: list[FormSpec]


class CommandList(TypedDict):
    """Answer of `/help`."""

    commands: list[CommandSpec]


class CommandNote(TypedDict):
    """An answer the chat shows as one line."""

    text: str


class CommandReply(TypedDict):
    """Answer of `POST .../commands/<name>`."""

    command: str
    form: str | None
    view: CommandView
    answer: Any


VIEWS: dict[CommandView, type] = {
    "help": CommandList,
    "tree": SessionTree,
    "copy": SessionCopy,
    "note": CommandNote,
    "refinements": RefinementList,
    "usage": AgentUsage,
    "context": ContextReport,
    "models": ModelList,
}
"""Each view and the type of the answer it shows."""


class CommandError(Exception):
    """A command that cannot run as written: an HTTP status and a message for the user."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class CommandHost(Protocol):
    """What command handlers use of the host (the server's `AgentHost`)."""

    @property
    def runtime(self) -> TreeRuntime: ...

    async def session_tree(self, session_id: str) -> dict[str, Any]: ...

    async def fork(self, session_id: str, entry_id: object) -> dict[str, Any]: ...

    async def clone(self, session_id: str) -> dict[str, Any]: ...

    def refine(
        self, session_id: str, instructions: str | None, global_: bool
    ) -> dict[str, Any]: ...

    async def refinements(self, session_id: str) -> dict[str, Any]: ...

    async def rollback_refinement(self, session_id: str, refinement_id: str) -> dict[str, Any]: ...

    async def send(self, session_id: str, text: str) -> int:
        """Start a turn of the session's (idle) agent with `text`; its number."""
        ...


Handler = Callable[[CommandHost, str, dict[str, Any]], Awaitable[Any]]


@dataclass(frozen=True)
class Argument:
    name: str
    kind: ArgumentKind
    help: str
    ask: str = ""
    """For a `word`: what to say when it is missing."""
    value: str = "VALUE"
    """For an `option`: its value as the usage names it."""
    value_type: type = str
    """For an `option`: what its value is read as (`int`: a whole number)."""

    @property
    def usage(self) -> str:
        return {
            "flag": f"[--{self.name}]",
            "option": f"[--{self.name} {self.value}]",
            "word": f"<{self.name}>",
            "text": f"[{self.name}]",
        }[self.kind]

    def read(self, raw: str | None, usage: str) -> Any:
        """An option's value from its text; a CommandError (400) for a missing or bad one."""
        if raw is None or raw == "":
            raise CommandError(400, f"--{self.name} needs a value ({self.value}). Usage: {usage}")
        try:
            return self.value_type(raw)
        except ValueError:
            what = _VALUE_WORDS.get(self.value_type, self.value_type.__name__)
            raise CommandError(
                400, f"--{self.name} takes {what}, not {shorten(raw, 40)}. Usage: {usage}"
            ) from None


_VALUE_WORDS: dict[type, str] = {int: "a whole number", float: "a number"}


@dataclass(frozen=True)
class Form:
    help: str
    view: CommandView
    run: Handler
    keyword: str | None = None
    arguments: tuple[Argument, ...] = ()

    def __post_init__(self) -> None:
        if self.view not in VIEWS:
            raise ValueError(f"unknown view {self.view!r}")
        if self.keyword is not None and self.text is not None:
            raise ValueError(f"form {self.keyword!r}: only the plain form takes free text")

    @property
    def flags(self) -> set[str]:
        return {a.name for a in self.arguments if a.kind == "flag"}

    @property
    def options(self) -> dict[str, Argument]:
        return {a.name: a for a in self.arguments if a.kind == "option"}

    @property
    def words(self) -> list[Argument]:
        return [a for a in self.arguments if a.kind == "word"]

    @property
    def text(self) -> Argument | None:
        return next((a for a in self.arguments if a.kind == "text"), None)

    def head(self, command: str) -> str:
        """`/refine rollback`: the command and the keyword."""
        return f"/{command} {self.keyword}" if self.keyword else f"/{command}"

    def usage(self, command: str) -> str:
        return " ".join([self.head(command), *(a.usage for a in self.arguments)])


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    forms: tuple[Form, ...]

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z][a-z0-9-]*", self.name):
            raise ValueError(f"a command name is lower-case letters, digits and -: {self.name!r}")
        keywords = [form.keyword for form in self.forms]
        if len(set(keywords)) != len(keywords):
            raise ValueError(f"/{self.name}: two forms with the same keyword")

    @property
    def usage(self) -> str:
        return " · ".join(form.usage(self.name) for form in self.forms)

    def spec(self) -> CommandSpec:
        return {
            "name": self.name,
            "help": self.help,
            "forms": [
                {
                    "keyword": form.keyword,
                    "usage": form.usage(self.name),
                    "help": form.help,
                    "view": form.view,
                    "arguments": [_argument_spec(a) for a in form.arguments],
                }
                for form in self.forms
            ],
        }

    def parse(self, text: str) -> tuple[Form, dict[str, Any]]:
        """The form the text after `/name` asks for, and its argument values (flags as bools,
        options as their type or None, words as strings, the text or None). Leading flags and
        options may come before a keyword; `--` ends them, so a plain form's text may start
        with a keyword or `--`. A keyword form without arguments is taken only alone
        (`/refine history of errors` is text)."""
        rest = text.strip()
        plain = self._form(None)
        leading: list[tuple[str, str | None]] = []  # (name, an option's value)
        options = {name for form in self.forms for name in form.options}
        while option := re.match(r"(--[^\s=]*)(?:=(\S*))?(?:\s+|$)", rest):
            rest = rest[option.end() :].strip()
            if option[0].strip() == "--":
                if plain is None or plain.text is None:
                    raise CommandError(400, f"/{self.name} takes no text. Usage: {self.usage}")
                return plain, self._bind(plain, leading, [], rest)
            name, value = option[1][2:], option[2]
            if name in options:
                if value is None and (given := re.match(r"(\S+)(?:\s+|$)", rest)):
                    value, rest = given[1], rest[given.end() :].strip()
                leading.append((name, value))
                continue
            if value is not None or name not in {f for form in self.forms for f in form.flags}:
                raise CommandError(400, f"Unknown option {option[0].strip()}. Usage: {self.usage}")
            leading.append((name, None))
        words = rest.split()
        chosen = self._form(words[0]) if words else None
        if chosen is not None and not (
            not chosen.arguments and len(words) > 1 and plain is not None and plain.text
        ):
            return chosen, self._bind(chosen, leading, words[1:], None)
        if plain is None:
            raise CommandError(400, f"Usage: {self.usage}")
        return plain, self._bind(plain, leading, [], rest)

    def _form(self, keyword: str | None) -> Form | None:
        return next((form for form in self.forms if form.keyword == keyword), None)

    def _bind(
        self,
        form: Form,
        leading: list[tuple[str, str | None]],
        words: list[str],
        text: str | None,
    ) -> dict[str, Any]:
        usage = form.usage(self.name)
        values: dict[str, Any] = {name: False for name in form.flags}
        values.update((name, None) for name in form.options)
        positional = []
        remaining = iter(words)
        for word in remaining:
            name, equals, inline = word[2:].partition("=")
            if not word.startswith("--"):
                positional.append(word)
            elif name in form.options:
                raw = inline if equals else next(remaining, None)
                values[name] = form.options[name].read(raw, usage)
            elif word[2:] in form.flags:
                values[word[2:]] = True
            else:
                raise CommandError(400, f"Unknown option {word}. Usage: {usage}")
        for name, raw in leading:
            if name in form.options:
                values[name] = form.options[name].read(raw, usage)
            elif name in form.flags:
                values[name] = True
            else:
                raise CommandError(400, f"{form.head(self.name)} takes no --{name}.")
        wanted = form.words
        if len(positional) < len(wanted):
            missing = wanted[len(positional)]
            ask = missing.ask or f"<{missing.name}> is missing:"
            raise CommandError(400, f"{ask} Usage: {usage}")
        if len(positional) > len(wanted):
            plain = self._form(None)
            hint = (
                f' (text that starts with "{form.keyword}": /{self.name} -- {form.keyword} …)'
                if form.keyword and plain is not None and plain.text is not None
                else ""
            )
            raise CommandError(400, f"Too many words. Usage: {usage}{hint}")
        values.update((arg.name, word) for arg, word in zip(wanted, positional, strict=False))
        if form.text is not None:
            values[form.text.name] = text or None
        elif text:
            raise CommandError(400, f"/{self.name} takes no text. Usage: {self.usage}")
        return values


def _argument_spec(argument: Argument) -> ArgumentSpec:
    spec: ArgumentSpec = {"name": argument.name, "kind": argument.kind, "help": argument.help}
    if argument.kind == "option":
        spec["value"] = argument.value
    return spec


# ---------------------------------------------------------------- handlers


async def _help(host: CommandHost, session_id: str, values: dict[str, Any]) -> CommandList:
    return {"commands": [command.spec() for command in COMMANDS]}


async def _tree(host: CommandHost, session_id: str, values: dict[str, Any]) -> Any:
    return await host.session_tree(session_id)


async def _fork(host: CommandHost, session_id: str, values: dict[str, Any]) -> Any:
    """A fork from the newest user message on the current branch."""
    tree = await host.session_tree(session_id)
    messages = [e for e in tree["entries"] if e["on_branch"] and e["type"] == "user_message"]
    if not messages:
        raise CommandError(409, "Nothing to fork from: this branch has no message yet.")
    return await host.fork(session_id, messages[-1]["id"])


async def _clone(host: CommandHost, session_id: str, values: dict[str, Any]) -> Any:
    return await host.clone(session_id)


async def _refine(host: CommandHost, session_id: str, values: dict[str, Any]) -> CommandNote:
    answer = host.refine(session_id, values["instructions"], values["global"])
    scope = " --global" if values["global"] else ""
    return {"text": f"/refine{scope}: {_describe(answer, 'scheduled')}"}


async def _rollback(host: CommandHost, session_id: str, values: dict[str, Any]) -> CommandNote:
    answer = await host.rollback_refinement(session_id, values["id"])
    return {"text": f"Rollback of {values['id']}: {_describe(answer, 'requested')}"}


async def _refinements(host: CommandHost, session_id: str, values: dict[str, Any]) -> Any:
    return await host.refinements(session_id)


async def _usage(host: CommandHost, session_id: str, values: dict[str, Any]) -> AgentUsage:
    try:
        return usage_report(host.runtime, session_id)
    except LookupError as exc:
        raise CommandError(404, str(exc)) from None


def _loaded(host: CommandHost, session_id: str) -> Any:
    agent = host.runtime.agents.get(session_id)
    if agent is None:
        raise CommandError(409, "The agent is not open: open its notebook to change its goal.")
    return agent


async def _goal_set(host: CommandHost, session_id: str, values: dict[str, Any]) -> CommandNote:
    """Set a goal; an idle agent starts on it, a running one takes it after its answer."""
    objective = values["objective"]
    if objective is None:
        if values["budget"] is not None:
            raise CommandError(400, f"What is the goal? Usage: {BY_NAME['goal'].usage}")
        return await _goal_status(host, session_id, values)
    if values["budget"] is not None and values["budget"] <= 0:
        raise CommandError(400, "--budget must be a positive whole number")
    agent = _loaded(host, session_id)
    try:
        state = host.runtime.goals.create(agent, objective, values["budget"], set_by="user")
    except GoalError as exc:
        raise CommandError(exc.status, exc.message) from None
    if agent.running:
        return {"text": f"{describe(state)}. It applies when the agent's current answer ends."}
    return {"text": await _start_on_goal(host, session_id, state, "The agent starts on it.")}


async def _start_on_goal(host: CommandHost, session_id: str, state: Any, started: str) -> str:
    try:
        await host.send(session_id, opening_text(state["objective"]))
    except Exception as exc:  # the goal is set either way; say why the agent did not start
        return f"{describe(state)}. The agent did not start: {exc}"
    return f"{describe(state)}. {started}"


async def _goal_status(host: CommandHost, session_id: str, values: dict[str, Any]) -> CommandNote:
    return {"text": describe(host.runtime.goals.current(session_id))}


def _goal_change(change: str) -> Handler:
    async def run(host: CommandHost, session_id: str, values: dict[str, Any]) -> CommandNote:
        agent = _loaded(host, session_id)
        goals = host.runtime.goals
        try:
            state = getattr(goals, change)(agent)
        except GoalError as exc:
            raise CommandError(exc.status, exc.message) from None
        if change == "resume" and not agent.running:
            return {"text": await _start_on_goal(host, session_id, state, "The agent goes on.")}
        return {"text": describe(state) if change != "clear" else "Goal cleared."}

    return run


def _describe(answer: object, fallback: str) -> str:
    """The host's answer to a refine or rollback, in words."""
    if isinstance(answer, dict):
        if answer.get("scheduled") is False:
            why = answer.get("reason") or answer.get("note") or "no reason given"
            return f"not scheduled: {why}"
        for key in ("note", "message", "reason", "status"):
            if isinstance(answer.get(key), str) and answer[key]:
                return str(answer[key])
    return fallback


_GLOBAL = Argument("global", "flag", "the shared global harness store, not this session's")

# ---------------------------------------------------------------- /heartbeat (docs/autonomy.md)


async def _heartbeat(host: CommandHost, session_id: str, values: dict[str, Any]) -> CommandNote:
    try:
        return {"text": set_heartbeat(host.runtime, session_id, values)}
    except FamilyError as exc:
        raise CommandError(exc.status, exc.message) from None


def _heartbeat_keyword(keyword: str) -> Handler:
    async def run(host: CommandHost, session_id: str, values: dict[str, Any]) -> CommandNote:
        try:
            return {"text": change_heartbeat(host.runtime, session_id, keyword)}
        except FamilyError as exc:
            raise CommandError(exc.status, exc.message) from None

    return run


_HEARTBEAT = Command(
    "heartbeat",
    "Bring this agent back on a schedule with an instruction; the agent cannot change it.",
    (
        Form(
            "Set this session's heartbeat (replacing the one before): `every <dur> "
            "[--steer|--follow-up] <instruction>`; steer enters a running turn, follow-up "
            "waits for it to end.",
            "note",
            _heartbeat,
            arguments=(
                Argument("steer", "flag", "enter a running turn at its next model call (default)"),
                Argument("follow-up", "flag", "wait until a running turn ends"),
                Argument("schedule", "text", "every <dur> [--steer|--follow-up] <instruction>"),
            ),
        ),
        *(
            Form(said, "note", _heartbeat_keyword(keyword), keyword=keyword)
            for keyword, said in (
                ("pause", "Pause the heartbeat."),
                ("resume", "Resume the paused heartbeat."),
                ("stop", "Stop and remove the heartbeat."),
                ("status", "The heartbeat and its next run."),
            )
        ),
    ),
)

# ---------------------------------------------------------------- /context (project-context.md)


async def _context(host: CommandHost, session_id: str, values: dict[str, Any]) -> ContextReport:
    return context_report(host.runtime, session_id)  # type: ignore[arg-type]


# ---------------------------------------------------------------- /model (pairing.md, 2)


async def _model(host: CommandHost, session_id: str, values: dict[str, Any]) -> ModelList:
    agent = host.runtime.agents.get(session_id)
    if agent is None:
        raise CommandError(409, "The agent is not open: open its notebook to change its model.")
    if values["name"] is None:
        return model_list(host.runtime, agent)
    try:
        return await switch_model(host.runtime, agent, values["name"])
    except ModelSwitchError as exc:
        raise CommandError(exc.status, exc.message) from None


_MODEL = Command(
    "model",
    "The model this session runs on and the ones it may switch to (rlm.find_models()).",
    (
        Form(
            "Alone, the model and the choices; with a name, switch from the next model call.",
            "models",
            _model,
            arguments=(Argument("name", "text", "`provider/model` or a model name"),),
        ),
    ),
)


COMMANDS: tuple[Command, ...] = (
    Command(
        "help", "List the chat commands.", (Form("Each command and its forms.", "help", _help),)
    ),
    Command(
        "tree",
        "The session's tree: branch to a message or a turn's end, fork, clone.",
        (Form("Show the tree of user messages and turn ends.", "tree", _tree),),
    ),
    Command(
        "fork",
        "A new session and notebook from before the newest message of this branch.",
        (Form("Fork; the message waits in the new session's input.", "copy", _fork),),
    ),
    Command(
        "clone",
        "A new session and notebook with the whole current branch.",
        (Form("Clone the current branch.", "copy", _clone),),
    ),
    Command(
        "refine",
        "Refine the agent's harness (notes, memories, skills), roll a refinement back, or list.",
        (
            Form(
                "Plan a refinement in the background; it applies at the next turn boundary.",
                "note",
                _refine,
                arguments=(_GLOBAL, Argument("instructions", "text", "what to refine, if given")),
            ),
            Form(
                "Roll a refinement back (recorded as a new refinement).",
                "note",
                _rollback,
                keyword="rollback",
                arguments=(
                    Argument(
                        "id",
                        "word",
                        "the refinement's id",
                        ask="Which refinement? (/refine history lists them with a Rollback "
                        "button each.)",
                    ),
                    Argument("global", "flag", "accepted for symmetry: the id finds its store"),
                ),
            ),
            Form(
                "The recent refinements, each with a Rollback button.",
                "refinements",
                _refinements,
                keyword="history",
            ),
        ),
    ),
    Command(
        "goal",
        "Keep the agent on an objective until it calls goal.complete() (docs/autonomy.md).",
        (
            Form(
                "Set the goal (an idle agent starts on it); alone, the goal's status.",
                "note",
                _goal_set,
                arguments=(
                    Argument(
                        "budget",
                        "option",
                        "input + output tokens it may use, sub-agents' included",
                        value="N",
                        value_type=int,
                    ),
                    Argument("objective", "text", "what to achieve"),
                ),
            ),
            Form("The goal, its budget used and left.", "note", _goal_status, keyword="status"),
            Form("Stop continuing the goal.", "note", _goal_change("pause"), keyword="pause"),
            Form(
                "Continue a paused goal (an idle agent goes on).",
                "note",
                _goal_change("resume"),
                keyword="resume",
            ),
            Form("Drop the goal.", "note", _goal_change("clear"), keyword="clear"),
        ),
    ),
    Command(
        "usage",
        "Tokens and cost of this agent and each of its sub-agents, own and in total.",
        (Form("Usage per agent of the tree below this one.", "usage", _usage),),
    ),
    _HEARTBEAT,
    _MODEL,
    Command(
        "context",
        "What the system prompt holds, part by part, with sources and sizes; trust project files.",
        (
            Form(
                "The prompt's parts in order (base, sub-agents, harness, project files, ...), "
                "each with its source, characters and estimated tokens; a Trust button for "
                "each untrusted project file.",
                "context",
                _context,
            ),
        ),
    ),
)

BY_NAME: dict[str, Command] = {command.name: command for command in COMMANDS}


async def run_command(host: CommandHost, session_id: str, name: str, text: str) -> CommandReply:
    """Run `/name text` for a session; a CommandError says why it cannot."""
    command = BY_NAME.get(name)
    if command is None:
        raise CommandError(404, f"no chat command /{name[:40]}; /help lists them")
    form, values = command.parse(text)
    runtime = host.runtime
    if session_id not in runtime.agents and not runtime.repository.exists(session_id):
        raise CommandError(404, f"no session {shorten(session_id, 80)}")
    answer = await form.run(host, session_id, values)
    return {"command": name, "form": form.keyword, "view": form.view, "answer": answer}


# ---------------------------------------------------------------- TypeScript generation

_ALIASES: dict[str, object] = {"ArgumentKind": ArgumentKind, "CommandView": CommandView}
_INTERFACES: list[type] = [
    ArgumentSpec,
    FormSpec,
    CommandSpec,
    CommandList,
    CommandNote,
    AgentUsage,
    McpServerView,
    ProjectFileInfo,
    PromptPart,
    ContextReport,
]


def _ts_type(annotation: object) -> str:
    for name, alias in _ALIASES.items():
        if annotation == alias:
            return name
    return wire.ts_type(annotation)


def _ts_interface(cls: type) -> str:
    lines = []
    if cls.__doc__ and not cls.__doc__.startswith(f"{cls.__name__}("):
        lines.append(f"/** {' '.join(cls.__doc__.split())} */")
    lines.append(f"export interface I{cls.__name__} {{")
    optional = cls.__optional_keys__  # type: ignore[attr-defined]
    for field, annotation in typing.get_type_hints(cls).items():
        lines.append(f"  {field}{'?' if field in optional else ''}: {_ts_type(annotation)};")
    lines.append("}")
    return "\n".join(lines)


def typescript() -> str:
    """The contents of `labextension/src/commands.ts`."""
    from_wire = sorted(
        wire.ts_type(answer) for answer in VIEWS.values() if answer.__module__ == wire.__name__
    )
    answers = "\n".join(f"  {view}: {_ts_type(answer)};" for view, answer in VIEWS.items())
    table = json.dumps([command.spec() for command in COMMANDS], indent=2, ensure_ascii=False)
    parts = [
        "/**\n"
        ' * The chat commands (docs/architecture.md, "Chat commands").\n'
        " *\n"
        " * GENERATED from prime_agent_lab/core/commands.py; do not edit. Regenerate with\n"
        " *   python -m prime_agent_lab.core.commands --ts > labextension/src/commands.ts\n"
        " */",
        f"import type {{ {', '.join(from_wire)} }} from './wire';",
        *(f"export type {name} = {wire.ts_type(alias)};" for name, alias in _ALIASES.items()),
        *(_ts_interface(cls) for cls in _INTERFACES),
        f"/** The answer each view shows. */\nexport interface ICommandAnswers {{\n{answers}\n}}",
        "/** Answer of `POST .../commands/<name>`: the view and its answer. */\n"
        "export type CommandReply = {\n"
        "  [V in CommandView]: {\n"
        "    command: string;\n"
        "    form: string | null;\n"
        "    view: V;\n"
        "    answer: ICommandAnswers[V];\n"
        "  };\n"
        "}[CommandView];",
        f"/** Every chat command, in the order `/help` lists them. */\n"
        f"export const CHAT_COMMANDS: readonly ICommandSpec[] = {table};",
    ]
    return "\n\n".join(parts) + "\n"


def main(argv: list[str]) -> int:
    if argv != ["--ts"]:
        print("usage: python -m prime_agent_lab.core.commands --ts > labextension/src/commands.ts")
        return 2
    sys.stdout.write(typescript())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
