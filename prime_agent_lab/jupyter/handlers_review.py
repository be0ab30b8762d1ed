"""The REST handlers of reviewing and reverting a turn (docs/pairing.md, section 5; docs/api.md,
"Review and revert a turn")."""

from __future__ import annotations

from typing import Any

from jupyter_server.auth.decorator import authorized
from tornado import web

from ..core.text import json_type, shorten
from .handler_base import ApiBase, host_errors, only_fields

REVERT_FIELDS = ("cells_removed", "restore_kernel")


class TurnReviewHandler(ApiBase):
    """`GET .../turns/<turn>`: the cells the turn wrote and whether its revert can bring the
    kernel back (`TurnReview`)."""

    @web.authenticated
    @authorized
    @host_errors
    async def get(self, session_id: str, turn: str) -> None:
        self.reply(await self.host.turn_review(self.session_id(session_id), int(turn)))


class TurnRevertHandler(ApiBase):
    """`POST .../turns/<turn>/revert {cells_removed?, restore_kernel?}` (`TurnRevert`)."""

    @web.authenticated
    @authorized
    @host_errors
    async def post(self, session_id: str, turn: str) -> None:
        cells, restore = revert_body(self.body())
        answer = await self.host.revert_turn(self.session_id(session_id), int(turn), cells, restore)
        self.reply(answer)


def revert_body(data: dict[str, Any]) -> tuple[list[str] | None, bool]:
    """(`cells_removed`, `restore_kernel`); a body of another shape is a 400 that says why."""
    only_fields(data, *REVERT_FIELDS)
    cells = data.get("cells_removed")
    if cells is not None and (
        not isinstance(cells, list) or not all(isinstance(c, str) and c for c in cells)
    ):
        raise web.HTTPError(400, f"cells_removed must be a list of cell ids, not {shorten(cells)}")
    restore = data.get("restore_kernel", True)
    if not isinstance(restore, bool):
        raise web.HTTPError(
            400, f"restore_kernel must be true or false (a JSON boolean), not {json_type(restore)}"
        )
    return cells, restore
