"""Every setting of Prime Agent Lab, declared once.

A setting is one field of `Settings`: its name, type (the annotation), default, bounds, help text
and the hosts that expose it. Everything else is derived from that field and checked by
tests/test_settings.py: the `c.PrimeAgentLab.*` traitlets (jupyter/app.py), the flags of
`prime-agent-lab run` (cli.py), the README's configuration table (`python -m
prime_agent_lab.core.settings_readme --readme README.md`), and the way an
error message names a setting (`spell`). Adding a setting is one `setting(...)` field here, then
regenerating the README table.

The core reads one typed object (`settings.cell_timeout`); `Settings.host` says which host built
it, so a message names the setting the way that host's user sets it.

This file grows by one field per setting, and should: that is the point of declaring them here.
The README's table is generated in `settings_readme.py`; move more of what reads the table out
(the bounds texts) before this file passes 600 lines.

Size: over 600 lines since issue 21 added the MCP and project-context settings together; moving
the bounds texts out (above) is the next step.
"""

from __future__ import annotations

import math
import re
import typing
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

SERVER = "server"
CLI = "cli"
BOTH = frozenset({SERVER, CLI})
SERVER_ONLY = frozenset({SERVER})
CLI_ONLY = frozenset({CLI})
CONFIG_SECTION = "PrimeAgentLab"  # the traitlets class: `c.PrimeAgentLab.cell_timeout`

_SPEC = "prime_agent_lab.setting"  # the key of a declaration in a dataclass field's metadata
_REFERENCE = re.compile(r"\{(\w+)\}")  # `{max_retry_after}` in a help text names another setting


PERMISSION_MODES = ("plan", "ask", "auto")
"""A session's permission modes, weakest first (`wire.PermissionMode`, core/permission.py)."""


class SettingError(ValueError):
    """A setting's value is out of its bounds or of the wrong type; the message names it."""


@dataclass(frozen=True)
class _Spec:
    help: str
    hosts: frozenset[str]
    min: float | None  # inclusive
    above: float | None  # exclusive lower bound
    max: float | None  # inclusive
    cli_aliases: tuple[str, ...]  # further spellings of the flag (kept from older releases)
    cli_constants: tuple[tuple[str, Any], ...]  # flags that set one value: ("--no-x", 0)
    shown_default: str | None  # the README's default, when the value alone says too little
    cli_flag: str | None = None  # the flag, when not the name's (a list's flag is singular)


def setting(
    default: Any,
    help: str,
    *,
    hosts: frozenset[str] = BOTH,
    min: float | None = None,
    above: float | None = None,
    max: float | None = None,
    cli_aliases: tuple[str, ...] = (),
    cli_constants: dict[str, Any] | None = None,
    shown_default: str | None = None,
    cli_flag: str | None = None,
    secret: bool = False,
) -> Any:
    """Declare one setting (a field of `Settings`). `help` may name other settings as `{name}`;
    each host renders them its own way."""
    spec = _Spec(
        help=" ".join(help.split()),
        hosts=hosts,
        min=min,
        above=above,
        max=max,
        cli_aliases=cli_aliases,
        cli_constants=tuple((cli_constants or {}).items()),
        shown_default=shown_default,
        cli_flag=cli_flag,
    )
    # a secret stays out of `repr(settings)`, so out of any log or error that shows settings
    return field(default=default, repr=not secret, metadata={_SPEC: spec})


