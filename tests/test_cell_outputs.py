"""One fold of cell output: the model, the CLI's `.ipynb` and the live document agree with nbclient.

The same cells run three times on real kernels: through nbclient (the reference: what it stores
in the notebook), through the headless CLI (its file notebook and the model's observations in the
session log) and through a real jupyter_server (the live Y document and the observations). What
legitimately differs is normalised away: execution counts (also inside tracebacks), output
metadata, and nbclient's one stream output per message (JupyterLab and both notebook writers merge
consecutive text of the same stream; nbformat means the same by both).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from prime_agent_lab.core.observation import build_observation
from prime_agent_lab.core.overwrites import overwritten
from prime_agent_lab.core.ports import ExecutionResult

from .conftest import run_turn, use_script
from .test_cli import cli, json_lines
from .test_server_e2e import live_agent_cells

CELLS: dict[str, str] = {
    "clear_wait_then_print_last": (
        "from IPython.display import clear_output\n"
        "print('old', flush=True)\n"
        "clear_output(wait=True)\n"
        "print('new')\n"
    ),
    "clear_wait_as_the_last_call": (
        "from IPython.display import clear_output\nprint('still shown')\nclear_output(wait=True)\n"
    ),
    "clear_at_once": (
        "from IPython.display import clear_output\n"
        "print('gone', flush=True)\n"
        "clear_output()\n"
        "print('after the clear')\n"
    ),
    "display_id_update": (
        "from IPython.display import display\n"
        "handle = display('first', display_id=True)\n"
        "print('between', flush=True)\n"
        "handle.update('second')\n"
    ),
    "display_id_shared_by_two_outputs": (
        "from IPython.display import display, update_display\n"
        "display('one', display_id='shared-id')\n"
        "display('two', display_id='shared-id')\n"
        "update_display('both updated', display_id='shared-id')\n"
    ),
    "progress_bar_with_carriage_returns": (
        "import time\n"
        "for percent in range(0, 101, 25):\n"
        "    print(f'\\rloading {percent:3d}%', end='', flush=True)\n"
        "    time.sleep(0.02)\n"
        "print()\n"
        "print('loaded')\n"
    ),
    "interleaved_stdout_and_stderr": (
        "import sys\n"
        "print('out 1', flush=True)\n"
        "print('err 1', file=sys.stderr, flush=True)\n"
        "print('out 2', flush=True)\n"
        "print('err 2', file=sys.stderr, flush=True)\n"
        "print('out 3', flush=True)\n"
    ),
    "rich_display_between_two_prints": (
        "from IPython.display import HTML, display\n"
        "print('before', flush=True)\n"
        "display(HTML('<b>rich</b>'))\n"
        "print('after')\n"
    ),
    "result_after_a_print": "print('computing', flush=True)\n6 * 7\n",
    "error_after_a_print": "print('about to fail', flush=True)\nraise ValueError('boom')\n",
}
CASES = list(CELLS)
ERRORS = {"error_after_a_print"}

_EXECUTION_COUNT_IN_TRACEBACK = re.compile(r"In ?\[\d+\]")


def normalised(outputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Outputs as the notebook means them, without what legitimately differs between runs."""
    merged: list[dict[str, Any]] = []
    for output in outputs:
        output = {k: v for k, v in output.items() if k not in ("execution_count", "metadata")}
        output.pop("transient", None)
        if output["output_type"] == "stream":
            text = "".join(output["text"]) if isinstance(output["text"], list) else output["text"]
            last = merged[-1] if merged else None
            if (
                last is not None
                and last["output_type"] == "stream"
                and last["name"] == output["name"]
            ):
                last["text"] += text
                continue
            output["text"] = text
        if output["output_type"] == "error":
            output["traceback"] = [without_counts(line) for line in output["traceback"]]
        merged.append(output)
    return merged


