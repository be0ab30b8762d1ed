"""How much stream text one agent cell may put into the notebook.

The model's view is capped much tighter elsewhere (core/observation.py); this cap only protects the
document and every open tab from a runaway cell.
"""

from __future__ import annotations


class NotebookOutputCap:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.cut = False

    def admit(self, text: str) -> str:
        """The part of `text` that still fits; the first overflow adds one notice line."""
        if self.cut:
            return ""
        room = self.limit - self.used
        if len(text) <= room:
            self.used += len(text)
            return text
        self.cut = True
        self.used = self.limit
        return (
            text[: max(room, 0)]
            + f"\n[prime-agent: output beyond {self.limit:,} characters is not stored in the "
            "notebook; the kernel kept running]\n"
        )
