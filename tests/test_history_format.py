"""Session format version 2: images beside the log by hash; a version-1 log migrates on load."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from prime_agent_lab.core.entry_schema import UndeclaredEntry
from prime_agent_lab.core.sessions import FORMAT_VERSION, SessionLog, SessionRepository
from prime_agent_lab.core.settings import Settings
from prime_agent_lab.headless import HeadlessRun

from .test_compaction import RecordingProvider

# A 1x1 PNG.
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQ"
    "AAAABJRU5ErkJggg=="
)
SHOW_IMAGE = (
    "import base64\n"
    "from IPython.display import Image, display\n"
    f"png = base64.b64decode({PNG!r})\n"
    "display(Image(data=png, format='png'))\n"
    "display(Image(data=png, format='png'))"
)


def version_1_log(root: Path, session_id: str) -> Path:
    """A log as version 1 wrote it: one turn whose cell showed an image, inline as base64."""
    directory = root / ".prime-agent" / "sessions" / session_id
    directory.mkdir(parents=True)
    call = {"id": "scripted_0_0", "name": "python", "arguments": json.dumps({"code": "plot()"})}
    records: list[dict[str, Any]] = [
        {
            "type": "session",
            "version": 1,
            "created": "2026-01-01T00:00:00.000+00:00",
            "session_id": session_id,
            "notebook_path": "analysis.ipynb",
            "provider": "scripted",
            "model": "demo",
        },
        {"id": "a1", "parent_id": None, "ts": "t", "type": "user_message", "text": "p", "turn": 1},
        {
            "id": "a2",
            "parent_id": "a1",
            "ts": "t",
            "type": "assistant_message",
            "text": "",
            "tool_calls": [call],
            "turn": 1,
        },
        {
            "id": "a3",
            "parent_id": "a2",
            "ts": "t",
            "type": "tool_result",
            "tool_call_id": "scripted_0_0",
            "cell_id": "c1",
            "status": "ok",
            "observation": "[image]",
            "images": [{"media_type": "image/png", "data_base64": PNG}],
            "turn": 1,
        },
        {"id": "a4", "parent_id": "a3", "ts": "t", "type": "assistant_message", "text": "done"},
        {"id": "a5", "parent_id": "a4", "ts": "t", "type": "turn_end", "turn": 1},
    ]
    text = "".join(json.dumps(r) + "\n" for r in records)
    (directory / "session.jsonl").write_text(text, encoding="utf-8")
    return directory


async def test_a_version_1_log_with_inline_images_loads_continues_and_new_images_go_to_blobs(
    tmp_path: Path,
) -> None:
    directory = version_1_log(tmp_path, "20260101-000000-abcdef")
    original = (directory / "session.jsonl").read_bytes()
    script = tmp_path / "script.json"
    turns = [{"code": "plot()"}, {"text": "done"}, {"code": SHOW_IMAGE}, {"text": "shown"}]
    script.write_text(json.dumps({"turns": turns}), encoding="utf-8")
    run = HeadlessRun(
        cwd=tmp_path,
        notebook="analysis.ipynb",
        provider="scripted",
        model=None,
        script_path=str(script),
        stream=False,
        kernel_name="python3",
        settings=Settings(cell_timeout=60),
        session_id=directory.name,
        kernel_pool_size=0,
    )
    await run.start(lambda event: None)
    recorder = RecordingProvider(run.agent.provider)
    run.agent.provider = recorder
    try:
        outcome = await run.agent.run_turn("show it again")
    finally:
        await run.close()

    assert outcome.stop_reason == "end_turn" and outcome.final_text == "shown", outcome
    # The old inline image reached the model, as before.
    first = recorder.requests[0]
    old = next(m for m in first.messages if m.role == "tool")
    assert [i.data_base64 for i in old.images] == [PNG]
    # The new images are a blob, written once, referenced by hash.
    session = run.agent.session
    new = [e for e in session.entries if e["type"] == "tool_result"][-1]
    digest = hashlib.sha256(base64.b64decode(PNG)).hexdigest()
    assert [i["blob"] for i in new["images"]] == [f"{digest}.png"] * 2
    assert all("data_base64" not in i for i in new["images"])
    assert [p.name for p in (directory / "blobs").iterdir()] == [f"{digest}.png"]
    assert (directory / "blobs" / f"{digest}.png").read_bytes() == base64.b64decode(PNG)
    # The file was appended to, never rewritten: its header still says version 1.
    assert (directory / "session.jsonl").read_bytes().startswith(original)
    reloaded = SessionLog.load(directory)
    assert reloaded.format_version == 1
    assert reloaded.header["version"] == FORMAT_VERSION
    assert reloaded.header["migrated_from"] == 1
    # Loading again gives the model both images back from the blob.
    tool_messages = [m for m in reloaded.context_messages() if m.role == "tool"]
    assert [len(m.images) for m in tool_messages] == [1, 2]
    assert tool_messages[1].images[0].data_base64 == PNG


def test_a_log_written_by_a_newer_version_is_listed_as_broken_and_not_continued(
    tmp_path: Path,
) -> None:
    repository = SessionRepository(tmp_path / "sessions")
    log = repository.create(notebook_path="a.ipynb", provider="scripted", model="demo")
    lines = log.file.read_text().splitlines()
    header = json.loads(lines[0])
    assert header["version"] == FORMAT_VERSION == 2
    header["version"] = 3
    log.file.write_text(json.dumps(header) + "\n")
    (summary,) = repository.summaries()
    assert summary.broken is not None and "session format 3" in summary.broken


def test_a_blob_reference_must_be_a_hash_name_never_a_path(tmp_path: Path) -> None:
    repository = SessionRepository(tmp_path / "sessions")
    log = repository.create(notebook_path="a.ipynb", provider="scripted", model="demo")
    first = log.append("user_message", text="x", turn=1)
    bad = {"media_type": "image/png", "blob": "../../etc/passwd"}
    with pytest.raises(UndeclaredEntry, match="malformed images"):  # never written
        log.append("tool_result", tool_call_id="c", observation="", images=[bad])
    record = {"id": "e2", "parent_id": first["id"], "type": "tool_result", "images": [bad]}
    with log.file.open("a") as file:  # as another program could have written it
        file.write(json.dumps({**record, "tool_call_id": "c", "observation": ""}) + "\n")
    reread = SessionLog.read(log.directory)
    assert reread.damage is not None and "malformed images" in reread.damage


def test_a_corrupted_blob_reaches_the_model_as_missing_not_as_a_broken_image(
    tmp_path: Path,
) -> None:
    """A blob whose bytes no longer match its hash name (a damaged disk, a hand edit) would
    make a provider refuse every later request; it is reported like a missing one."""
    repository = SessionRepository(tmp_path / "sessions")
    log = repository.create(notebook_path="a.ipynb", provider="scripted", model="demo")
    log.append("user_message", text="plot", turn=1)
    call = {"id": "c", "name": "python", "arguments": "{}"}
    log.append("assistant_message", text="", tool_calls=[call], turn=1)
    image = log.store_image("image/png", PNG)
    log.append("tool_result", tool_call_id="c", observation="[image]", images=[image], turn=1)
    blob = log.directory / "blobs" / image["blob"]
    blob.write_bytes(blob.read_bytes()[:20])

    reread = repository.load(log.session_id)
    (tool,) = [m for m in reread.context_messages() if m.role == "tool"]

    assert tool.images == ()
    assert "1 image(s) of this output are missing on disk" in tool.text
