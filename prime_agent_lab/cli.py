"""`prime-agent-lab`: run the agent headless (`run`) or start JupyterLab on the demo (`lab`).

`run` uses the same agent loop as the server, with a notebook file in the current directory, a
local kernel (or one on a Jupyter gateway), and a small HTTP server for the kernel bridge.

Size: the flags (made from the declared settings), the checks that refuse bad arguments before
anything starts (exit 2), the run's printer and `lab`'s launcher are one command line's parts.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import logging
import os
import shutil
import signal
import sys
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, TextIO

from . import agents_cli, export_script, schedule_cli, sessions_cli
from .core import settings
from .core.autonomy import SUCCESS as AUTONOMY_SUCCESS
from .core.entry_types import TOLD_AS_MESSAGES
from .core.events import Event
from .core.gates import parse_gate
from .core.gateway_url import url_problem
from .core.host_port import host_and_port
from .core.jsonfile import UnreadableFile
from .core.mcp.sources import unreadable_cli_files
from .core.sessions import SessionLog
from .core.settings import CLI, Declared, declared, help_text
from .core.stop_cause import USER_STOP, StopCause, terminated
from .core.text import printable
from .version import __version__

DEMO_NOTEBOOK = Path(__file__).parent / "demo" / "prime-agent-demo.ipynb"


def _provider_choices() -> list[str]:
    """Every installed provider's name, also one that cannot be used (choosing it says why)."""
    from .core.installed_providers import installed

    found = installed()
    return sorted([*found.names, *found.problems])


CHOICES = {  # settings whose values the CLI can list
    "provider": _provider_choices,
    "permission": lambda: list(settings.PERMISSION_MODES),
}


def _add_setting_flags(parser: argparse.ArgumentParser, names: tuple[str, ...] = ()) -> None:
    """The flags of the declared settings the CLI exposes (core/settings.py), or of `names`."""
    for setting in declared(CLI):
        if names and setting.name not in names:
            continue
        help = help_text(setting.name, CLI).replace("%", "%%")
        if setting.type is bool:  # `--stream` / `--no-stream`, and so for each alias
            parser.add_argument(
                *setting.flags,
                dest=setting.name,
                action=argparse.BooleanOptionalAction,
                default=setting.default,
                help=help,
            )
            continue
        if setting.type in (tuple[str, ...], tuple[str, ...] | None):  # repeated: one per value
            parser.add_argument(
                *setting.flags,
                dest=setting.name,
                action=_AppendToTuple,
                default=setting.default,
                metavar=_metavar(setting),
                help=f"{help} (repeatable)",
            )
            continue
        constants = setting.spec.cli_constants
        group: Any = parser.add_mutually_exclusive_group() if constants else parser
        choices = CHOICES[setting.name]() if setting.name in CHOICES else None
        group.add_argument(
            *setting.flags,
            dest=setting.name,
            type=_parser_of(setting.name),
            choices=choices,
            default=setting.default,
            metavar=None if choices else _metavar(setting),
            help=f"{help} (default: %(default)s)" if setting.default not in (None, "") else help,
        )
        for flag, value in constants:
            group.add_argument(
                flag,
                dest=setting.name,
                action="store_const",
                const=value,
                default=setting.default,
                help=f"same as {setting.flags[0]} {value}",
            )


