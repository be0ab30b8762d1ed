"""The notebook changing under the agent: reloads from disk, moves, renames, deletes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
import pytest

from .conftest import next_event, use_script, wait_for
from .test_server_e2e import live_agent_cells

COLLABORATION_EVENTS = "https://schema.jupyter.org/jupyter_collaboration/session/v1"


@pytest.fixture
def rtc_document_save_delay() -> float:
    return 0.2


@pytest.fixture
def jp_server_config(jp_server_config: dict[str, Any]) -> dict[str, Any]:
    config = dict(jp_server_config)
    config["YDocExtension"] = {**config.get("YDocExtension", {}), "file_poll_interval": 0.2}
    return config


def user_cells(count: int) -> list[Any]:
    return [nbformat.v4.new_code_cell(f"x_{i} = {i}", id=f"user-{i}") for i in range(count)]


def wait_for_go_file(go: Path, label: str) -> str:
    """Agent code that prints until the test creates `go`, so it writes during every reload."""
    return (
        "import os, time\n"
        f"print('{label} started', flush=True)\n"
        "n = 0\n"
        f"while not os.path.exists({str(go)!r}):\n"
        "    n += 1\n"
        "    print('.', end='', flush=True)\n"
        "    time.sleep(0.01)\n"
        f"print('\\n{label} done')\n"
    )


class OverwriteCounter:
    """Counts the collaboration room's "overwrite" events (a reload from disk)."""

    def __init__(self, serverapp: Any) -> None:
        self.count = 0
        serverapp.event_logger.add_listener(schema_id=COLLABORATION_EVENTS, listener=self._seen)

    async def _seen(self, logger: Any, schema_id: str, data: dict[str, Any]) -> None:
        if data.get("action") == "overwrite":
            self.count += 1


# No saves while the turn runs: a save racing a rewrite can swallow jupyter-collaboration's reload
# (the save task is cancelled by the next change after it took note of the new file), and this
# test needs every rewrite to be reloaded.
@pytest.mark.parametrize("rtc_document_save_delay", [60.0])
async def test_a_notebook_rewritten_on_disk_during_a_turn_keeps_every_agent_cell(
    host: Any, jp_serverapp: Any, make_notebook: Any, agent_script: Any, jp_root_dir: Path
) -> None:
    go = jp_root_dir / "go"
    script = agent_script(
        [
            {"code": "print('first cell')"},
            {"code": wait_for_go_file(go, "second")},
            {"text": "done"},
        ]
    )
    use_script(host, script)
    cells = user_cells(2000)
    path = make_notebook("big.ipynb", cells)
    agent = await host.attach(path)
    overwrites = OverwriteCounter(jp_serverapp)
    queue = agent.events.subscribe()
    await host.send(agent.session_id, "go")
    await next_event(queue, "cell_finished")
    await next_event(queue, "cell_started")
    for rewrite in range(4):
        # Another editor writes its own version of the notebook over the file.
        edited = [*cells[:-1], nbformat.v4.new_code_cell(f"edit {rewrite}")]
        nbformat.write(nbformat.v4.new_notebook(cells=edited), jp_root_dir / path)
        await wait_for(lambda n=rewrite: overwrites.count > n, timeout=30)
    go.write_text("")
    ended = await next_event(queue, "turn_ended", timeout=60)

    assert ended["stop_reason"] == "end_turn", agent.session.path()
    agent_cells = await live_agent_cells(jp_serverapp, path)
    first_lines = [c["source"].splitlines()[0] for c in agent_cells]
    assert first_lines == ["print('first cell')", "import os, time"]
    assert agent_cells[0]["outputs"][0]["text"] == "first cell\n"
    second_output = "".join(o.get("text", "") for o in agent_cells[1]["outputs"])
    assert second_output.startswith("second started\n") and "second done" in second_output
    assert all(isinstance(c["execution_count"], int) for c in agent_cells)
    notices = [e for e in agent.session.path() if e["type"] == "notice"]
    assert notices and {n["kind"] for n in notices} == {"cell_restored"}
