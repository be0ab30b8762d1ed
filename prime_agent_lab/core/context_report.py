"""`/context` (and `GET /prime-agent/api/sessions/<id>/context`): what an agent's system prompt
holds, part by part in prompt order, each with where it came from and its size in characters
and estimated tokens (docs/project-context.md).

Extension point: `runtime.prompt_parts`, a list of `PartProvider`s. Each is called with the
runtime and the session id and returns more rows, shown after the project context files in the
order the providers were added (the MCP servers' part, docs/mcp.md, is meant to be one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

from .project_context import ProjectFile
from .prompt_parts import McpServerView, PromptPart, part
from .prompts import CHILD_DOCTRINE, SPAWN_SECTION, PromptSettings, build_system_prompt
from .tokens import estimate_tokens

if TYPE_CHECKING:
    from .runtime import AgentRuntime


class ContextReport(TypedDict):
    """Answer of `/context` and `GET .../context`."""

    session_id: str
    notebook_path: str
    project_context: bool
    """Whether the `project_context` setting is on."""
    parts: list[PromptPart]
    chars: int
    """The whole system prompt's characters (headings included)."""
    tokens: int


def _prompt_parts(runtime: AgentRuntime, session_id: str) -> list[PromptPart]:
    settings: PromptSettings = runtime.prompt_settings(session_id)
    base = build_system_prompt(PromptSettings(settings.output_cap, settings.cell_timeout_seconds))
    rows = [part("base prompt", "prime_agent_lab/core/prompts.py", base)]
    if settings.can_spawn:
        source = f"this agent may spawn (depth below {runtime.settings.spell('max_depth')})"
        rows.append(part("sub-agents", source, SPAWN_SECTION))
    if settings.parent_name is not None:
        doctrine = CHILD_DOCTRINE.format(name=settings.name, parent=f"`{settings.parent_name}`")
        rows.append(part("sub-agent doctrine", f"a sub-agent of {settings.parent_name}", doctrine))
    harness = runtime.harnesses.harness_for(session_id)
    local = harness.local.directory if harness.local is not None else "none"
    source = f"local store {local}; global store {harness.global_.directory}"
    rows.append(part("harness", source, runtime.harnesses.section(session_id)[1]))
    return rows


def _project_parts(runtime: AgentRuntime, session_id: str) -> list[PromptPart]:
    on = runtime.settings.project_context
    rows = []
    for item in runtime.project.files(runtime.notebook_of(session_id)):
        info = {
            "path": item.path,
            "kind": item.kind,
            "sha256": item.sha256,
            "size": item.size,
            "link_to": item.link_to,
            "content": item.content,
            "cut": item.cut,
            **_mcp_view(item),
        }
        name = "project context" if item.kind == "context" else "mcp config"
        in_prompt = item.kind == "context" and on and item.status in ("used", "cut")
        note = item.why
        if item.kind == "context" and not on and item.status in ("used", "cut"):
            note = f"not in the prompt: {runtime.settings.spell('project_context')} is off"
        elif item.kind == "mcp" and item.status == "used":
            note = "trusted (its servers are the MCP part's business)"
        elif item.status == "untrusted":
            note = f"{item.chars:,} characters, not in the prompt until trusted"
        rows.append(
            part(name, item.path, item.text if in_prompt else "", item.status, note, **info)
        )
    return rows


def _mcp_view(item: ProjectFile) -> dict[str, Any]:
    """A readable `.mcp.json`'s servers as they would run (env and header values never shown)
    and its problems; nothing for other files."""
    if item.kind != "mcp" or item.status == "unreadable":
        return {"servers": [], "problems": []}
    from .mcp_visible import parse_project_file

    servers, problems = parse_project_file(item.path, item.source_text, item.real)
    views = [
        McpServerView(
            name=server.name,
            transport=server.transport,
            command=server.command,
            args=list(server.args),
            cwd=server.cwd or "",
            url=server.url,
            env=[name for name, _ in server.env],
            headers=[name for name, _ in server.headers],
        )
        for server in servers
    ]
    return {"servers": views, "problems": [str(p) for p in problems]}


def context_report(runtime: AgentRuntime, session_id: str) -> ContextReport:
    """The prompt of `session_id`'s agent, part by part (see the module's doc)."""
    rows = _prompt_parts(runtime, session_id)
    rows += _project_parts(runtime, session_id)
    for provider in runtime.prompt_parts:
        rows += provider(runtime, session_id)
    prompt = runtime.system_prompt(session_id)
    return {
        "session_id": session_id,
        "notebook_path": runtime.notebook_of(session_id),
        "project_context": runtime.settings.project_context,
        "parts": rows,
        "chars": len(prompt),
        "tokens": estimate_tokens(prompt),
    }