class _AppendToTuple(argparse.Action):
    """A repeatable flag of a list setting: each use adds one value to the tuple."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        setattr(namespace, self.dest, (*(getattr(namespace, self.dest, None) or ()), values))


def _metavar(setting: Declared) -> str:
    """`N`, `NUMBER`, or the last word of the flag (`--harness-dir DIR`)."""
    return {int: "N", float: "NUMBER"}.get(setting.type) or setting.flags[0].split("-")[-1].upper()


def _parser_of(name: str) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            return settings.parse(name, text)
        except ValueError as exc:  # argparse prefixes the flag: "argument --cell-timeout: ..."
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def _settings_of(args: argparse.Namespace) -> Any:
    """The settings of a `run`, spelled for the CLI in messages."""
    return settings.Settings(host=CLI, **{s.name: getattr(args, s.name) for s in declared(CLI)})


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="prime-agent-lab",
        description="A Recursive Language Model agent whose REPL is a Jupyter notebook.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser(
        "run",
        help="run one agent turn headless in the current directory",
        description="Run one agent turn headless. The notebook and the session files are "
        "written in the current directory.",
    )
    run.add_argument("prompt", help="what to ask the agent")
    run.add_argument("--mode", default="text", choices=("text", "json"), help="output format")
    run.add_argument("--notebook", default="agent.ipynb", help="notebook to write cells into")
    run.add_argument("--session", default=None, help="continue this session id")
    run.add_argument(
        "--continue",
        dest="resume",
        action="store_true",
        help="continue the newest session of the notebook",
    )
    run.add_argument(
        "--resume",
        dest="resume_session",
        metavar="SESSION",
        default=None,
        help="continue SESSION (a session directory or id) in its own notebook, with its "
        "kernel variables restored from its last snapshot",
    )
    run.add_argument(
        "--trust",
        action="store_true",
        help="trust the continued session's folder and its sub-agents' (a kernel snapshot, local "
        "harness or queued mail this user did not sign) and load it; see docs/trust.md",
    )
    run.add_argument(
        "--trust-project",
        action="store_true",
        help="trust the project's context files (AGENTS.md, ...) and .mcp.json files from the "
        "notebook's folder up to this folder as they are now, and list them; see "
        "docs/project-context.md",
    )
    _add_setting_flags(run)

    lab = commands.add_parser(
        "lab",
        help="start JupyterLab with the agent and a demo notebook",
        description="Start JupyterLab in the current directory with Prime Agent Lab and a demo "
        "notebook (none with a script of your own). Extra arguments go to `jupyter lab`.",
    )
    _add_setting_flags(lab, ("provider", "model", "script_path"))
    schedule_cli.add_parser(commands)  # heartbeats and schedules: docs/autonomy.md
    sessions_cli.add_parser(commands)  # the session list from the terminal: docs/pairing.md
    export_script.add_parser(commands)  # a session as a scripted replay: docs/providers.md
    agents_cli.add_parsers(commands)  # `agents`, `send` to a running server: docs/agents-view.md
    return parser


# ---------------------------------------------------------------- run


class _Printer:
    """Turns agent events into text lines or JSON lines.

    When the reader goes away (`... | head -1`), printing stops quietly and `on_closed` is called
    once; nothing is raised into the agent loop.
    """

    def __init__(self, mode: str, out: TextIO, on_closed: Callable[[], None] = lambda: None):
        self.mode = mode
        self.out = out
        self.closed = False
        self._on_closed = on_closed
        self._in_text = False

    def __call__(self, event: Event) -> None:
        if self.mode == "json":
            self.emit(event)
            return
        kind = event["type"]
        if kind == "text_delta":
            self._write(event["text"])
            self._in_text = True
        elif kind == "cell_started":
            self._line(f"▶ cell [{event['cell_id']}]\n" + _indent(event["code"]))
        elif kind == "cell_finished":
            preview = f": {event['preview']}" if event.get("preview") else ""
            self._line(f"  {event['status']} [{event.get('execution_count')}]{preview}")
        elif kind == "retry":
            self._line(f"  retrying in {event['delay']:.1f} s ({event['message']})")
        elif kind == "error":
            self._line(f"  error: {event['message']}")
        elif kind in ("turn_started", "agent_message") and event.get("from_name"):
            self._line(f"◀ {_message_line(event)}")
        elif kind == "child_spawned":
            self._line(f"  sub-agent {event['name']} started: {event['notebook_path']}")
        elif kind == "child_status" and event["status"] in FINAL_CHILD_STATUSES:
            self._line(f"  sub-agent {event['name']}: {event['status']}")
        elif kind == "notice" and event.get("kind") not in TOLD_AS_MESSAGES:
            self._line(f"  note: {printable(event['text'], keep_newlines=True)}")
        elif kind == "heartbeat":
            self._line(f"  heartbeat {event['label']!r} ({event['schedule_id']}): {event['phase']}")
        elif kind == "turn_ended":
            self.finish()
        self._write("")

    def _line(self, text: str) -> None:
        if self._in_text:
            self._write("\n")
            self._in_text = False
        self._write(text + "\n")

    def emit(self, record: dict[str, Any]) -> None:
        self._write(json.dumps(record, ensure_ascii=False) + "\n")

    def text(self, text: str) -> None:
        self._write(text)

    def recovered(self, turn: int) -> None:
        """The previous run was cut by a crash (or a kill) and its turn was closed now."""
        text = (
            f"turn {turn} was cut while the process was stopped; it is marked interrupted and the "
            "model is told what its running cell had printed"
        )
        if self.mode == "json":
            self.emit({"type": "recovered", "turn": turn, "text": text})
        else:
            self._line(f"  note: {text}")

    def finish(self) -> None:
        if self._in_text:
            self._write("\n")
            self._in_text = False

    def _write(self, text: str) -> None:
        if self.closed:
            return
        try:
            if text:
                self.out.write(text)
            self.out.flush()
        except BrokenPipeError:
            self._close()

    def _close(self) -> None:
        self.closed = True
        # Point the descriptor at /dev/null, so the interpreter's last flush cannot fail either.
        with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.out.fileno())
            os.close(devnull)
        self._on_closed()


FINAL_CHILD_STATUSES = ("replied", "completed", "error", "stopped")
MESSAGE_LINE_CHARS = 200


def _message_line(event: Event) -> str:
    """`message from child part-a: <first line of the body>` (the model's header line, which
    names the sender and the time, is left out)."""
    lines = event["text"].splitlines()
    if lines and lines[0].startswith("[message from "):
        lines = lines[1:]
    body = next((line.strip() for line in lines if line.strip()), "")
    sender = f"{event.get('relationship', '')} {event['from_name']}".strip()
    if len(body) > MESSAGE_LINE_CHARS:
        body = body[: MESSAGE_LINE_CHARS - 1] + "…"
    return printable(f"message from {sender}: {body}")


def _indent(code: str) -> str:
    return "\n".join(f"    {line}" for line in code.splitlines())


class _TurnStopper:
    """Stops the running turn like the chat's Stop button, remembering why (SIGINT, SIGTERM, a
    closed output). Partial output stays in the notebook and the turn gets its `turn_end`: SIGTERM
    ends the run (`stop_reason` "shutdown", notes that say the run was terminated), the others
    are the user's stop."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self.cause: StopCause = USER_STOP
        self._stop: Callable[[StopCause], Awaitable[Any]] | None = None
        self._stopping: set[asyncio.Future[Any]] = set()

    def watch(self, stop: Callable[[StopCause], Awaitable[Any]]) -> None:
        """`stop` ends the turn the way the chat's Stop button does (the agent's own cell is
        withdrawn or interrupted, its output and the turn_end recorded)."""
        self._stop = stop
        if self.reason is not None:
            self._request_stop()

    def __call__(self, reason: str, cause: StopCause = USER_STOP) -> None:
        if self.reason is not None:  # already stopping: a second signal must not cut the cleanup
            return
        self.reason, self.cause = reason, cause
        self._request_stop()

    def _request_stop(self) -> None:
        if self._stop is not None:
            future = asyncio.ensure_future(self._stop(self.cause))
            self._stopping.add(future)
            future.add_done_callback(self._stopping.discard)