@dataclass(frozen=True, kw_only=True)
class Settings:
    # ------------------------------------------------------------ the model
    provider: str = setting(
        "scripted",
        """Model provider, one of those installed: built in are 'anthropic' (Messages API;
        ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL), 'openai' (Chat Completions; OPENAI_API_KEY,
        OPENAI_BASE_URL, also for Ollama, vLLM and other OpenAI-compatible servers) and
        'scripted' (replays a script file; no key needed), and a package can add one
        (docs/providers.md). An unknown name is refused at start.""",
    )
    model: str | None = setting(
        None,
        "Model name for the provider. Default: the provider's default model.",
        shown_default="the provider's",
    )
    script_path: str | None = setting(
        None,
        """Script file for the 'scripted' provider (format in docs/providers.md). Default: the
        built-in RLM demo script.""",
        cli_aliases=("--script",),
        shown_default="the demo script",
    )
    stream: bool = setting(True, "Stream model responses (text appears as it is written).")
    request_timeout: float = setting(
        600.0,
        """Seconds one model call may take in total, the whole streamed answer included (a
        server that only sends keepalives is cut off here); each read also times out after it.
        Hitting it ends the turn with a timeout error (not retried).""",
        above=0,
    )
    max_tokens: int = setting(4096, "Maximum tokens the model may write per response.", min=1)
    accepts_images: bool = setting(
        True,
        """Send image outputs (plots) to the model. Turn off for text-only models (many local
        ones behind an OpenAI-compatible server): images are then described in words.""",
        cli_aliases=("--images",),
    )
    fenced_code_fallback: bool = setting(
        False,
        """Run ```python blocks of an answer that has no tool call as agent cells. For models
        without tool calling (small local models); off by default, since models that call tools
        show example code in their answers and that must never run.""",
        cli_aliases=("--fenced-code",),
    )
    step_delay: float = setting(
        0.0,
        """Seconds per step of the 'scripted' provider, so a person can watch each cell appear
        (and try Stop). `prime-agent-lab lab` sets 1.0 for the demo.""",
        min=0,
    )
    max_retries: int = setting(
        4,
        "Retries of a model call after a rate limit, server error, timeout or dropped link.",
        min=0,
    )
    retry_base_delay: float = setting(
        1.0,
        """First retry delay in seconds; it doubles per attempt, up to {retry_max_delay}. A
        server's Retry-After wins (see {max_retry_after}).""",
        min=0,
    )
    retry_max_delay: float = setting(
        30.0, "Longest retry delay in seconds the doubling of {retry_base_delay} reaches.", min=0
    )
    max_retry_after: float = setting(
        120.0,
        """Longest Retry-After (seconds) a server may ask for: the loop waits as asked up to
        this; a longer one ends the turn with the error instead of holding it.""",
        min=0,
    )

    # ------------------------------------------------------------ the loop and its cells
    output_cap: int = setting(
        20_000,
        """Characters of each part of a cell's output (stdout, stderr, result, error) that the
        model sees. Longer output keeps its head and tail with a note of what was cut.""",
        min=1,
    )
    notebook_output_cap: int = setting(
        10_000_000,
        "Characters of stream output one agent cell may store in the notebook.",
        min=1,
    )
    cell_timeout: float = setting(
        600.0,
        "Seconds an agent cell may run before the kernel is interrupted and the model told.",
        above=0,
    )
    max_iterations: int = setting(
        40, "Model calls per turn before it is stopped; counted anew after a continuation.", min=1
    )
    max_message_chars: int = setting(
        100_000,
        """Characters one chat message may have; a longer one is refused (413). Long input
        belongs in a file or a variable the agent reads.""",
        hosts=SERVER_ONLY,
        min=1,
    )
    max_turns: int = setting(
        100,
        """Turns the whole agent tree may run in one `prime-agent-lab run`; agents that keep
        messaging each other are stopped there.""",
        hosts=CLI_ONLY,
        min=1,
    )

    # ------------------------------------------------------------ compaction (docs/compaction.md)
    context_window: int = setting(
        0,
        """The model's context window in tokens. 0: as its provider declares it for the model
        (128,000 for a model no provider knows). Set it for other models, or small
        to try compaction with the 'scripted' provider.""",
        min=0,
        shown_default="0 (known per model)",
    )
    compaction_enabled: bool = setting(
        True,
        """Compact by itself when the context passes the window minus
        {compaction_reserve_tokens} (compact.run() works either way).""",
    )
    compaction_reserve_tokens: int = setting(
        16_384, "Tokens kept free below the context window; passing the rest compacts.", min=0
    )
    compaction_keep_recent_tokens: int = setting(
        20_000, "Tokens of the most recent conversation a compaction keeps verbatim.", min=0
    )

    # ------------------------------------------------------------ kernels
    kernel_name: str = setting(
        "python3",
        """Kernel spec of the kernels the agent starts itself (a notebook without one, the
        CLI's, sub-agents').""",
        cli_aliases=("--kernel",),
    )
    kernel_pool_size: int = setting(
        2,
        """Kernels kept started and ready for sub-agents, so a spawn does not wait for a kernel
        to boot (each idle kernel holds about 50 MB). Refilled in the background after each
        spawn. 0 turns pre-starting off: each sub-agent then starts its kernel itself
        (docs/kernel-pool.md).""",
        min=0,
    )
    kernel_env_strip: tuple[str, ...] | None = setting(
        None,
        """Environment variables taken out of the server process when the extension loads
        (by default the key variables every installed provider declares, docs/providers.md;
        a list replaces them): the providers get them from a holder, no kernel or
        terminal started afterwards inherits them, and on Linux they are wiped from the process's
        initial environment block (`/proc/<pid>/environ`) and the process is made non-dumpable,
        so code the model writes cannot read them (README "Trust model").""",
        hosts=SERVER_ONLY,
        shown_default="the providers' key variables",
    )
    bridge_url: str = setting(
        "",
        """URL kernels use to call the host (…/prime-agent/bridge). Default: loopback to this
        server (the CLI: to the address of {bridge_listen}). Set it when kernels run elsewhere
        (Kernel or Enterprise Gateway).""",
        shown_default="loopback to this host",
    )
    bridge_listen: str = setting(
        "127.0.0.1:0",
        """HOST:PORT the CLI's bridge server listens on (port 0: any free one). Kernels on
        another machine (a gateway's) need an address they reach, and {bridge_url} the URL
        they reach it by; each call is signed with its kernel's own secret.""",
        hosts=CLI_ONLY,
    )
    gateway_url: str | None = setting(
        None,
        """Start every kernel of the run (root, sub-agents, pool) on this Jupyter Kernel or
        Enterprise Gateway, as `jupyter server --gateway-url` does; also read from
        JUPYTER_GATEWAY_URL, and the gateway's other settings from jupyter_server's
        `JUPYTER_GATEWAY_*` variables. Default: local kernels.""",
        hosts=CLI_ONLY,
        shown_default="JUPYTER_GATEWAY_URL, else local kernels",
    )
    gateway_auth_token: str | None = setting(
        None,
        """The gateway's auth token. Prefer JUPYTER_GATEWAY_AUTH_TOKEN, which other users
        cannot see in the process list.""",
        hosts=CLI_ONLY,
        shown_default="JUPYTER_GATEWAY_AUTH_TOKEN",
        secret=True,
    )

    # ------------------------------------------------------------ sub-agents and their messages
    max_depth: int = setting(
        1,
        """How deep sub-agents may nest: 1 lets agents the user talks to spawn sub-agents
        (`await rlm(...)`) and sub-agents not; 0 turns sub-agents off.""",
        min=0,
    )
    subagent_models: tuple[str, ...] = setting(
        (),
        """Further models sub-agents may run on (`rlm(..., model="openai/gpt-4o")`) and a
        session may switch to (the panel's model picker, `/model`), as `provider/model` of an
        installed provider (anything else is refused at start); the configured provider and
        model are always offered. On the command line: the flag once per model, or a list
        (`'["openai/gpt-4o","anthropic/claude-sonnet-4-5"]'`).""",
        hosts=SERVER_ONLY,
    )
    max_task_chars: int = setting(
        100_000,
        "Characters the task of one sub-agent may have; a longer `rlm(...)` task is refused.",
        min=1,
    )
    message_max_bytes: int = setting(
        16 * 1024,
        "Bytes (UTF-8) one message between agents may have, after stripping.",
        min=1,
    )
    message_max_pending: int = setting(
        20, "Messages that may wait for one agent; a sender past it is told to wait.", min=1
    )
    message_rate_per_second: float = setting(
        3.0,
        """Messages per second one agent may send to one other (a token bucket holding
        {message_rate_burst}).""",
        above=0,
    )
    message_rate_burst: int = setting(
        3, "Messages one agent may send to one other at once, before the rate applies.", min=1
    )

    # ------------------------------------------------------------ snapshots and eviction
    evict_after_minutes: float = setting(
        30.0,
        """Minutes a sub-agent may sit idle (no turn, no open chat or notebook tab, no running
        sub-agent, nothing pinning it) before it is evicted: its kernel variables are
        snapshotted, its kernel is shut down, and it comes back from disk, variables restored,
        when it is next addressed. 0 never evicts (docs/lifecycle.md).""",
        min=0,
    )
    snapshot_variable_cap: int = setting(
        16 * 2**20,
        """Bytes one kernel variable may take in a snapshot (pickled); bigger ones are skipped,
        and the agent is told which when the snapshot is restored (docs/snapshots.md).""",
        min=0,
    )
    snapshot_total_cap: int = setting(
        256 * 2**20,
        "Bytes a whole kernel snapshot may take; the variables past it are skipped.",
        min=0,
    )
    snapshot_debounce: float = setting(
        1.5, "Seconds after a turn ends before the agent's kernel variables are snapshotted.", min=0
    )
    shutdown_timeout: float = setting(
        5.0,
        """Seconds the server may spend, as it shuts down (SIGTERM, Ctrl-C, the File menu),
        stopping running agent turns (recorded as stopped by the shutdown) and snapshotting the
        kernel variables of every loaded agent. A turn whose cell ignores the interrupt is
        cancelled (still recorded as stopped by the shutdown) and its kernel, still busy, is not
        snapshotted; a snapshot not finished by then is given up.""",
        hosts=SERVER_ONLY,
        min=0,
    )

    # ------------------------------------------------------------ storage and the harness
    sessions_dir: str = setting(
        "",
        """Where session logs are stored. Default: `.prime-agent/sessions` under the server's
        root directory.""",
        hosts=SERVER_ONLY,
        shown_default="`<root>/.prime-agent/sessions`",
    )
    harness_dir: str = setting(
        "",
        """Directory of the global harness store: the prompt notes, memories, skills and
        sub-agent specs every session shares (`rlm.harness.create_memory(..., global_=True)`).
        Empty: $PRIME_AGENT_LAB_HARNESS_DIR, else prime_agent_lab/harness in the Jupyter data
        directory. Read once at start.""",
        shown_default="`$PRIME_AGENT_LAB_HARNESS_DIR` or the Jupyter data directory's",
    )
    auto_refine_every: int = setting(
        25,
        """Assistant turns (model calls) between auto-refine reviews: a cheap side call that
        decides whether a refinement of the harness is worth planning. Root agents only. 0 turns
        auto-refine off (refine.run() and /refine work either way).""",
        min=0,
        cli_constants={"--no-auto-refine": 0},
    )
    auto_refine_after_compaction: bool = setting(
        True, "Also review for a refinement after each compaction (when auto-refine is on)."
    )
    auto_refine_cooldown_minutes: float = setting(
        20.0, "Minutes after an auto-refine review before the next one may run.", min=0
    )

    # ------------------------------------------------------------ autonomy (docs/autonomy.md)
    autonomous: bool = setting(
        False,
        """Run each task as an autonomous run: the agent keeps going (no human is available)
        until its gates pass or a budget ends it. The server: the Autonomous switch of new
        sessions starts on. The CLI: any `--autonomous-*` flag turns it on too.""",
    )
    autonomous_gates: tuple[str, ...] = setting(
        (),
        """Checks an autonomous run must pass before it ends, in order: a shell command run in
        the run's folder (exit status 0 passes), or `py:EXPR`, an `assert` or an expression
        checked in the agent's kernel. The CLI flag is repeatable.""",
        cli_flag="--autonomous-gate",
    )
    autonomous_max_turns: int = setting(
        12, "Model calls an autonomous run may make (its sub-agents' not counted).", min=1
    )
    autonomous_max_tokens: int = setting(
        80_000,
        """Tokens an autonomous run may use: input, output and cache writes of its model calls
        and its sub-agents' (cache reads not counted).""",
        min=1,
    )
    autonomous_timeout: float = setting(
        30.0, "Minutes of wall time an autonomous run may take.", above=0
    )
    autonomous_continuations: int = setting(
        3,
        """Times an autonomous run without gates is kept going with the continuation prompt
        after the model answered it was done.""",
        min=0,
    )
    gate_retries: int = setting(
        3, "Failed runs of one gate before an autonomous run ends (retries exhausted).", min=1
    )
    gate_timeout: float = setting(
        300.0, "Seconds a gate may run before its whole process tree is killed.", above=0
    )
    gate_output_chars: int = setting(
        6000,
        "Characters of a failed gate's output the model reads (its head and tail are kept).",
        min=200,
    )
    # ------------------------------------------------------------ goals (docs/autonomy.md)
    goal_max_continuations: int = setting(
        50,
        """Continuations an active goal may make without `goal.complete()` before it is paused
        (a guard for a goal without a token budget); /goal resume counts again from 0.""",
        min=1,
    )

    # ------------------------------------------------------------ MCP servers (docs/mcp.md)
    mcp_servers: dict[str, Any] | None = setting(  # noqa: RUF009 (its default is None)
        None,
        """MCP servers the agent's cells reach (`await mcp.call_tool(...)`), in the
        `mcpServers` JSON shape (with or without that key): each name maps to `command`, `args`,
        `env`, `cwd` (stdio) or `url`, `headers` (HTTP). Read after the user's global file
        (`<jupyter config dir>/prime_agent_lab/mcp.json`); a server of the same name replaces
        the file's.""",
        hosts=SERVER_ONLY,
        shown_default="none",
    )
    mcp_config_files: tuple[str, ...] = setting(
        (),
        """A JSON file of MCP servers in the `mcpServers` shape, read after the user's global
        file; a later file's server replaces one of the same name.""",
        hosts=CLI_ONLY,
        cli_flag="--mcp-config",
    )
    mcp_call_timeout: float = setting(
        60.0, "Seconds one MCP call may take before it is cancelled and the cell told.", above=0
    )
    mcp_output_cap: int = setting(
        1_000_000,
        "Characters of one MCP result (serialised); a larger one is refused with its size.",
        min=1,
    )

    # ------------------------------------------------------------ docs/project-context.md
    project_context: bool = setting(
        True,
        """Put the project's trusted context files (AGENTS.md, else CLAUDE.md, else
        .github/copilot-instructions.md, from the notebook's folder up to the root) into the
        system prompt.""",
    )
    project_context_cap: int = setting(
        16_000,
        """Characters of one project context file in the system prompt (all of them together:
        twice that); a longer file is cut at a line boundary and the cut is said.""",
        min=100,
    )

    # ------------------------------------------------ permission modes (docs/pairing.md 4)
    permission: str = setting(
        "auto",
        """A new session's permission mode (given to `run`, a continued session's too): 'auto'
        (cells run as the model writes them), 'ask' (each agent cell waits for the user's Run,
        Edit or Skip) or 'plan' (no cell runs; the model answers in text). On the server, held
        to {max_permission}. No mode is a sandbox.""",
    )
    max_permission: str = setting(
        "auto",
        """The highest permission mode a session may choose ('plan' < 'ask' < 'auto'); a
        higher choice is refused (403).""",
        hosts=SERVER_ONLY,
    )
    locked_settings: tuple[str, ...] = setting(
        (),
        """Settings the administrator fixes for every user (docs/jupyterhub.md), e.g.
        provider, model, {subagent_models} (the models offered), {max_permission} and the
        autonomy budgets. Read only from the administrator's config folders (`jupyter --paths`
        entries outside the user's home and config folder); each named setting keeps the value
        given there (else its default) whatever the user's config or the command line says,
        and runtime choices cannot go past it (403).""",
        hosts=SERVER_ONLY,
    )

    # Teaching (issue 19, docs/teaching.md): notebooks that read on their own.
    narrate_cells: bool = setting(
        False,
        """Teaching mode for the notebook: write the user's message and the agent's final
        answer as markdown cells around the agent's code cells, so the saved notebook reads on
        its own and re-runs top to bottom (nbclient, Run All) to the same outputs.""",
    )

    # Not a setting: which host built these settings, so messages spell a setting its way.
    host: str = SERVER

    def __post_init__(self) -> None:
        if self.host not in BOTH:
            raise ValueError(f"host must be {SERVER!r} or {CLI!r}, not {self.host!r}")
        for declared in DECLARED.values():
            wrong = problem(declared.name, getattr(self, declared.name))
            if wrong is not None:
                raise SettingError(f"{spell(declared.name, self.host)} {wrong}")
        for name in ("permission", "max_permission"):  # a mode (core/permission.py)
            if getattr(self, name) not in PERMISSION_MODES:
                modes = ", ".join(PERMISSION_MODES)
                raise SettingError(
                    f"{self.spell(name)} must be one of {modes}, not {getattr(self, name)!r}"
                )
        for entry in self.subagent_models:  # each `provider/model` of an installed provider
            wrong = subagent_model_problem(entry)
            if wrong is not None:
                raise SettingError(f"{self.spell('subagent_models')} {wrong}")

    def spell(self, name: str) -> str:
        """`name` as this host's user sets it (`--cell-timeout`, `c.PrimeAgentLab.cell_timeout`)."""
        return spell(name, self.host)


