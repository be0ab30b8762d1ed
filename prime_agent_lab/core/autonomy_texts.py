"""The words an autonomous run gives the model (docs/autonomy.md): the default continuation and
the continuation after a failed gate, with the one line the chat shows for it."""

from __future__ import annotations

from .entry_types import gate_words

CONTINUATION_PROMPT = (
    "[autonomous run] No human is available: nobody will answer a question or approve a step. "
    "Keep working until the task is done. Verify your assumptions by running code instead of "
    "asking. If you are truly blocked, prove the blocker with evidence (what you ran and what it "
    "printed). Do not end the session yourself; the harness ends an autonomous run."
)


def gate_failure_texts(
    command: str,
    position: tuple[int, int],
    attempt: tuple[int, int],
    exit_status: int | None,
    output: str,
    unchanged: str | None = None,
) -> tuple[str, str]:
    """What the model reads after gate `position` (index, of how many) failed its `attempt`
    (failures, of how many allowed), and the chat's line. `unchanged`: it was not run again
    because the workspace is unchanged (the fingerprint's note, or "")."""
    (index, count), (failures, retries) = position, attempt
    status = "killed at its timeout" if exit_status is None else exit_status
    head = (
        f"[autonomous run] Gate {index} of {count} failed: `{command}` "
        f"(exit status {status}; failed attempt {failures} of {retries})."
    )
    if unchanged is not None:
        head += (
            " It was not run again: the workspace is unchanged since the failed run, so it "
            "would fail the same way"
            + (f" ({unchanged})" if unchanged else "")
            + ". Its output then:"
        )
    else:
        head += " Its output:"
    text = (
        f"{head}\n```text\n{output}\n```\n"
        "Fix it, then show terminal evidence that it passes (run the check yourself and "
        "show its output) before you answer again. No human is available."
    )
    summary = (
        f"Gate {gate_words(command)} failed (attempt {failures} of {retries}); the autonomous "
        "run continues."
    )
    return text, summary
