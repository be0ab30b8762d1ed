"""The three narrow ports the core talks to: a model provider, a notebook, a kernel.

Adapters for jupyter_server (live documents, server kernels) and for the headless CLI (a file
notebook, a local kernel) implement them; the core imports nothing from Jupyter. A model provider
also declares itself (`ProviderPlugin`, found through an entry point: core/installed_providers.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from .messages import ModelRequest, ModelResponse
from .stop_cause import USER_STOP, StopCause
from .token_counts import token_count
from .wire import ExecutionStatus

# ---------------------------------------------------------------- provider port


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ResponseDone:
    response: ModelResponse


ProviderEvent = TextDelta | ResponseDone


class ProviderError(Exception):
    """A model call failed.

    `retryable` is true for rate limits, server errors, timeouts and dropped connections; the
    loop retries those with backoff and reports the rest in the chat. `setting` is the declared
    setting (core/settings.py) that set the limit this call ran into; the loop names it the way
    the running host spells it (`naming`).
    """

    def __init__(
        self,
        message: str,
        *,
        kind: str = "error",
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
        setting: str | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after
        self.setting = setting

    def naming(self, spelled: str) -> ProviderError:
        """This error, its message ending with its setting as `spelled`."""
        return ProviderError(
            f"{self} ({spelled})",
            kind=self.kind,
            status=self.status,
            retryable=self.retryable,
            retry_after=self.retry_after,
        )


class ModelProvider(Protocol):
    """Streams one assistant turn.

    Yields any number of `TextDelta`s, then exactly one `ResponseDone`. Raises `ProviderError`
    (never an SDK exception) when the call fails. Implementations must not retry on their own:
    the loop owns retries so they are visible in the chat.
    """

    name: str
    model: str

    def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]: ...


DEFAULT_CONTEXT_WINDOW = 128_000
"""For a model nobody declares a window for: small enough to be safe for every current model."""


@dataclass(frozen=True)
class ErrorMapping:
    """How a provider words its failures (the helpers of providers/errors.py read it): the
    vendor as messages name it, the variables a message points the user to, and what each error
    type that arrives inside an answer's stream (with HTTP 200) means, as an HTTP status."""

    vendor: str
    key_variable: str | None = None
    base_url_variable: str | None = None
    stream_error_statuses: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class ProviderOptions:
    """What a host hands a provider's factory: its settings, an explicit key or endpoint, and
    the key variables it took out of its environment (`held_keys`, core/held_keys.py). A
    provider takes what applies to it and leaves the rest."""

    stream: bool
    timeout: float  # seconds per read and for the whole model call
    fenced_code: bool  # run ```python blocks of an answer without tool calls
    step_delay: float  # seconds per step, for providers that play something back
    script_path: str | None = None
    api_key: str | None = None  # wins over the held keys and the environment
    base_url: str | None = None
    held_keys: Mapping[str, str] = field(default_factory=dict)


ProviderFactory = Callable[[str, ProviderOptions], ModelProvider]
"""`make(model, options)`: a provider for `model` (never empty). Raises ValueError for bad
options (an unreadable script, say); a missing key is the first call's `ProviderError`."""


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens."""

    input: float
    output: float
    cache_read: float
    cache_write: float

    def of(self, usage: dict[str, Any]) -> float:
        """The price of the call's token figures (core/token_counts.py: others count as 0)."""

        def tokens(key: str) -> int:
            return token_count(usage.get(key)) or 0

        return (
            tokens("input_tokens") * self.input
            + tokens("output_tokens") * self.output
            + tokens("cache_read_tokens") * self.cache_read
            + tokens("cache_write_tokens") * self.cache_write
        ) / 1_000_000


@dataclass(frozen=True)
class ProviderPlugin:
    """A model provider as it declares itself: everything the rest of the package knows of it.

    Found through an entry point of the group `prime_agent_lab.providers` whose name is `name`
    (core/installed_providers.py; the built-in ones are declared the same way). `key_variables`
    are secrets: no kernel inherits them or reads them from the host, and their values are
    redacted from every cell output. `context_windows` maps a prefix of a model name to its
    window in tokens (the longest prefix wins; `default_context_window` otherwise); `prices` maps
    a prefix to its list price the same way (a model without one has no known cost). Importing
    the module that holds the declaration must stay cheap: `make` imports any SDK it needs.
    """

    name: str
    make: ProviderFactory
    default_model: str
    key_variables: tuple[str, ...] = ()
    context_windows: Mapping[str, int] = field(default_factory=dict)
    default_context_window: int = DEFAULT_CONTEXT_WINDOW
    prices: Mapping[str, Price] = field(default_factory=dict)
    errors: ErrorMapping | None = None
    summary: str = ""  # one line: what it talks to, and how it is configured


