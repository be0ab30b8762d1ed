"""Which parts of a session (and of its sub-agents' sessions) were not made by this user, and
trusting them.

Six things a session folder holds are loaded or acted on without anyone asking: the kernel
snapshot (restored when the agent starts: pickles run code), the local harness store (its notes
enter the system prompt, its skill modules become importable), queued mail (it starts a turn,
and at server start it would load the agent), scheduled jobs (they start turns on their own),
the recorded autonomous switch (its gates are shell commands run after every answer) and the
goal (it continues turns). Each carries this user's signature
(core/trust.py); what does not is described here and loaded only once the user trusts the
session: the chat's "Trust and restore", `prime-agent-lab run --trust`, `POST .../trust`.
Trusting signs what is there now, for the session and every sub-agent below it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass

from .caller import TreeRuntime
from .harness.store import HarnessError, HarnessStore
from .snapshots import describe_snapshot, sign_snapshot, untrusted_snapshot
from .text import preview
from .wire import UntrustedKind, UntrustedPart

SHOWN = 5


@dataclass(frozen=True)
class Untrusted:
    """One thing in a session folder that does not carry this user's signature."""

    session_id: str
    where: str  # the agent's notebook (or its session id)
    kind: UntrustedKind
    what: str  # what trusting it would load, in one line

    def as_dict(self) -> UntrustedPart:
        return UntrustedPart(**asdict(self))


def _tree(runtime: TreeRuntime, session_id: str) -> Iterator[str]:
    """`session_id` and every sub-agent session below it."""
    seen: set[str] = set()
    stack = [session_id]
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        yield current
        stack.extend(m.session_id for m in runtime.family.children(current))


def _where(runtime: TreeRuntime, session_id: str) -> str:
    member = runtime.family.member(session_id)
    return member.notebook_path if member is not None and member.notebook_path else session_id


def _local_store(runtime: TreeRuntime, session_id: str) -> HarnessStore:
    return runtime.harnesses.harness_for(session_id).local


def _describe_harness(store: HarnessStore) -> str | None:
    try:
        if not store.untrusted():
            stray = store.stray_modules()
            if not stray:
                return None
            return (
                f"files in {store.skills_dir} that no skill brings (trusting moves them aside, "
                f"never imports them): {', '.join(stray[:SHOWN])}"
            )
        state = store.read_unverified()
    except HarnessError:
        return None  # damaged, not untrusted: reported as damaged where it is read
    counts = [f"{len(state.entries[k])} {k}" for k in state.entries if state.entries[k]]
    titles = [preview(e.title, 60) for e in state.all()][:SHOWN]
    modules = [
        f"{e.reference.get('import')}.py" for e in state.all("skill") if "source" in e.reference
    ]
    text = f"a local harness store ({', '.join(counts) or 'empty'}"
    text += f"; {', '.join(titles)}" if titles else ""
    text += f"; skill modules {', '.join(modules)}" if modules else ""
    return text + ")"


def untrusted_items(runtime: TreeRuntime, session_id: str) -> list[Untrusted]:
    """What in `session_id`'s folder and its sub-agents' folders is not signed by this user."""
    items: list[Untrusted] = []
    for sid in _tree(runtime, session_id):
        where = _where(runtime, sid)
        manifest = untrusted_snapshot(runtime.repository.directory(sid), runtime.signer)
        if manifest is not None:
            items.append(Untrusted(sid, where, "snapshot", describe_snapshot(manifest)))
        harness = _describe_harness(_local_store(runtime, sid))
        if harness is not None:
            items.append(Untrusted(sid, where, "harness", harness))
        mail = runtime.mailbox.untrusted_mail(sid)
        if mail:
            senders = sorted({m.from_name for m in mail})
            first = preview(mail[0].body, 80)
            items.append(
                Untrusted(
                    sid,
                    where,
                    "mail",
                    f"{len(mail)} queued message(s) from {', '.join(senders)} "
                    f'(they start turns; the first says "{first}")',
                )
            )
        schedules = runtime.scheduler.untrusted(sid)
        if schedules is not None:
            items.append(Untrusted(sid, where, "schedules", schedules))
        autonomy = runtime.autonomy.untrusted(sid)
        if autonomy is not None:
            items.append(Untrusted(sid, where, "autonomy", autonomy))
        goal = runtime.goals.untrusted(sid)
        if goal is not None:
            items.append(Untrusted(sid, where, "goal", goal))
    return items


def describe(items: list[Untrusted]) -> str:
    """The chat's and the CLI's account of what is not trusted and how to trust it."""
    lines = [
        "This session holds files that were not made here (unsigned, or signed with another "
        "user's secret: a colleague's folder, a git clone). Nothing of them was loaded:"
    ]
    lines += [f"- {item.where}: {item.what}" for item in items]
    lines.append(
        "Trust them only if you know where they come from: loading a snapshot runs code. "
        "Trust and restore (chat), `prime-agent-lab run --trust`, or "
        "POST /prime-agent/api/sessions/<id>/trust loads them."
    )
    return "\n".join(lines)


def sign_session(runtime: TreeRuntime, session_id: str) -> list[Untrusted]:
    """Sign everything in `session_id`'s folder and its sub-agents' folders as it is now; what
    was untrusted before. The caller restores and delivers."""
    before = untrusted_items(runtime, session_id)
    for sid in {item.session_id for item in before}:
        sign_snapshot(runtime.repository.directory(sid), runtime.signer)
        _local_store(runtime, sid).sign()
        runtime.mailbox.trust_queued(sid)
        runtime.scheduler.trust(sid)
        runtime.autonomy.trust(sid)
        runtime.goals.trust(sid)
    return before
