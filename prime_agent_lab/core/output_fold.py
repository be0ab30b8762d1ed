"""One cell's outputs, folded from what its kernel sends, as nbclient and JupyterLab store them.

The model's observation (through the kernel executor), the CLI's file notebook and the server's
live notebook each keep one `OutputFold` per cell and feed it the same `OutputEvent`s, so the three
cannot disagree. Each event returns the `Change`s it made, for a writer that edits a document in
place (the live notebook turns them into Y edits).

The rules are nbclient's (`NotebookClient.process_message`), which JupyterLab shares:

- Consecutive text of the same stream (`stdout`, `stderr`) is one output. Its text is kept as
  sent, `\\r` and `\\b` included: the notebook applies them when it renders, the model's
  observation collapses them (core/observation.py).
- `clear_output()` clears at once. `clear_output(wait=True)` clears when the next output arrives,
  so if nothing follows, the output stays. A display update does not count as the next output.
- `display_data` / `execute_result` with a `display_id` is remembered by that id;
  `update_display_data`, and a later display with the same id, replace the data and metadata of
  every output of the cell that has it (the output keeps its type). A clear forgets the ids.
- A harness note (`OutputEvent("note")`) is appended like stream output but is not the kernel's
  next output: a pending clear stays pending.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from .ports import Output, OutputEvent


class Appended(NamedTuple):
    """A new output at the end (a stream's text is its first piece)."""

    output: Output


class StreamExtended(NamedTuple):
    """`text` was added to the stream output `name` at `index`, the last output."""

    index: int
    name: str
    text: str


class Replaced(NamedTuple):
    """The output at `index` was replaced by a display update."""

    index: int
    output: Output


class Cleared(NamedTuple):
    """Every output is gone."""


Change = Appended | StreamExtended | Replaced | Cleared
CLEARED = Cleared()


class _Stream:
    """A stream output whose text arrives in pieces (joined only when read, so a chatty cell
    costs linear time, not quadratic)."""

    __slots__ = ("name", "pieces")

    def __init__(self, name: str, text: str) -> None:
        self.name = name
        self.pieces = [text]

    def text(self) -> str:
        if len(self.pieces) > 1:
            self.pieces[:] = ["".join(self.pieces)]
        return self.pieces[0]

    def output(self) -> Output:
        return {"output_type": "stream", "name": self.name, "text": self.text()}


class OutputFold:
    """The outputs of one cell. `admit_stream` may shorten stream text before it is kept (the
    notebooks' size cap); it returns "" for text that is not kept."""

    def __init__(self, admit_stream: Callable[[str], str] | None = None) -> None:
        self._admit = admit_stream
        self._outputs: list[_Stream | Output] = []
        self._display_ids: dict[str, list[int]] = {}
        self._clear_pending = False

    def __len__(self) -> int:
        return len(self._outputs)

    def outputs(self) -> list[Output]:
        """The outputs as nbformat dicts (copies: the caller may keep or change them)."""
        return [o.output() if isinstance(o, _Stream) else dict(o) for o in self._outputs]

    def apply(self, event: OutputEvent) -> list[Change]:
        """Fold one event in; the changes it made, in order (none: nothing to write)."""
        kind = event.kind
        if kind == "clear":
            if event.wait:
                self._clear_pending = True
                return []
            return self._clear()
        output = event.output or {}
        if kind == "update_display":
            return self._update(event.display_id, output)
        changes = self._clear() if self._clear_pending and kind == "output" else []
        if output.get("output_type") == "stream":
            text = output.get("text", "")
            if not isinstance(text, str):  # nbformat allows a list of lines
                text = "".join(text)
            self._add_stream(output.get("name", "stdout"), text, changes)
            return changes
        if event.display_id:
            changes += self._update(event.display_id, output)
            self._display_ids.setdefault(event.display_id, []).append(len(self._outputs))
        kept = dict(output)
        self._outputs.append(kept)
        changes.append(Appended(dict(kept)))
        return changes

    def reset(self) -> list[Change]:
        """The cell runs again: no outputs, nothing pending."""
        return self._clear()

    def finish(self, execution_count: int | None) -> None:
        """The cell's execution count reaches its `execute_result`."""
        for output in self._outputs:
            if not isinstance(output, _Stream) and output.get("output_type") == "execute_result":
                output["execution_count"] = execution_count

    def _clear(self) -> list[Change]:
        self._clear_pending = False
        self._display_ids.clear()
        if not self._outputs:
            return []
        self._outputs.clear()
        return [CLEARED]

    def _add_stream(self, name: str, text: str, changes: list[Change]) -> None:
        if self._admit is not None:
            text = self._admit(text)
        if not text:
            return
        outputs = self._outputs
        last = outputs[-1] if outputs else None
        if isinstance(last, _Stream) and last.name == name:
            last.pieces.append(text)
            changes.append(StreamExtended(len(outputs) - 1, name, text))
        else:
            outputs.append(_Stream(name, text))
            changes.append(Appended({"output_type": "stream", "name": name, "text": text}))

    def _update(self, display_id: str | None, output: Output) -> list[Change]:
        changes: list[Change] = []
        for index in self._display_ids.get(display_id or "", []):
            current = self._outputs[index]
            if isinstance(current, _Stream):  # never: only displays carry an id
                continue
            updated = {
                **current,
                "data": output.get("data", {}),
                "metadata": output.get("metadata", {}),
            }
            self._outputs[index] = updated
            changes.append(Replaced(index, dict(updated)))
        return changes