async def _finish_refinements(run: Any, stopper: _TurnStopper) -> None:
    """A review or refinement the agent asked for is applied and recorded before the run ends
    (it waits for its model call); Ctrl-C drops it, and the run still counts as done."""
    if not run.runtime.refiners.pending():
        return
    print("prime-agent-lab: finishing a harness refinement (Ctrl-C drops it)", file=sys.stderr)
    finishing = asyncio.ensure_future(run.runtime.refiners.finish())

    async def drop(cause: StopCause) -> None:
        finishing.cancel()

    stopper.watch(drop)
    with contextlib.suppress(asyncio.CancelledError):
        await finishing


async def _run(args: argparse.Namespace, out: TextIO) -> int:
    stopper = _TurnStopper()
    # Catch Ctrl-C from the start: one while the run is still loading stops it like any other.
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM)
    loop.add_signal_handler(signal.SIGINT, stopper, "stopped by SIGINT")
    loop.add_signal_handler(signal.SIGTERM, stopper, "terminated by SIGTERM", terminated("SIGTERM"))
    from .adapters.withhold_keys import withhold_keys
    from .headless import HeadlessRun

    # Before the kernel starts: it must neither inherit the keys nor read them from this process.
    withheld = withhold_keys(None)  # every installed provider's key variables
    logging.getLogger(__name__).info("%s", withheld.summary())
    printer = _Printer(
        args.mode, out, lambda: stopper("the output was closed, so the turn was stopped")
    )
    cwd = Path.cwd()
    run = HeadlessRun(
        cwd=cwd,
        notebook=args.notebook,
        settings=_settings_of(args),
        session_id=args.session,
        resume=args.resume,
        keys=withheld.keys,
        trust=args.trust,
        trust_project=args.trust_project,
    )
    outcome = None
    error: str | None = None
    unsaved: str | None = None  # a notebook that could not be saved at the end
    settled = False
    stopped: str | None = None  # why the turns were stopped (a later signal drops refinements)
    announced = False

    def announce(provider: Any, session: Any) -> None:
        nonlocal announced
        announced = True
        _announce(args, printer, provider, session, withheld.keys, run.kernel_source())

    try:
        await run.start(printer, announce)
        for line in run.project_lines:  # trusted now, or untrusted and not used
            print(line, file=sys.stderr)
        if run.recovered_turn is not None:
            printer.recovered(run.recovered_turn)
        _permission_of_run(args, run)
        if args.autonomous:
            run.start_autonomy()
        turn = asyncio.ensure_future(run.agent.run_turn(args.prompt))
        stopper.watch(run.runtime.stop_all)
        outcome = await run.settle(await turn)
        settled, stopped = True, stopper.reason
        if stopped is None:
            await _finish_refinements(run, stopper)
    except Exception as exc:  # reported as a clear message and a non-zero exit
        error = _error_text(exc)
    finally:
        for signum in signals:
            loop.remove_signal_handler(signum)
        try:
            await run.close()
        except Exception as exc:  # a notebook that cannot be saved (a full disk)
            unsaved = _error_text(exc)
    printer.finish()
    if args.mode == "json" and not announced:  # the run failed before it knew its session
        printer.emit(_unstarted_record(run))
    if not settled:
        stopped = stopper.reason
    # A run stopped by a signal is not a success even when the root had already answered:
    # the sub-agents still working were cut.
    ok = outcome is not None and outcome.stop_reason == "end_turn" and stopped is None
    autonomous = run.autonomy_end() if args.autonomous and settled else None
    if autonomous is not None:
        ok = autonomous["reason"] in AUTONOMY_SUCCESS and stopped is None  # exit status 0
        if error is None and not ok and stopped is None:
            cause = outcome.error if outcome is not None and autonomous["reason"] == "error" else ""
            error = f"{cause} (the {autonomous['line']})" if cause else f"the {autonomous['line']}"
    if error is None and not ok:
        if stopped is not None:
            error = stopped
        elif outcome is not None:
            limit = outcome.final_text if outcome.stop_reason == "max_iterations" else ""
            error = outcome.error or limit or f"the turn ended with {outcome.stop_reason}"
    if unsaved is not None:
        ok, error = False, "; ".join(e for e in (error, unsaved) if e)
    if error and run.snapshot_failures:  # the same cause, most often: one line says both
        error = "; ".join([error, *run.snapshot_failures])
    elif run.snapshot_failures:
        for failure in run.snapshot_failures:
            print(f"prime-agent-lab: warning: {failure}", file=sys.stderr)
    record = {
        "type": "run_end",
        "ok": ok,
        "notebook": _relative(run.notebook_path, cwd),
        "session_dir": _relative(run.session_dir, cwd) if run.session_dir else None,
        "final_text": outcome.final_text if outcome else "",
    }
    if error:
        record["error"] = error
    if autonomous is not None:
        record["reason"], record["autonomy"] = autonomous["reason"], autonomous["used"]
    elif args.autonomous:
        record["reason"] = "stopped" if stopped is not None else "error"
    if autonomous is not None and args.mode == "text" and ok:
        printer.text(f"\n{autonomous['line']}")
    if args.mode == "json":
        printer.emit(record)
    if error:
        if args.mode != "json" or printer.closed:
            print(f"prime-agent-lab: {error}", file=sys.stderr)
    elif args.mode == "text":
        printer.text(f"\nnotebook: {record['notebook']}\nsession: {record['session_dir']}\n")
    return 0 if ok else 1


