"""The panel's Autonomous switch (docs/autonomy.md): the part of `AgentHost` that reads and sets a
session's autonomous mode (`GET`/`PUT .../sessions/<id>/autonomy`)."""

from __future__ import annotations

from typing import Any

from ..core.autonomy_config import BudgetAboveLock, Budgets, SubAgentRefused
from ..core.runtime import AgentRuntime
from ..core.sessions import SessionRepository
from ..core.text import json_type, shorten
from ..core.wire import AutonomyState
from .host_errors import HostError, attached


class HostAutonomy:
    runtime: AgentRuntime
    repository: SessionRepository

    def autonomy_state(self, session_id: str) -> AutonomyState:
        """The session's mode, budgets, gates and current (or last) run."""
        if session_id not in self.runtime.agents and not self.repository.exists(session_id):
            raise HostError(404, f"no session {shorten(session_id, 80)}")
        return self.runtime.autonomy.state(session_id)

    def set_autonomy(self, session_id: str, data: dict[str, Any]) -> AutonomyState:
        """Turn the mode on or off with `budgets` and `gates` (`AutonomyUpdate`); recorded in
        the session, so a restart keeps it. The next message runs autonomously. 403 for a
        budget above one the administrator locked."""
        agent = attached(self.runtime.agents, session_id)
        enabled = data.get("enabled")
        if not isinstance(enabled, bool):
            raise HostError(400, f"enabled must be true or false, not {json_type(enabled)}")
        unknown = sorted(set(data) - {"enabled", "budgets", "gates"})
        if unknown:
            raise HostError(400, f"unknown field {', '.join(map(repr, unknown))}")
        gates = data.get("gates")
        if gates is not None and (
            not isinstance(gates, list) or not all(isinstance(g, str) for g in gates)
        ):
            raise HostError(400, "gates must be a list of strings (shell commands or py:EXPR)")
        try:
            budgets = (
                Budgets.from_wire(data["budgets"], self.runtime.settings)
                if data.get("budgets") is not None
                else None
            )
            self.runtime.autonomy.configure(agent, enabled, budgets, gates)
        except SubAgentRefused as exc:
            raise HostError(409, str(exc)) from None
        except BudgetAboveLock as exc:
            raise HostError(403, str(exc)) from None
        except SyntaxError as exc:
            raise HostError(400, f"a py: gate does not compile: {exc.msg}") from None
        except ValueError as exc:
            raise HostError(400, str(exc)) from None
        return self.runtime.autonomy.state(session_id)
