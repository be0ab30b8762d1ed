"""Regenerate the examples: run each example's script headless on the scripted provider and
keep what the run wrote (the notebooks and the session folders) in the example's folder.

    python examples/regenerate.py                  # every example
    python examples/regenerate.py fan-out          # one

Each example folder holds `script.json` (what the scripted model answers), `example.json` (the
user's message and the notebook's name) and what this writes: the notebook, the sub-agents'
notebooks (`<notebook>.agents/`) and `.prime-agent/sessions/<id>/` (the session logs and, for a
harness refinement, the session's harness store). Kernel snapshots (`kernel-state/`) are left
out: they are large, and signed with this machine's secret, so no one else may load them.
tests/test_examples.py checks that what is committed is what this writes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent
ROOT = EXAMPLES.parent
SESSIONS = Path(".prime-agent") / "sessions"
NOT_KEPT = ("kernel-state", ".lock")  # machine-bound or transient files of a session folder


def example_names() -> list[str]:
    return sorted(p.parent.name for p in EXAMPLES.glob("*/example.json"))


def run_script(folder: Path, script: Path, prompt: str, notebook: str) -> dict[str, object]:
    """Run `script` headless in `folder` (narrated, a global harness of its own); the last
    JSON record (`run_end`)."""
    env = {**os.environ, "PRIME_AGENT_LAB_HARNESS_DIR": str(folder / ".global-harness")}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), str(ROOT / "kernel_ext"), env.get("PYTHONPATH", "")]
    )
    command = [sys.executable, "-m", "prime_agent_lab.cli", "run", "--mode", "json"]
    command += ["--script-path", str(script), "--narrate-cells", "--notebook", notebook, prompt]
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"the run of {script} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def written(folder: Path, notebook: str) -> list[Path]:
    """What a run in `folder` wrote that an example keeps, relative to `folder`."""
    kept = [Path(notebook)]
    agents = folder / Path(notebook).with_suffix(".agents")
    kept += sorted(p.relative_to(folder) for p in agents.rglob("*.ipynb"))
    for path in sorted((folder / SESSIONS).rglob("*")):
        relative = path.relative_to(folder)
        if path.is_file() and not any(part in NOT_KEPT for part in relative.parts):
            kept.append(relative)
    return kept


def regenerate(name: str) -> None:
    example = EXAMPLES / name
    spec = json.loads((example / "example.json").read_text())
    notebook = spec["notebook"]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        run_script(folder, example / "script.json", spec["prompt"], notebook)
        for old in (Path(notebook), Path(notebook).with_suffix(".agents"), Path(".prime-agent")):
            target = example / old
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
        for relative in written(folder, notebook):
            (example / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(folder / relative, example / relative)
    print(f"regenerated examples/{name}")


if __name__ == "__main__":
    for name in sys.argv[1:] or example_names():
        regenerate(name)