@dataclass(frozen=True)
class Declared:
    """One declared setting, as the generators read it."""

    name: str
    type: Any  # the annotation: one of TYPES
    default: Any
    spec: _Spec

    @property
    def hosts(self) -> frozenset[str]:
        return self.spec.hosts

    @property
    def flags(self) -> tuple[str, ...]:
        """The CLI flags, the generated one first (`--cell-timeout`), then the aliases."""
        generated = "--" + self.name.replace("_", "-")
        return (self.spec.cli_flag or generated, *self.spec.cli_aliases)


def _declared() -> dict[str, Declared]:
    hints = typing.get_type_hints(Settings)
    found = {}
    for f in fields(Settings):
        spec = f.metadata.get(_SPEC)
        if spec is not None:
            assert f.default is not MISSING, f"setting {f.name} has no default"
            found[f.name] = Declared(f.name, hints[f.name], f.default, spec)
    return found


DECLARED: dict[str, Declared] = _declared()
# what a generator must handle
TYPES = (str, str | None, bool, int, float, tuple[str, ...], tuple[str, ...] | None)
TYPES += (dict[str, Any] | None,)  # a JSON object (`mcp_servers`)


def declared(host: str | None = None) -> list[Declared]:
    """The declared settings in declaration order; with `host`, those that host exposes."""
    return [d for d in DECLARED.values() if host is None or host in d.hosts]