# ---------------------------------------------------------------- which model answers


def _announce(
    args: argparse.Namespace,
    printer: _Printer,
    provider: Any,
    session: Any,
    held: Iterable[str],
    kernels: dict[str, str],
) -> None:
    """Say which provider and model answer and where the kernels run, before the agent's first
    event: a `run_start` record in JSON mode, lines on stderr in text mode; and, on stderr in
    both, that the scripted demo answers when a provider's key is set but no provider was
    chosen."""
    name, model = printable(provider.name), printable(provider.model)
    if args.mode == "json":
        record = {"type": "run_start", "provider": provider.name, "model": provider.model}
        printer.emit({**record, "session_id": session.session_id, "kernels": kernels})
    else:
        print(f"prime-agent-lab: provider {name}, model {model}", file=sys.stderr)
        print(f"prime-agent-lab: {kernels_line(kernels)}", file=sys.stderr)
    warning = _demo_warning(args, held)
    if warning is not None:
        print(f"prime-agent-lab: {warning}", file=sys.stderr)


def _unstarted_record(run: Any) -> dict[str, Any]:
    """`run_start` of a run that failed before its session opened (the kernel could not
    start): the provider and model as configured, no session, where the kernels were to run."""
    settings = run.settings
    return {
        "type": "run_start",
        "provider": settings.provider,
        "model": settings.model,
        "session_id": None,
        "kernels": run.kernel_source(),
    }


