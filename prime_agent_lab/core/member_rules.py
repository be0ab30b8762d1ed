"""What a session header may claim about its place in the tree of agents (docs/agent-tree.md,
"Headers from elsewhere").

A session folder can come from someone else (a clone, a copied folder), so a header that says
"I am a sub-agent" is a claim, checked before the tree believes it: a sub-agent's notebook is a
clean relative path inside the server root, its name is one `rlm()` accepts, its depth is its
parent's plus one, its parent is a session in the same folder and not refused, its parents never
loop back to it, and no sibling in memory (or else older) has its name; a root's notebook is a
clean path too. A member that breaks a rule is refused: it is listed with the reason (the Agents
View row, the API's error), and nothing loads it, starts a kernel for it or opens its notebook.
Children the product writes follow every rule by construction.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any

from .text import shorten

if TYPE_CHECKING:
    from .family import Member

MAX_NOTEBOOK_PATH = 1024
MAX_CHAIN = 200  # parents above a member, far over any depth limit: a longer chain is forged


def notebook_problem(path: object, what: str) -> str:
    """Why `path` is not a clean notebook path ("" when it is): relative to the server root, or
    absolute where a headless run names a notebook outside its folder (`headless.py`
    `session_notebook`); a sub-agent's must also lie in its parent's folder (`tree_problems`)."""
    if not isinstance(path, str) or not path:
        return f"its {what} is missing"
    shown = shorten(path, 80)
    if len(path) > MAX_NOTEBOOK_PATH:
        return f"its {what} is longer than {MAX_NOTEBOOK_PATH} characters"
    if "\\" in path or "\x00" in path or (len(path) > 1 and path[1] == ":"):
        return f"its {what} {shown!r} is not a POSIX path"
    parts = path.removeprefix("/").split("/")
    if any(part in ("", ".", "..") for part in parts):
        return f"its {what} {shown!r} leaves the server root or is not a clean path"
    if not path.endswith(".ipynb"):
        return f"its {what} {shown!r} is not a notebook (.ipynb)"
    return ""


def child_header_problem(header: Mapping[str, Any]) -> str:
    """Why a sub-agent's header is not one the product writes, from the header alone ("" when
    it may be). Roots are not checked here: a root only comes back through its notebook, opened
    by the user in this server (the host normalizes that path)."""
    from .family import FamilyError, check_name  # the family owns the naming rule

    try:
        check_name(header.get("name"))
    except FamilyError as exc:
        return f"its header's name is not a valid sub-agent name ({exc.message})"
    depth = header.get("depth")
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < 1:
        return f"its header's depth {shorten(repr(depth), 40)} is not a sub-agent's (1 or more)"
    problem = notebook_problem(header.get("notebook_path"), "notebook_path")
    if problem:
        return problem
    parent_path = header.get("parent_notebook_path")
    if parent_path not in (None, ""):
        problem = notebook_problem(parent_path, "parent_notebook_path")
    return problem


def child_folder(parent_notebook_path: str) -> str:
    """Where a notebook's sub-agents live: `analysis.ipynb` -> `analysis.agents`."""
    folder, base = posixpath.split(parent_notebook_path)
    stem = base[: -len(".ipynb")] if base.endswith(".ipynb") else base
    return posixpath.join(folder, f"{stem}.agents")


def outside_parents_folder(path: str, parent_path: str) -> bool:
    """An absolute notebook path (a headless run's notebook outside its folder) is believed only
    in its parent's sub-agent folder, where the product writes it; relative paths stay inside
    the server root by `notebook_problem` alone."""
    absolute = path.startswith("/")
    if absolute != parent_path.startswith("/"):
        return True
    return absolute and posixpath.dirname(path) != child_folder(parent_path)


def tree_problems(
    members: Mapping[str, Member],
    deleted: Collection[str],
    resident: Callable[[str], bool] = lambda _: False,
) -> dict[str, str]:
    """The refused members of a tree and why: the problem each header has alone (`problem`,
    from `child_header_problem`; a root's notebook path too), and what only the whole tree
    shows (a parent that is not there or refused, a loop, a depth that is not the parent's plus
    one, a name a sibling already has: the agent in memory keeps it, else the oldest), and
    every member below a refused one."""
    problems = {sid: m.problem for sid, m in members.items() if m.problem}
    for sid, member in members.items():
        if member.parent_session_id is None and sid not in problems:
            why = notebook_problem(member.notebook_path, "notebook_path")
            if why:
                problems[sid] = why
    judged: set[str] = set()

    def in_loop(session_id: str) -> bool:
        step = members[session_id].parent_session_id
        for _ in range(MAX_CHAIN + 2):
            if step is None or step not in members:
                return False
            if step == session_id:
                return True
            step = members[step].parent_session_id
        return False

    def judge(session_id: str, trail: tuple[str, ...]) -> str:
        if session_id in problems or session_id in judged:
            return problems.get(session_id, "")
        judged.add(session_id)
        member = members[session_id]
        parent_id = member.parent_session_id
        if parent_id is None:
            return ""
        if parent_id in trail or in_loop(session_id):
            problems[session_id] = "its header's parents loop back to it"
            return problems[session_id]
        if len(trail) > MAX_CHAIN:
            problems[session_id] = f"its chain of parents is longer than {MAX_CHAIN}"
            return problems[session_id]
        parent = members.get(parent_id)
        if parent is None:
            why = f"its parent session {shorten(parent_id, 40)} is not in this sessions folder"
        elif judge(parent_id, (*trail, session_id)):
            why = f"its parent {parent.display_name!r} is refused"
        elif outside_parents_folder(member.notebook_path, parent.notebook_path):
            why = (
                f"its notebook {shorten(member.notebook_path)} is not in its parent's "
                f"sub-agent folder {shorten(child_folder(parent.notebook_path))}"
            )
        elif member.depth != parent.depth + 1:
            why = (
                f"its header says depth {member.depth}, but its parent "
                f"{parent.display_name!r} is at depth {parent.depth}"
            )
        else:
            why = ""
        if why:
            problems[session_id] = why
        return why

    for session_id in list(members):
        judge(session_id, ())
    # Siblings' names: the oldest keeps a name (a deleted sub-agent has freed its own).
    by_name: dict[tuple[str, str], list[Member]] = {}
    for member in members.values():
        if member.parent_session_id is None or member.session_id in problems:
            continue
        if member.session_id in deleted:
            continue
        by_name.setdefault((member.parent_session_id, member.name.lower()), []).append(member)
    for twins in by_name.values():
        twins.sort(key=lambda m: (not resident(m.session_id), m.created, m.session_id))
        for later in twins[1:]:
            problems[later.session_id] = (
                f"its sibling {twins[0].session_id} already has the name {later.name!r}"
            )
    _refuse_below(members, problems)
    return problems


def _refuse_below(members: Mapping[str, Member], problems: dict[str, str]) -> None:
    """Every member under a refused one is refused too (a tree is believed from its root)."""
    changed = True
    while changed:
        changed = False
        for sid, member in members.items():
            parent_id = member.parent_session_id
            if sid not in problems and parent_id is not None and parent_id in problems:
                parent = members.get(parent_id)
                name = parent.display_name if parent is not None else parent_id
                problems[sid] = f"its parent {name!r} is refused"
                changed = True
