"""`rlm_heartbeat`: recurring prompts the agent sets for itself (docs/autonomy.md).

hb = await rlm_heartbeat.create("check train.log; say if the loss diverges", interval="every 10m")
await rlm_heartbeat.list()                        # yours, and the user's read-only
await rlm_heartbeat.update(hb.id, status="paused")
await rlm_heartbeat.delete(hb.id)

Each tick reaches the agent as a message headed `[heartbeat "label" (yours, id ...), due ...]`:
`delivery_mode="steer"` enters a running turn at its next model call, `"follow_up"` waits until
the turn ends. Intervals: `every N s|m|h` (at least 10 s) or a 5-field cron expression. The
user's heartbeat (`/heartbeat`) and the terminal's schedules are listed but cannot be changed
here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from .messaging import Record
from .operations import CREATE_HEARTBEAT, DELETE_HEARTBEAT, LIST_HEARTBEATS, UPDATE_HEARTBEAT

Call = Callable[[str, dict[str, Any]], Awaitable[Any]]


class Heartbeat:
    """Bound as `rlm_heartbeat` in an agent's kernel."""

    def __init__(self, call: Call) -> None:
        self._call = call

    async def create(
        self,
        instruction: str,
        interval: str = "every 5m",
        label: str | None = None,
        delivery_mode: str = "steer",
    ) -> Record:
        """A heartbeat of yours: `instruction` reaches you on `interval`. Its record: `id`,
        `status`, `interval`, `next_run_at`, `run_count`, ..."""
        payload = {
            "instruction": instruction,
            "interval": interval,
            "label": label,
            "delivery_mode": delivery_mode,
        }
        return Record(**await self._call(CREATE_HEARTBEAT, payload))

    async def list(self, include_inactive: bool = False) -> list[Record]:
        """This session's heartbeats and schedules, yours (`editable`) and the user's; with
        `include_inactive`, completed and cancelled ones too."""
        if not isinstance(include_inactive, bool):
            raise TypeError("include_inactive must be True or False")
        jobs = await self._call(LIST_HEARTBEATS, {"include_inactive": include_inactive})
        return [Record(**job) for job in jobs]

    async def update(
        self,
        id: str,
        instruction: str | None = None,
        interval: str | None = None,
        label: str | None = None,
        delivery_mode: str | None = None,
        status: str | None = None,
    ) -> Record:
        """Change one of your heartbeats; `status` "paused" or "active". None leaves a field."""
        payload = {
            "id": _id(id),
            "instruction": instruction,
            "interval": interval,
            "label": label,
            "delivery_mode": delivery_mode,
            "status": status,
        }
        return Record(**await self._call(UPDATE_HEARTBEAT, payload))

    async def delete(self, id: str) -> Record:
        """Delete one of your heartbeats."""
        return Record(**await self._call(DELETE_HEARTBEAT, {"id": _id(id)}))

    def __repr__(self) -> str:
        return (
            "rlm_heartbeat: await rlm_heartbeat.create(instruction, interval='every 5m', "
            "label=None, delivery_mode='steer'), .list(include_inactive=False), "
            ".update(id, ...), .delete(id)"
        )


def _id(value: Any) -> Any:
    """A heartbeat's id, or the record `create`/`list` gave."""
    return getattr(value, "id", value) if not isinstance(value, str) else value