def kernels_line(kernels: dict[str, str]) -> str:
    """`kernels local (python3)`, `kernels on the gateway http://gw:8888 (python3)`."""
    spec = printable(kernels["kernel_name"])
    if kernels["source"] == "gateway":
        return f"kernels on the gateway {printable(kernels['url'])} ({spec})"
    return f"kernels local ({spec})"


def _demo_warning(args: argparse.Namespace, held: Iterable[str]) -> str | None:
    """When the demo answers although a real provider's key is set (never the key itself)."""
    from .core.installed_providers import installed

    found = installed()
    chosen = found.plugins.get(args.provider)
    if args.provider_given or args.script_path or chosen is None or chosen.key_variables:
        return None  # a provider or a script the user chose
    names = set(held)
    keys = [v for v in found.key_variables() if v in names]
    real = [n for n, p in sorted(found.plugins.items()) if names & set(p.key_variables)]
    if not keys or not real:
        return None
    flag = settings.spell("provider", CLI)
    choose = " or ".join(f"{flag} {name}" for name in real)
    verb = "is" if len(keys) == 1 else "are"
    return (
        f"{', '.join(keys)} {verb} set, but no {flag} was given: the scripted demo model "
        f"answers, not a real one; choose the real one with {choose}"
    )


# ---------------------------------------------------- permission modes (docs/pairing.md 4)


def _ask_refused(stdin: TextIO | None) -> str | None:
    from .cli_approval import stdin_problem

    problem = stdin_problem(stdin)
    if problem is None:
        return None
    return (
        f"cannot ask for approval of cells: {problem}. Run in a terminal, pipe the answers "
        f"in, or choose {settings.spell('permission', CLI)} auto or plan"
    )