def as_jupyterlab_keeps(outputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """nbclient's outputs as JupyterLab keeps them in a cell it runs itself: carriage returns and
    backspaces applied to the stream text (the live document is JupyterLab's)."""
    return [
        {**o, "text": overwritten(o["text"])} if o["output_type"] == "stream" else o
        for o in outputs
    ]


def without_counts(text: str) -> str:
    return _EXECUTION_COUNT_IN_TRACEBACK.sub("In [N]", text)


def expected_observation(case: str, reference: list[dict[str, Any]]) -> str:
    """What the model must see: the observation of nbclient's outputs for the cell."""
    result = ExecutionResult(
        status="error" if case in ERRORS else "ok",
        outputs=[dict(o) for o in reference],
    )
    observation = build_observation(result, cap=20_000, accepts_images=False, where_rest="")
    return without_counts(observation.text)


def observations(session_file: Path) -> list[str]:
    entries = [json.loads(line) for line in session_file.read_text().splitlines() if line]
    return [without_counts(e["observation"]) for e in entries if e["type"] == "tool_result"]


def script_running_every_case() -> dict[str, Any]:
    return {"turns": [{"tool_calls": [{"code": CELLS[c]} for c in CASES]}, {"text": "done"}]}


@pytest.fixture(scope="module")
def reference() -> dict[str, list[dict[str, Any]]]:
    """What nbclient stores for each cell, run in one notebook on one kernel."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(CELLS[c]) for c in CASES]
    NotebookClient(nb, kernel_name="python3", timeout=60, allow_errors=True).execute()
    return {c: normalised(cell.outputs) for c, cell in zip(CASES, nb.cells, strict=True)}


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, list[str]]:
    """The CLI's notebook and the model's observations after running every case in one turn."""
    work = tmp_path_factory.mktemp("cli-outputs")
    script = work / "script.json"
    script.write_text(json.dumps(script_running_every_case()))
    done = cli(work, "run", "--mode", "json", "--script", str(script), "run the cells")
    assert done.returncode == 0, done.stderr
    end = json_lines(done.stdout)[-1]
    nb = nbformat.read(work / end["notebook"], as_version=4)
    nbformat.validate(nb)
    return nb, observations(work / end["session_dir"] / "session.jsonl")


@pytest.mark.parametrize("case", CASES)
def test_the_cli_notebook_stores_what_nbclient_stores(
    case: str, reference: dict[str, list[dict[str, Any]]], cli_run: tuple[Any, list[str]]
) -> None:
    nb, _ = cli_run
    cell = nb.cells[CASES.index(case)]
    assert normalised(cell.outputs) == reference[case]


@pytest.mark.parametrize("case", CASES)
def test_the_model_sees_in_the_cli_what_nbclient_stores(
    case: str, reference: dict[str, list[dict[str, Any]]], cli_run: tuple[Any, list[str]]
) -> None:
    _, seen = cli_run
    assert seen[CASES.index(case)] == expected_observation(case, reference[case])


async def test_the_live_document_and_the_model_in_the_server_agree_with_nbclient(
    host: Any,
    jp_serverapp: Any,
    make_notebook: Any,
    agent_script: Any,
    reference: dict[str, list[dict[str, Any]]],
) -> None:
    path = make_notebook("outputs.ipynb")
    use_script(host, agent_script(script_running_every_case()["turns"]))
    agent = await host.attach(path)

    ended = await run_turn(host, agent.session_id, "run the cells", timeout=120)

    assert ended["stop_reason"] == "end_turn", ended
    cells = await live_agent_cells(jp_serverapp, path)
    seen = observations(agent.session.file)
    assert len(cells) == len(seen) == len(CASES)
    live = {case: normalised(cell["outputs"]) for case, cell in zip(CASES, cells, strict=True)}
    assert live == {case: as_jupyterlab_keeps(reference[case]) for case in CASES}
    model = dict(zip(CASES, seen, strict=True))
    assert model == {case: expected_observation(case, reference[case]) for case in CASES}
