"""The REST handlers of permission modes (docs/pairing.md, section 4; docs/api.md)."""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from .handler_base import ApiBase, host_errors, only_fields


class PermissionHandler(ApiBase):
    """`GET .../permission`: the session's mode, cap and waiting cells; `PUT {mode}` sets the
    mode (403 above `max_permission`), docs/pairing.md section 4."""

    @web.authenticated
    @authorized
    @host_errors
    async def get(self, session_id: str) -> None:
        self.reply(self.host.permission(self.session_id(session_id)))

    @web.authenticated
    @authorized
    @host_errors
    async def put(self, session_id: str) -> None:
        mode = only_fields(self.body(), "mode").get("mode")
        self.reply(self.host.set_permission(self.session_id(session_id), mode))


class CellDecisionHandler(ApiBase):
    """`POST .../cells/<tool_call_id>/approve {code?}` runs the cell waiting for approval (the
    edited `code` in a new cell); `.../skip` tells the model the user skipped it."""

    @web.authenticated
    @authorized
    @host_errors
    async def post(self, session_id: str, tool_call_id: str, action: str) -> None:
        fields = ("code",) if action == "approve" else ()
        code = only_fields(self.body(), *fields).get("code")
        self.reply(self.host.decide_cell(self.session_id(session_id), tool_call_id, action, code))