def _permission_of_run(args: argparse.Namespace, run: Any) -> None:
    """A `--permission` given on the command line is the session's mode from now on (else the
    session keeps its own); in ask mode the terminal answers the cells waiting for approval."""
    from .cli_approval import TerminalApprover

    agent = run.agent
    if _setting_given("permission", args.words):
        agent.set_permission(args.permission)
    if agent.permission.mode != "ask":
        return
    refused = _ask_refused(sys.stdin)
    if refused is not None:
        raise RuntimeError(refused)
    TerminalApprover(run.runtime.agent).watch(agent)


def _continued_session(args: argparse.Namespace, cwd: Path) -> SessionLog | None:
    """The session the run will continue, read before anything starts; None when there is
    none (yet), or the run will say why it cannot be read. A linked session folder is never
    followed (docs/trust.md): ValueError."""
    from .core.sessions import LinkedSession, SessionError, SessionRepository
    from .headless import session_notebook

    root = cwd / ".prime-agent" / "sessions"
    if not root.is_dir():
        return None
    repository = SessionRepository(root)
    session_id = args.session
    if session_id is None and args.resume:
        session_id = repository.latest_for_notebook(session_notebook(cwd, cwd / args.notebook))
    if session_id is None:
        return None
    try:
        return repository.read(session_id)
    except LinkedSession as exc:
        raise ValueError(f"cannot continue: {exc}") from None
    except SessionError:
        return None


def _continued_mode(args: argparse.Namespace, session: SessionLog | None) -> str | None:
    """The mode a continued `session` will start in when `--permission` is not given (as the
    agent's `_start_permission` finds it), or None."""
    from .core.permission import lowest, recorded_mode

    if session is None or _setting_given("permission", args.words):
        return None
    recorded = recorded_mode(session)
    return lowest(recorded or args.permission, _settings_of(args).max_permission)


def _setting_given(name: str, words: list[str]) -> bool:
    """Whether the command line gives the setting `name` (its flag, `--flag=x`, or an
    abbreviation argparse accepts)."""
    flags = settings.DECLARED[name].flags
    for word in words:
        if word == "--":
            return False
        option = word.split("=", 1)[0]
        if len(option) > 2 and option.startswith("--") and any(f.startswith(option) for f in flags):
            return True
    return False


def _provider_given(words: list[str]) -> bool:
    """Whether the command line names a provider (`--provider`, `--provider=x`, or an
    abbreviation argparse accepts)."""
    flags = settings.DECLARED["provider"].flags
    for word in words:
        if word == "--":
            return False
        option = word.split("=", 1)[0]
        if len(option) > 2 and option.startswith("--") and any(f.startswith(option) for f in flags):
            return True
    return False


def _error_text(exc: BaseException) -> str:
    """One line for the user: the message of our own errors, a plain sentence for a full disk,
    the exception's type and message for anything else."""
    from .adapters.file_notebook import NotebookNotSaved
    from .adapters.model_choice import ProviderUnavailable
    from .core.sessions import SessionWriteError
    from .core.whole_writes import is_disk_full
    from .headless import KernelStartError

    own = (
        SessionWriteError,
        NotebookNotSaved,
        UnreadableFile,
        ProviderUnavailable,
        KernelStartError,
    )
    if isinstance(exc, own) or str(exc).startswith("cannot"):
        return str(exc)
    if isinstance(exc, OSError) and is_disk_full(exc):
        where = f" ({exc.filename})" if exc.filename else ""
        return f"the disk is full: {exc.strerror}{where}"
    return f"{type(exc).__name__}: {exc}"


def _relative(path: Path, cwd: Path) -> str:
    try:
        return str(path.resolve().relative_to(cwd.resolve()))
    except ValueError:
        return str(path.resolve())


# ---------------------------------------------------------------- lab


DEMO_STEP_DELAY = 1.0  # seconds per scripted step: slow enough to watch, and to try Stop
NEWS_SETTINGS = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false"}}


