"""Permission modes on the server (docs/pairing.md, section 4): the part of `AgentHost` behind
`GET/PUT .../permission` and `POST .../cells/<tool_call_id>/approve|skip`. The modes themselves
are the loop's (core/permission.py, `Agent.set_permission`)."""

from __future__ import annotations

from ..core.agent import Agent
from ..core.permission import PermissionRefused
from ..core.runtime import AgentRuntime
from ..core.wire import PermissionState
from .host_errors import HostError, attached


def permission_state(agent: Agent) -> PermissionState:
    gate = agent.permission
    return {"mode": gate.mode, "cap": gate.cap, "waiting": gate.waiting()}


class HostPermission:
    runtime: AgentRuntime

    def permission(self, session_id: str) -> PermissionState:
        return permission_state(attached(self.runtime.agents, session_id))

    def set_permission(self, session_id: str, mode: object) -> PermissionState:
        """400 for an unknown mode, 403 for one above `max_permission`."""
        agent = attached(self.runtime.agents, session_id)
        try:
            agent.set_permission(mode)
        except PermissionRefused as exc:
            raise HostError(exc.status, exc.message) from None
        return permission_state(agent)

    def decide_cell(
        self, session_id: str, tool_call_id: str, action: str, code: object = None
    ) -> PermissionState:
        """Run (`approve`, with edited `code` if given) or `skip` the cell waiting for approval;
        404 for an unknown tool call, 409 for one whose cell does not wait."""
        agent = attached(self.runtime.agents, session_id)
        try:
            if action == "approve":
                agent.approve(tool_call_id, code)
            else:
                agent.skip(tool_call_id)
        except PermissionRefused as exc:
            raise HostError(exc.status, exc.message) from None
        return permission_state(agent)