# ---------------------------------------------------------------- naming


def spell(name: str, host: str) -> str:
    """How the user of `host` sets `name`: `--cell-timeout` (CLI) or
    `c.PrimeAgentLab.cell_timeout` (server, and settings the CLI has no flag for)."""
    declared = DECLARED[name]
    if host == CLI and CLI in declared.hosts:
        return declared.flags[0]
    return f"c.{CONFIG_SECTION}.{name}"


def server_option(name: str, value: object) -> str:
    """The command-line option that sets `name` for a Jupyter server."""
    assert SERVER in DECLARED[name].hosts, name
    return f"--{CONFIG_SECTION}.{name}={value}"


def help_text(name: str, style: str) -> str:
    """The help of `name` with the settings it mentions written for `style`: SERVER (the trait
    name, as traitlets' help shows settings), CLI (the flag) or "markdown"."""

    def reference(match: re.Match[str]) -> str:
        other = DECLARED[match.group(1)]
        if style == CLI and CLI in other.hosts:
            return other.flags[0]
        return f"`{other.name}`" if style == "markdown" else other.name

    return _REFERENCE.sub(reference, DECLARED[name].spec.help)


# ---------------------------------------------------------------- values and bounds


def problem(name: str, value: object) -> str | None:
    """What is wrong with `value` for `name` ("must be a positive number, not -1"), or None."""
    declared = DECLARED[name]
    kind = declared.type
    if kind is bool:
        return None if isinstance(value, bool) else f"must be True or False, not {value!r}"
    if kind in (str, str | None):
        if isinstance(value, str) or (value is None and kind is not str):
            return None
        return f"must be a string, not {value!r}"
    if kind in (tuple[str, ...], tuple[str, ...] | None):
        if isinstance(value, tuple) and all(isinstance(v, str) for v in value):
            return None
        if value is None and kind != tuple[str, ...]:
            return None
        return f"must be a list of strings, not {value!r}"
    if kind == dict[str, Any] | None:
        if value is None or (isinstance(value, dict) and all(isinstance(k, str) for k in value)):
            return None
        return f"must be a dict with string keys, not {type(value).__name__}"
    whole = kind is int
    if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)):
        return f"must be {'a whole number' if whole else 'a number'}, not {value!r}"
    spec = declared.spec
    inside = (
        math.isfinite(value)
        and (spec.min is None or value >= spec.min)
        and (spec.above is None or value > spec.above)
        and (spec.max is None or value <= spec.max)
    )
    if inside:
        return None
    shown = f"{value:g}" if isinstance(value, float) else str(value)
    return f"must be {bounds_phrase(name)}, not {shown}"