def _lab(args: argparse.Namespace, extra: list[str]) -> int:
    jupyter = shutil.which("jupyter")
    if jupyter is None:
        print("prime-agent-lab: `jupyter` is not on PATH; install jupyterlab", file=sys.stderr)
        return 2
    cwd = Path.cwd()
    script = _lab_script(args, extra)
    if script is not None:  # a script of one's own: its own notebooks, not the demo's
        problem = _unplayable(script)
        if problem is not None:
            print(f"prime-agent-lab: {problem}", file=sys.stderr)
            return 2
    demo = cwd / DEMO_NOTEBOOK.name if script is None else None
    if demo is not None and not demo.exists():
        shutil.copyfile(DEMO_NOTEBOOK, demo)
    state = cwd / ".prime-agent"
    state.mkdir(exist_ok=True)
    opened = [demo.name] if demo is not None else []
    as_root = hasattr(os, "geteuid") and os.geteuid() == 0
    options = _lab_options(args, extra, state, opened[0] if opened else None, as_root=as_root)
    if ROOT_OPTION in options:
        print(f"prime-agent-lab: running as root, passing {ROOT_OPTION}", file=sys.stderr)
    argv = [jupyter, "lab", *options, *opened]
    os.execve(jupyter, argv + extra, _lab_environment(state))
    return 0  # not reached


def _lab_script(args: argparse.Namespace, extra: list[str]) -> str | None:
    """The script of one's own `lab` plays (`--script`, or the server option among the extra
    arguments), or None for the bundled demo."""
    option = settings.server_option("script_path", "")
    given = [word[len(option) :] for word in extra if word.startswith(option)]
    return given[-1] if given else args.script_path  # the server option wins (_lab_options)


def _unplayable(script: str) -> str | None:
    from .providers.scripted import load_script

    try:
        load_script(script)
    except ValueError as exc:
        return str(exc)
    return None


def _lab_options(
    args: argparse.Namespace,
    extra: list[str],
    state: Path,
    demo: str | None,
    as_root: bool = False,
) -> list[str]:
    """`demo`: the demo notebook to open first (None: JupyterLab's own start page). An option
    the user gives among `extra` too is left out: theirs wins (traitlets refuses a second)."""
    options = [
        settings.server_option("provider", args.provider),
        f"--SQLiteYStore.db_path={state / 'ystore.db'}",
        f"--BaseFileIdManager.db_path={state / 'file_id_manager.db'}",
    ]
    if demo is not None:  # the URL printed (and opened) is the demo notebook's
        options.append(f"--LabApp.default_url=/lab/tree/{demo}")
    if args.model:
        options.append(settings.server_option("model", args.model))
    if args.script_path:
        options.append(settings.server_option("script_path", Path(args.script_path).resolve()))
    if args.provider == "scripted" and not any("step_delay" in a for a in extra):
        options.append(settings.server_option("step_delay", DEMO_STEP_DELAY))
    if as_root:  # root in a container: `jupyter lab` refuses to start as root without it
        options.append(ROOT_OPTION)
    given = {_option_name(word) for word in extra if word.startswith("--")}
    return [option for option in options if _option_name(option) not in given]


ROOT_OPTION = "--ServerApp.allow_root=True"


def _option_name(word: str) -> str:
    """`--Class.trait=value` or `--Class.trait` (its value the next word) as `Class.trait`."""
    return word[2:].split("=", 1)[0]


