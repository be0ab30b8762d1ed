"""The harness as the system prompt shows it: short summaries, never whole entries.

At most `PER_KIND` entries of each kind (local before global, most recently updated first),
each cut to about `LINE_CHARS` characters, then "+N more" with the call that lists the rest.
Skills show their call, never their module text. The full entry is one call away
(`rlm.harness.get`).
"""

from __future__ import annotations

import heapq
import json

from .store import KINDS, Entry, Harness

PER_KIND = 6
LINE_CHARS = 180

HEADINGS = {
    "prompt": "Prompt notes (rules you set yourself)",
    "memory": "Memories (facts, decisions, failures)",
    "skill": "Skills (Python procedures; import and call them)",
    "subagent": "Sub-agent specs (reusable delegation roles)",
}

GUIDANCE = """
# Continual harness
What you learned in earlier turns and sessions is kept outside this conversation, in the kernel's \
`rlm.harness`: prompt notes, memories, skills and sub-agent specs, each `local` (this session) or \
`global` (every session, `global_=True`). Below are summaries only; \
`rlm.harness.get(kind, id)` returns a whole entry. Record what will help later: \
`rlm.harness.create_memory(title, content)`, `create_prompt_note(...)`, `create_subagent(...)`, \
`create_skill(title, content, reference={{"type": "python", "import": module, "callable": name}}, \
arguments={{...}}, source=module_text)`; `update_<kind>(id, ...)`, `delete_<kind>(id)`, \
`list(kind)`. Call a skill directly (`import module; module.name(...)`); there is no \
`call_skill` wrapper. To turn a sub-agent spec into work, write its task and `await rlm(task)`. \
`await refine.run(instructions)` reviews your trajectory and edits the harness for you at the \
next turn boundary. Nothing here can change the base prompt above.
Harness version: local {local}, global {global_}.
"""


def clip(text: str, limit: int = LINE_CHARS) -> str:
    """Whitespace collapsed, cut to `limit` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def entry_line(entry: Entry) -> str:
    head = f"[{entry.scope}:{entry.id}] {entry.title}"
    if entry.kind == "skill":
        body = f"{entry.call}: {(entry.content.strip().splitlines() or [''])[0]}"
    else:
        body = entry.content
    return "- " + clip(f"{head}: {body}")


def shown_first(entries: list[Entry], count: int = PER_KIND) -> list[Entry]:
    """The `count` entries the prompt shows: this session's before the global ones (other
    sessions' lessons must not crowd out its own), each scope's most recently updated first."""
    return heapq.nlargest(count, entries, key=lambda e: (e.scope == "local", e.updated_at))


def harness_section(harness: Harness) -> str:
    """The prompt section for `harness` as it is now."""
    version = harness.version()
    parts = [GUIDANCE.format(local=version["local"], global_=version["global"])]
    entries, unavailable = harness.read_all()
    parts.extend(f"Unavailable: {reason}\n" for reason in unavailable)
    if not entries:
        parts.append("No harness entries yet.\n")
        return "".join(parts)
    for kind in KINDS:
        found = [e for e in entries if e.kind == kind]
        if not found:
            continue
        parts.append(f"\n## {HEADINGS[kind]}: {len(found)}\n")
        parts.extend(entry_line(entry) + "\n" for entry in shown_first(found))
        if len(found) > PER_KIND:
            parts.append(f"+{len(found) - PER_KIND} more: rlm.harness.list({json.dumps(kind)})\n")
    return "".join(parts)
