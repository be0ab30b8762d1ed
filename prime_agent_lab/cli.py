"""`prime-agent-lab`: run the agent headless (`run`) or start JupyterLab on the demo (`lab`).

`run` uses the same agent loop as the server, with a notebook file in the current directory, a
local kernel, and a small loopback HTTP server for the kernel bridge.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import sys
from pathlib import Path
from typing import Any, TextIO

from . import __version__
from .core.events import Event
from .providers import PROVIDER_NAMES

DEMO_NOTEBOOK = Path(__file__).parent / "demo" / "prime-agent-demo.ipynb"


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
    run.add_argument("--provider", default="scripted", choices=PROVIDER_NAMES)
    run.add_argument("--model", default=None, help="model name (default: the provider's)")
    run.add_argument("--script", default=None, help="script file for the scripted provider")
    run.add_argument("--mode", default="text", choices=("text", "json"), help="output format")
    run.add_argument("--notebook", default="agent.ipynb", help="notebook to write cells into")
    run.add_argument("--session", default=None, help="continue this session id")
    run.add_argument(
        "--continue",
        dest="resume",
        action="store_true",
        help="continue the newest session of the notebook",
    )
    run.add_argument("--cell-timeout", type=float, default=600.0, help="seconds per cell")
    run.add_argument("--output-cap", type=int, default=20_000, help="characters per output part")
    run.add_argument("--max-iterations", type=int, default=40, help="model calls per turn")
    run.add_argument("--no-stream", dest="stream", action="store_false", help="do not stream")
    run.add_argument("--kernel", default="python3", help="kernel spec name")

    lab = commands.add_parser(
        "lab",
        help="start JupyterLab with the agent and a demo notebook",
        description="Start JupyterLab in the current directory with Prime Agent Lab and a demo "
        "notebook. Extra arguments go to `jupyter lab`.",
    )
    lab.add_argument("--provider", default="scripted", choices=PROVIDER_NAMES)
    lab.add_argument("--model", default=None)
    return parser


# ---------------------------------------------------------------- run


class _Printer:
    """Turns agent events into text lines or JSON lines."""

    def __init__(self, mode: str, out: TextIO) -> None:
        self.mode = mode
        self.out = out
        self._in_text = False

    def __call__(self, event: Event) -> None:
        if self.mode == "json":
            self.emit(event)
            return
        kind = event["type"]
        if kind == "text_delta":
            self.out.write(event["text"])
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
        self.out.flush()

    def _line(self, text: str) -> None:
        if self._in_text:
            self.out.write("\n")
            self._in_text = False
        self.out.write(text + "\n")

    def emit(self, record: dict[str, Any]) -> None:
        self.out.write(json.dumps(record, ensure_ascii=False) + "\n")
        self.out.flush()

    def finish(self) -> None:
        if self._in_text:
            self.out.write("\n")
            self._in_text = False


def _indent(code: str) -> str:
    return "\n".join(f"    {line}" for line in code.splitlines())


async def _run(args: argparse.Namespace, out: TextIO) -> int:
    from .core.agent import AgentConfig
    from .headless import HeadlessRun

    printer = _Printer(args.mode, out)
    cwd = Path.cwd()
    config = AgentConfig(
        output_cap=args.output_cap,
        cell_timeout=args.cell_timeout,
        max_iterations=args.max_iterations,
    )
    run = HeadlessRun(
        cwd=cwd,
        notebook=args.notebook,
        provider=args.provider,
        model=args.model,
        script=args.script,
        stream=args.stream,
        kernel_name=args.kernel,
        config=config,
        session_id=args.session,
        resume=args.resume,
    )
    outcome = None
    error: str | None = None
    try:
        await run.start(printer)
        turn_task = asyncio.ensure_future(run.agent.run_turn(args.prompt))
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, turn_task.cancel)
        try:
            outcome = await turn_task
        except asyncio.CancelledError:
            await run.agent.stop()
            error = "stopped by the user"
        finally:
            loop.remove_signal_handler(signal.SIGINT)
    except Exception as exc:  # reported as a clear message and a non-zero exit
        error = f"{type(exc).__name__}: {exc}" if not str(exc).startswith("cannot") else str(exc)
    finally:
        await run.close()
    printer.finish()
    ok = outcome is not None and outcome.stop_reason == "end_turn"
    if outcome is not None and not ok:
        error = outcome.error or f"the turn ended with {outcome.stop_reason}"
    record = {
        "type": "run_end",
        "ok": ok,
        "notebook": _relative(run.notebook_path, cwd),
        "session_dir": _relative(run.session_dir, cwd) if run.session_dir else None,
        "final_text": outcome.final_text if outcome else "",
    }
    if error:
        record["error"] = error
    if args.mode == "json":
        printer.emit(record)
    elif error:
        print(f"prime-agent-lab: {error}", file=sys.stderr)
    else:
        out.write(f"\nnotebook: {record['notebook']}\nsession: {record['session_dir']}\n")
    return 0 if ok else 1


def _relative(path: Path, cwd: Path) -> str:
    try:
        return str(path.resolve().relative_to(cwd.resolve()))
    except ValueError:
        return str(path.resolve())


# ---------------------------------------------------------------- lab


def _lab(args: argparse.Namespace, extra: list[str]) -> int:
    jupyter = shutil.which("jupyter")
    if jupyter is None:
        print("prime-agent-lab: `jupyter` is not on PATH; install jupyterlab", file=sys.stderr)
        return 2
    cwd = Path.cwd()
    demo = cwd / DEMO_NOTEBOOK.name
    if not demo.exists():
        shutil.copyfile(DEMO_NOTEBOOK, demo)
    state = cwd / ".prime-agent"
    state.mkdir(exist_ok=True)
    argv = [
        jupyter,
        "lab",
        f"--PrimeAgentLab.provider={args.provider}",
        f"--SQLiteYStore.db_path={state / 'ystore.db'}",
        f"--BaseFileIdManager.db_path={state / 'file_id_manager.db'}",
        demo.name,
    ]
    if args.model:
        argv.append(f"--PrimeAgentLab.model={args.model}")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        print(
            "prime-agent-lab: running as root, passing --ServerApp.allow_root=True", file=sys.stderr
        )
        argv.append("--ServerApp.allow_root=True")
    os.execv(jupyter, argv + extra)
    return 0  # not reached


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if args.command == "lab":
        return _lab(args, extra)
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return asyncio.run(_run(args, sys.stdout))


if __name__ == "__main__":
    sys.exit(main())