def _lab_environment(state: Path) -> dict[str, str]:
    """The environment for `jupyter lab`: a config directory of our own first on the config path,
    holding default settings for this launch only (JupyterLab does not ask about its news feed,
    whose toast would cover the chat input). Settings the user changed still win."""
    config = state / "jupyter-config"
    labconfig = config / "labconfig"
    labconfig.mkdir(parents=True, exist_ok=True)
    (labconfig / "default_setting_overrides.json").write_text(
        json.dumps(NEWS_SETTINGS, indent=2) + "\n", encoding="utf-8"
    )
    env = dict(os.environ)
    rest = env.get("JUPYTER_CONFIG_PATH")
    env["JUPYTER_CONFIG_PATH"] = os.pathsep.join([str(config), *([rest] if rest else [])])
    return env


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if args.command == "lab":
        return _lab(args, extra)
    if args.command == "schedule":
        if extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        try:
            return schedule_cli.run(args, sys.stdout)
        except schedule_cli.ScheduleCommandError as exc:
            print(f"prime-agent-lab schedule: {exc}", file=sys.stderr)
            return 1
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command == "sessions":
        return sessions_cli.run(args, sys.stdout)
    if args.command == "export-script":
        return export_script.run_cli(args, sys.stdout, sys.stderr)
    if args.command in ("agents", "send"):
        try:
            return agents_cli.run(args, sys.stdout)
        except agents_cli.AgentsCommandError as exc:
            print(f"prime-agent-lab {args.command}: {exc}", file=sys.stderr)
            return 1
    words = sys.argv[1:] if argv is None else argv
    args.provider_given = _provider_given(words)
    args.words = words
    if args.permission == "ask" and (refused := _ask_refused(sys.stdin)) is not None:
        parser.error(refused)
    if any(word.startswith("--autonomous-") for word in words):
        args.autonomous = True  # any --autonomous-* flag turns it on
    for gate in args.autonomous_gates:
        try:
            parse_gate(gate)
        except (ValueError, SyntaxError) as exc:
            parser.error(f"{settings.spell('autonomous_gates', CLI)} {gate!r}: {exc}")
    try:
        host_and_port(args.bridge_listen)
    except ValueError as exc:
        parser.error(f"{settings.spell('bridge_listen', CLI)} {exc}")
    gateway_url = args.gateway_url or os.environ.get("JUPYTER_GATEWAY_URL")
    token_setting = f"{settings.spell('gateway_auth_token', CLI)} (or JUPYTER_GATEWAY_AUTH_TOKEN)"
    if gateway_url and (problem := url_problem(gateway_url, token_setting)) is not None:
        parser.error(f"{settings.spell('gateway_url', CLI)} (or JUPYTER_GATEWAY_URL) {problem}")
    for problem in unreadable_cli_files(args.mcp_config_files or ()):  # docs/mcp.md
        parser.error(str(problem))
    if args.resume_session is not None:
        if args.session is not None or args.resume:
            parser.error("--resume SESSION cannot be combined with --session or --continue")
        try:
            args.session, args.notebook = resume_target(args.resume_session, Path.cwd())
        except ValueError as exc:
            parser.error(str(exc))
    try:
        continued = _continued_session(args, Path.cwd())
    except ValueError as exc:
        parser.error(str(exc))
    if _continued_mode(args, continued) == "ask" and (refused := _ask_refused(sys.stdin)):
        parser.error(refused)  # before the kernel starts or the session is written to
    return asyncio.run(_run(args, sys.stdout))


def resume_target(ref: str, cwd: Path) -> tuple[str, str]:
    """(session id, notebook) of `run --resume SESSION`: a session directory under this
    directory's `.prime-agent/sessions`, or the id of one."""
    from .core.sessions import LinkedSession, SessionError, SessionRepository

    repository = SessionRepository(cwd / ".prime-agent" / "sessions")
    given = Path(ref)
    if given.is_dir():
        if given.resolve().parent != repository.root.resolve():
            raise ValueError(
                f"--resume: {ref} is not a session of this directory (sessions live in "
                f"{repository.root}; run from the directory the session was made in)"
            )
        ref = given.resolve().name
    try:
        session = repository.read(ref)
    except LinkedSession as exc:
        raise ValueError(f"--resume: {exc}") from None
    except SessionError as exc:
        raise ValueError(f"--resume: no session {ref!r} here ({exc})") from None
    notebook = session.notebook_path
    # A session folder may come from someone else: its header never points the run's writes
    # outside this directory (an absolute path, `../..`, a link out).
    target = (cwd / notebook).resolve()
    if not notebook or not target.is_relative_to(cwd.resolve()):
        raise ValueError(
            f"--resume: the session's notebook {notebook!r} is not inside {cwd}; continue it "
            "from the directory that holds its notebook, or name one with --session ID "
            "--notebook PATH"
        )
    return session.session_id, notebook


if __name__ == "__main__":
    sys.exit(main())
