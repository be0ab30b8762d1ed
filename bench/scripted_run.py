"""A bench's `HeadlessRun` on the scripted provider: the script written to `script.json` in the
work directory, no model, replies not streamed unless asked. A bench imports it after putting the
checkout on `sys.path` (`from scripted_run import scripted_run`; this folder is the script's)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prime_agent_lab.core.settings import Settings
from prime_agent_lab.headless import HeadlessRun


def scripted_run(
    workdir: Path,
    script: dict[str, Any],
    settings: Settings,
    notebook: str = "analysis.ipynb",
    stream: bool = False,
    **overrides: Any,
) -> HeadlessRun:
    """`overrides`: further declared settings, as `HeadlessRun` takes them."""
    path = workdir / "script.json"
    path.write_text(json.dumps(script), encoding="utf-8")
    return HeadlessRun(
        cwd=workdir,
        notebook=notebook,
        provider="scripted",
        model=None,
        script_path=str(path),
        stream=stream,
        kernel_name="python3",
        settings=settings,
        **overrides,
    )
