"""Every check of a name or id refuses a trailing newline (`$` in a regex matches before one)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from prime_agent_lab.core.bridge import BridgeService, Caller, sign
from prime_agent_lab.core.entry_types import DECLARED, problem
from prime_agent_lab.core.family import FamilyError, check_name
from prime_agent_lab.core.sessions import (
    SessionError,
    SessionRepository,
    check_session_id,
    is_session_id,
)

KEY = b"kernel-key"
BLOB = "a" * 64 + ".png"


@pytest.mark.parametrize("name", ["nul\n", "part-a\n", "x.y\n"])
def test_a_sub_agent_name_ending_in_a_newline_is_refused(name: str) -> None:
    assert check_name(name.rstrip("\n")) == name.rstrip("\n")
    with pytest.raises(FamilyError) as refused:
        check_name(name)
    assert refused.value.status == 400


def test_a_session_id_ending_in_a_newline_is_refused(tmp_path: Path) -> None:
    assert is_session_id("20261207-054717-471faf")
    assert not is_session_id("20261207-054717-471faf\n")
    with pytest.raises(SessionError):
        check_session_id("20261207-054717-471faf\n")
    with pytest.raises(SessionError):
        SessionRepository(tmp_path).load("20261207-054717-471faf\n")


def test_a_folder_whose_name_ends_in_a_newline_is_not_a_session(tmp_path: Path) -> None:
    (tmp_path / "good-id").mkdir()
    (tmp_path / "bad-id\n").mkdir()
    found = {p.name for p in SessionRepository(tmp_path).session_directories()}
    assert "good-id" in found and "bad-id\n" not in found


def test_a_proposed_call_id_ending_in_a_newline_is_not_used_as_the_job_id() -> None:
    service = BridgeService(lambda kid: KEY, lambda kid: "session-1", sync_wait=0.05)

    async def slow(caller: Caller, payload: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0.3)
        return {}

    service.register("slow", slow)

    async def job_id_of(call_id: str) -> str:
        fields = {"kernel_id": "k1", "ts": time.time(), "nonce": uuid.uuid4().hex}
        raw = json.dumps({**fields, "op": "slow", "payload": {}, "call_id": call_id}).encode()
        status, answer = await service.call("k1", raw, sign(KEY, raw))
        assert status == 202
        return str(answer["job_id"])

    async def scenario() -> tuple[str, str]:
        return await job_id_of("call-123456"), await job_id_of("call-654321\n")

    kept, replaced = asyncio.run(scenario())
    assert kept == "call-123456"
    assert replaced != "call-654321\n" and "\n" not in replaced


def test_an_image_blob_name_ending_in_a_newline_is_malformed() -> None:
    result = {"id": "e1", "type": "tool_result", **DECLARED["tool_result"].example}
    image = {"media_type": "image/png", "blob": BLOB, "bytes": 10}
    assert problem({**result, "images": [image]}) is None
    bad = {**image, "blob": BLOB + "\n"}
    assert problem({**result, "images": [bad]}) == "entry 'e1' has malformed images"