# ---------------------------------------------------------------- kernel port

Output = dict[str, Any]
"""An nbformat v4 output dict (stream, display_data, execute_result, error)."""


@dataclass
class OutputEvent:
    """One thing the kernel produced while a cell ran, in notebook terms (folded into the cell's
    outputs by `core.output_fold`). A `note` is the harness's own line, not the kernel's."""

    kind: Literal["output", "clear", "update_display", "note"]
    output: Output | None = None
    wait: bool = False  # for kind == "clear"
    display_id: str | None = None  # for "update_display", and an "output" that has one


KernelRestart = Literal["agent", "died", "external"]
"""Why the kernel's variables are gone: the harness restarted it because the agent's own cell
ignored an interrupt (`agent`), it died and came back (`died`), or someone else restarted it
(`external`, e.g. JupyterLab's Kernel menu)."""

CellState = Literal["waiting", "running"]
"""`waiting`: the agent's cell is held (or queued) until a cell it did not start finishes;
`running`: the kernel is running the agent's cell."""


@dataclass
class ExecutionResult:
    status: ExecutionStatus
    execution_count: int | None = None
    outputs: list[Output] = field(default_factory=list)
    note: str = ""  # what the harness did (interrupted, restarted the kernel, ...)
    restarted: KernelRestart | None = None  # set when the kernel's variables were lost
    # (kind, text) the chat must show: what the kernel met that the user must know (the kernel
    # package missing from the kernel's environment, or of another version than the server's)
    notice: tuple[str, str] | None = None


@dataclass(frozen=True)
class KernelCameBack:
    """What a hook that brought the kernel's variables back (or could not) tells the loop:
    `notice` (kind, text) for the chat and the model, and `note`, the cell's note as the model
    reads it (the `before_cell` hook's goes before the executor's note, the `after_restart`
    hook's replaces it; None: the executor's note stands)."""

    notice: tuple[str, str]
    note: str | None = None


class KernelUnavailable(RuntimeError):
    """The kernel is gone for good (shut down, not crashed); the turn cannot go on."""


class NotebookUnavailable(RuntimeError):
    """The notebook cannot take agent cells (deleted, or its document cannot be opened)."""


class KernelPort(Protocol):
    """Runs code on one kernel, one execution at a time.

    The kernel is shared with the user: an implementation never interrupts a cell it did not
    start. It submits the agent's cell only when the kernel is idle (reporting `waiting`
    meanwhile) and stops it on `stop_cell()`: a cell not yet submitted is withdrawn (status
    `skipped`), a running one is interrupted, and only a cell of the agent's that ignores the
    interrupt gets the kernel restarted (`restarted="agent"`).
    """

    kernel_id: str

    async def execute(
        self,
        code: str,
        on_event: Callable[[OutputEvent], None],
        timeout: float,
        on_state: Callable[[CellState], None] | None = None,
    ) -> ExecutionResult: ...

    def stop_cell(self, cause: StopCause = USER_STOP) -> None:
        """Ask the running `execute` to stop the agent's cell; it returns soon after. `cause`
        words the note of the stopped cell."""
        ...


@runtime_checkable
class RequestOwner(Protocol):
    """A kernel port that can tell its own executions from the other clients' (the user's)."""

    def owns_request(self, msg_id: str) -> bool:
        """Whether the execute request `msg_id` is one this port sent (an agent cell)."""
        ...


@runtime_checkable
class IdleWaiter(Protocol):
    """A kernel port that can wait while another client's (the user's) cell runs."""

    async def wait_idle(self) -> None:
        """Return once no other client's cell runs in the kernel (at once when none does)."""
        ...


# ---------------------------------------------------------------- notebook port


class CellWriter(Protocol):
    """Writes one agent cell's progress into a notebook."""

    cell_id: str

    def set_running(self) -> None: ...

    def apply(self, event: OutputEvent) -> None: ...

    def finish(self, execution_count: int | None) -> None: ...


class NotebookPort(Protocol):
    path: str

    async def append_code_cell(self, source: str, metadata: dict[str, Any]) -> CellWriter: ...

    async def append_markdown_cell(self, source: str, metadata: dict[str, Any]) -> str:
        """Append a markdown cell (a narration cell, `narrate_cells`); returns its id."""
        ...

    async def save(self) -> None:
        """Persist the cells written so far (called after each agent cell)."""
        ...

    async def read_cell_outputs(self, cell_id: str) -> list[Output] | None:
        """The outputs the notebook holds for a cell, or None when the cell is not there."""
        ...