def subagent_model_problem(entry: str) -> str | None:
    """What is wrong with the form of one `subagent_models` entry (not `provider/model`), or
    None. Whether its provider is installed is the model choice's to say (adapters/model_choice.py,
    when a host starts)."""
    provider, _, model = entry.partition("/")
    if not provider.strip() or not model.strip() or entry != entry.strip():
        return f"entry {entry!r} is not provider/model (as in 'openai/gpt-4.1')"
    return None


def bounds_phrase(name: str) -> str:
    """`a positive whole number`, `0 or a positive number`, `a number of at most 5`, ..."""
    declared = DECLARED[name]
    spec, whole = declared.spec, declared.type is int
    noun = "whole number" if whole else "number"
    if spec.above == 0 or (whole and spec.min == 1):
        phrase = f"a positive {noun}"
    elif spec.min == 0:
        phrase = f"0 or a positive {noun}"
    elif spec.min is not None:
        phrase = f"a {noun} of at least {spec.min:g}"
    elif spec.above is not None:
        phrase = f"a {noun} above {spec.above:g}"
    else:
        phrase = f"a finite {noun}"
    return phrase if spec.max is None else f"{phrase} and at most {spec.max:g}"


def parse(name: str, text: str) -> Any:
    """`text` (a command-line word) as a value of `name`; ValueError says what is wrong."""
    kind = DECLARED[name].type
    value: Any = text
    if kind is int:
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a whole number") from None
    elif kind is float:
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a number") from None
    elif kind not in (str, str | None):
        raise ValueError(f"{name} cannot be given as one word")
    wrong = problem(name, value)
    if wrong is not None:
        raise ValueError(wrong)
    return value


DEFAULTS = Settings()
