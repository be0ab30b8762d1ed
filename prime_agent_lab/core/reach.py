"""Who can reach whom in a family of agents: an agent's parent, its siblings (all roots are
siblings of each other; only loaded roots count) and its direct children, and how a role and a
name point at one of them. Used by the mailbox (sending) and by `agent_observe`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import get_args

from .family import Family, FamilyError, Member
from .text import json_type, preview, shorten
from .wire import Relationship

REACH = "Agent reach is limited to parent, siblings and children"
ROLES: tuple[Relationship, ...] = get_args(Relationship)


@dataclass(frozen=True)
class Relative:
    """A family member as one agent sees it."""

    relationship: Relationship  # from the viewer's side: "parent" is the viewer's parent
    member: Member
    name: str  # a child's name; a root is known by its notebook path


def member_name(member: Member, loaded: Mapping[str, str]) -> str:
    """A child's name, or a root's notebook path (where it is now, when it is loaded)."""
    return member.name or loaded.get(member.session_id) or member.notebook_path


def relatives(family: Family, viewer_id: str, loaded: Mapping[str, str]) -> list[Relative]:
    """The viewer's nuclear family: parent, siblings and direct children. `loaded` maps the
    loaded agents' session ids to their notebook paths; only loaded roots count as siblings."""
    me = family.member(viewer_id)
    if me is None:
        raise FamilyError(404, f"session {viewer_id} is not in the agent family")
    out: list[Relative] = []
    if me.parent_session_id is not None:
        parent = family.member(me.parent_session_id)
        if parent is not None:
            out.append(Relative("parent", parent, member_name(parent, loaded)))
    roots = set(loaded) if me.parent_session_id is None else None
    for sibling in family.siblings(viewer_id, roots=roots):
        out.append(Relative("sibling", sibling, member_name(sibling, loaded)))
    for child in family.children(viewer_id):
        out.append(Relative("child", child, member_name(child, loaded)))
    return out


def resolve_receiver(
    family: Family,
    sender_id: str,
    loaded: Mapping[str, str],
    role: object,
    name: object = None,
) -> Relative:
    """The one family member `role` and `name` point at, from the sender's side, or a clear
    FamilyError: a role that is not one, a missing name, the sender itself, or anyone outside the
    nuclear family."""
    if role not in ROLES:
        raise FamilyError(
            400,
            'receiver_role must be "parent", "sibling" or "child" (or "all" to broadcast), '
            f"not {shorten(role, 40)}",
        )
    if name is not None and not isinstance(name, str):
        raise FamilyError(400, f"receiver_name must be a string, not {json_type(name)}")
    me = family.member(sender_id)
    if me is None:
        raise FamilyError(404, f"session {sender_id} is not in the agent family")
    family_now = relatives(family, sender_id, loaded)
    if role == "parent":
        return _the_parent(family_now, name)
    if not name:
        raise FamilyError(400, f'receiver_name is required for receiver_role="{role}"')
    if name in (me.session_id, member_name(me, loaded)):
        raise FamilyError(400, "an agent cannot send a message to itself")
    matches = [r for r in family_now if name in (r.name, r.member.session_id)]
    exact = [r for r in matches if r.relationship == role]
    if len(exact) == 1:
        return exact[0]
    if len(exact) > 1:
        ids = ", ".join(r.member.session_id for r in exact)
        raise FamilyError(409, f'several {role}s are named "{name}" ({ids}): use the session id')
    if matches:
        actual = matches[0]
        raise FamilyError(
            404,
            f'"{name}" is your {actual.relationship}, not your {role}; use '
            f'receiver_role="{actual.relationship}"',
        )
    same_role = ", ".join(sorted(f'"{r.name}"' for r in family_now if r.relationship == role))
    plural = "children" if role == "child" else f"{role}s"
    yours = f"your {plural}: {same_role}" if same_role else f"you have no {plural}"
    raise FamilyError(404, f'{REACH}: no {role} named "{preview(name, 80)}" ({yours})')


def _the_parent(family_now: list[Relative], name: str | None) -> Relative:
    parent = next((r for r in family_now if r.relationship == "parent"), None)
    if parent is None:
        raise FamilyError(
            404,
            "this agent is a root: it has no parent (other roots are its siblings: use "
            'receiver_role="sibling")',
        )
    if name and name not in (parent.name, parent.member.session_id, "parent"):
        raise FamilyError(
            404, f'{REACH}: your parent is "{parent.name}", not "{preview(name, 80)}"'
        )
    return parent


def resolve_relative(
    family: Family, viewer_id: str, loaded: Mapping[str, str], target: object
) -> Relative:
    """A family member named by name, session id or "parent" (for `agent_observe`)."""
    if not isinstance(target, str) or not target:
        raise FamilyError(400, "target must be a name or a session id")
    family_now = relatives(family, viewer_id, loaded)
    if target == "parent":
        return _the_parent(family_now, None)
    found = [r for r in family_now if target in (r.name, r.member.session_id)]
    if len(found) == 1:
        return found[0]
    if found:
        ids = ", ".join(r.member.session_id for r in found)
        raise FamilyError(409, f'several family members are named "{target}" ({ids})')
    if target == viewer_id:
        raise FamilyError(400, "that is this agent itself")
    raise FamilyError(404, f'{REACH}: no family member named "{shorten(target, 80)}"')
