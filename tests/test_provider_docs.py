"""Every scripted-provider example in docs/providers.md runs as written (headless CLI).

An example is a ```json block right after an `<!-- example {...} -->` comment whose JSON gives
the `prompts` (the first starts the run, each later one continues it with `--continue`) and,
optionally, further CLI flags (`args`), the `final` answer the last run must end with and the
`entries` (types) the root's session log must hold.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from .test_cli import cli, json_lines

DOC = Path(__file__).resolve().parent.parent / "docs" / "providers.md"
EXAMPLE = re.compile(r"<!-- example (\{.*?\}) -->\n```json\n(.*?)\n```", re.DOTALL)
JSON_BLOCK = re.compile(r"```json\n(.*?)\n```", re.DOTALL)


def examples() -> list[tuple[dict[str, Any], str]]:
    return [(json.loads(m.group(1)), m.group(2)) for m in EXAMPLE.finditer(DOC.read_text())]


def test_every_script_in_the_doc_is_an_example_that_runs() -> None:
    scripts = [b for b in JSON_BLOCK.findall(DOC.read_text()) if '"turns"' in b]
    assert sorted(scripts) == sorted(script for _, script in examples())
    assert len(scripts) >= 8


@pytest.mark.parametrize(
    ("expected", "script"), examples(), ids=[f"example-{i}" for i in range(len(examples()))]
)
def test_the_example_plays_through_the_headless_cli(
    tmp_path: Path, expected: dict[str, Any], script: str
) -> None:
    (tmp_path / "example.json").write_text(script)
    end: dict[str, Any] = {}
    for number, prompt in enumerate(expected["prompts"]):
        again = ["--continue"] if number else []
        flags = [*again, *expected.get("args", ()), "--script", "example.json"]
        done = cli(tmp_path, "run", "--mode", "json", *flags, prompt)
        assert done.returncode == 0, done.stderr + done.stdout[-2000:]
        end = json_lines(done.stdout)[-1]
        assert end["ok"] is True, end
    if "final" in expected:
        assert end["final_text"] == expected["final"]
    log = (tmp_path / end["session_dir"] / "session.jsonl").read_text().splitlines()
    types = {json.loads(line).get("type") for line in log if line.strip()}
    assert set(expected.get("entries", ())) <= types, types
