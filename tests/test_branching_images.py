"""A fork or clone carries the images of the path it copies: since session format 2 they are
blob files beside the log (docs/sessions.md), so the copy needs its own, not a dangling name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .conftest import run_turn, use_script
from .test_history_format import PNG, SHOW_IMAGE


def image_script(tmp_path: Path) -> str:
    path = tmp_path / "script.json"
    turns = [{"code": SHOW_IMAGE}, {"text": "shown"}, {"code": "x = 1"}, {"text": "again"}]
    path.write_text(json.dumps({"turns": turns}), encoding="utf-8")
    return str(path)


def tool_images(host: Any, session_id: str) -> list[tuple[int, str]]:
    """(images, text) of each tool message the model would be sent for that session."""
    log = host.repository.load(session_id)
    return [(len(m.images), m.text) for m in log.context_messages() if m.role == "tool"]


async def test_fork_and_clone_keep_the_images_of_the_copied_path(
    host: Any, make_notebook: Any, tmp_path: Path
) -> None:
    use_script(host, image_script(tmp_path))
    agent = await host.attach(make_notebook("plots.ipynb"))
    await run_turn(host, agent.session_id, "plot")
    await run_turn(host, agent.session_id, "more")
    (shown,) = [i for i in tool_images(host, agent.session_id) if i[0]]
    assert shown[0] == 2
    second = [e for e in agent.session.path() if e["type"] == "user_message"][1]

    fork = await host.fork(agent.session_id, second["id"])
    clone = await host.clone(agent.session_id)

    for copy in (fork, clone):
        images = tool_images(host, copy["session_id"])
        assert images[0] == shown, (copy, images)
        for entry in host.repository.load(copy["session_id"]).path():
            for image in entry.get("images", []):
                assert host.repository.load(copy["session_id"]).image_data(image) == PNG
