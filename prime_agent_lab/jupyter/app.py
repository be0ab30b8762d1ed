"""The jupyter_server extension: configuration (`c.PrimeAgentLab.*`), the host and its routes."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from jupyter_core.paths import jupyter_data_dir
from jupyter_server.extension.application import ExtensionApp
from traitlets import Bool, Float, Integer, List, Unicode

from ..adapters.withhold_keys import withhold_keys
from ..core.agent import AgentConfig
from ..core.harness.keeper import ENV_GLOBAL_DIR, default_global_dir
from ..core.held_keys import HeldKeys
from ..core.redaction import SECRET_ENV_VARS
from ..core.sessions import SessionRepository
from ..core.shutdown import SHUTDOWN_SECONDS
from ..providers import held_credentials, make_provider
from . import atomic_contents, kernel_websocket
from .handlers import handlers
from .host import AgentHost, HostSettings

LOOPBACK_HOSTS = {"", "localhost", "127.0.0.1", "0.0.0.0", "::", "::1"}


class PrimeAgentLab(ExtensionApp):
    """A Recursive Language Model agent whose REPL is the notebook's own kernel."""

    name = "prime_agent_lab"
    load_other_extensions = True
    _held_keys = HeldKeys()  # the `kernel_env_strip` variables, taken out of the environment

    provider = Unicode(
        "scripted",
        help="""Model provider: 'anthropic' (Messages API; ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL),
        'openai' (Chat Completions; OPENAI_API_KEY, OPENAI_BASE_URL, also for Ollama, vLLM and other
        OpenAI-compatible servers) or 'scripted' (replays a script file; no key needed).""",
    ).tag(config=True)

    model = Unicode(
        None,
        allow_none=True,
        help="Model name for the provider. Default: the provider's default model.",
    ).tag(config=True)

    script_path = Unicode(
        None,
        allow_none=True,
        help="Script file for the 'scripted' provider. Default: the built-in RLM demo script.",
    ).tag(config=True)

    stream = Bool(True, help="Stream model responses (text appears as it is written).").tag(
        config=True
    )

    output_cap = Integer(
        20_000,
        help="""Characters of each part of a cell's output (stdout, stderr, result, error) that the
        model sees. Longer output keeps its head and tail with a note of what was cut.""",
    ).tag(config=True)

    notebook_output_cap = Integer(
        10_000_000,
        help="Characters of stream output one agent cell may store in the notebook.",
    ).tag(config=True)

    max_message_chars = Integer(
        100_000,
        help="""Characters one chat message may have; a longer one is refused (413). Long input
        belongs in a file or a variable the agent reads.""",
    ).tag(config=True)

    cell_timeout = Float(
        600.0,
        help="Seconds an agent cell may run before the kernel is interrupted and the model told.",
    ).tag(config=True)

    max_iterations = Integer(
        40, help="Model calls allowed in one turn before the turn is stopped."
    ).tag(config=True)

    max_retries = Integer(
        4,
        help="Retries of a model call after a rate limit, server error, timeout or dropped link.",
    ).tag(config=True)

    retry_base_delay = Float(
        1.0,
        help="""First retry delay in seconds; it doubles per attempt, up to 30 s. A server's
        Retry-After wins (see max_retry_after).""",
    ).tag(config=True)

    max_retry_after = Float(
        120.0,
        help="""Longest Retry-After (seconds) a server may ask for: the loop waits as asked up to
        this; a longer one ends the turn with the error instead of holding it.""",
    ).tag(config=True)

    request_timeout = Float(
        600.0,
        help="""Seconds one model call may take in total, the whole streamed answer included (a
        server that only sends keepalives is cut off here); each read also times out after it.
        Hitting it ends the turn with a timeout error (not retried).""",
    ).tag(config=True)

    fenced_code_fallback = Bool(
        False,
        help="""Run ```python blocks of an answer that has no tool call as agent cells. For models
        without tool calling (small local models); off by default, since models that call tools
        show example code in their answers and that must never run.""",
    ).tag(config=True)

    accepts_images = Bool(
        True,
        help="""Send image outputs (plots) to the model. Turn off for text-only models (many
        local ones behind an OpenAI-compatible server): images are then described in words.""",
    ).tag(config=True)

    step_delay = Float(
        0.0,
        help="""Seconds per step of the 'scripted' provider, so a person can watch each cell
        appear (and try Stop). `prime-agent-lab lab` sets 1.0 for the demo.""",
    ).tag(config=True)

    kernel_env_strip = List(
        Unicode(),
        default_value=list(SECRET_ENV_VARS),
        help="""Environment variables taken out of the server process when the extension loads
        (provider API keys by default): the providers get them from a holder, no kernel or
        terminal started afterwards inherits them, and on Linux they are wiped from the process's
        initial environment block (`/proc/<pid>/environ`) and the process is made non-dumpable,
        so code the model writes cannot read them (README "Trust model").""",
    ).tag(config=True)

    shutdown_timeout = Float(
        SHUTDOWN_SECONDS,
        help="""Seconds the server may spend, as it shuts down (SIGTERM, Ctrl-C, the File menu),
        stopping running agent turns (recorded as stopped by the shutdown) and snapshotting the
        kernel variables of every loaded agent. A turn whose cell ignores the interrupt is
        cancelled (still recorded as stopped by the shutdown) and its kernel, still busy, is not
        snapshotted; a snapshot not finished by then is given up.""",
    ).tag(config=True)

    max_tokens = Integer(4096, help="Maximum tokens the model may write per response.").tag(
        config=True
    )

    # Compaction (docs/compaction.md)
    context_window = Integer(
        0,
        help="""The model's context window in tokens. 0: from the table of known Anthropic and
        OpenAI models (128,000 for a model it does not know). Set it for other models, or small
        to try compaction with the 'scripted' provider.""",
    ).tag(config=True)

    compaction_enabled = Bool(
        True,
        help="""Compact by itself when the context passes the window minus
        `compaction_reserve_tokens` (compact.run() works either way).""",
    ).tag(config=True)

    compaction_reserve_tokens = Integer(
        16_384, help="Tokens kept free below the context window; passing the rest compacts."
    ).tag(config=True)

    compaction_keep_recent_tokens = Integer(
        20_000, help="Tokens of the most recent conversation a compaction keeps verbatim."
    ).tag(config=True)

    sessions_dir = Unicode(
        "",
        help="""Where session logs are stored. Default: `.prime-agent/sessions` under the server's
        root directory.""",
    ).tag(config=True)

    kernel_name = Unicode(
        "python3", help="Kernel spec used when the agent has to start a notebook's kernel itself."
    ).tag(config=True)

    kernel_pool_size = Integer(
        2,
        help="""Kernels kept started and ready for sub-agents, so a spawn does not wait for a
        kernel to boot (each idle kernel holds about 50 MB). Refilled in the background after
        each spawn. 0 turns pre-starting off: each sub-agent then starts its kernel itself.""",
    ).tag(config=True)

    evict_after_minutes = Float(
        30.0,
        help="""Minutes a sub-agent may sit idle (no turn, no open chat or notebook tab, no
        running sub-agent, nothing pinning it) before it is evicted: its kernel variables are
        snapshotted, its kernel is shut down, and it comes back from disk, variables restored,
        when it is next addressed. 0 never evicts.""",
    ).tag(config=True)

    harness_dir = Unicode(
        "",
        help="""Directory of the global harness store: the prompt notes, memories, skills and
        sub-agent specs every session shares (`rlm.harness.create_memory(..., global_=True)`).
        Empty: $PRIME_AGENT_LAB_HARNESS_DIR, else prime_agent_lab/harness in the Jupyter data
        directory. Read once when the server starts.""",
    ).tag(config=True)

    snapshot_variable_cap = Integer(
        16 * 2**20,
        help="""Bytes one kernel variable may take in a snapshot (pickled); bigger ones are
        skipped, and the agent is told which when the snapshot is restored.""",
    ).tag(config=True)

    snapshot_total_cap = Integer(
        256 * 2**20,
        help="""Bytes a whole kernel snapshot may take; the variables past it are skipped.""",
    ).tag(config=True)

    max_depth = Integer(
        1,
        help="""How deep sub-agents may nest: 1 lets agents the user talks to spawn sub-agents
        (`await rlm(...)`) and sub-agents not; 0 turns sub-agents off.""",
    ).tag(config=True)

    # Auto-refine (docs/harness.md, README "Refine")
    auto_refine_every = Integer(
        25,
        help="""Assistant turns (model calls) between auto-refine reviews: a cheap side call that
        decides whether a refinement of the harness is worth planning. Root agents only. 0 turns
        auto-refine off (refine.run() and /refine work either way).""",
    ).tag(config=True)

    auto_refine_after_compaction = Bool(
        True, help="Also review for a refinement after each compaction (when auto-refine is on)."
    ).tag(config=True)

    auto_refine_cooldown_minutes = Float(
        20.0, help="Minutes after an auto-refine review before the next one may run."
    ).tag(config=True)

    subagent_models = List(
        Unicode(),
        default_value=[],
        help="""Further models sub-agents may run on (`rlm(..., model="openai/gpt-4o")`), as
        `provider/model`; the configured provider and model are always offered.""",
    ).tag(config=True)

    bridge_url = Unicode(
        "",
        help="""URL kernels use to call the host (…/prime-agent/bridge). Default: loopback to this
        server. Set it when kernels run elsewhere (Kernel or Enterprise Gateway).""",
    ).tag(config=True)

    def _make_provider(self) -> Any:
        return self._provider_for(self.provider, self.model)

    def _global_harness_dir(self) -> Path:
        if self.harness_dir:
            return Path(self.harness_dir).expanduser()
        if os.environ.get(ENV_GLOBAL_DIR):
            return default_global_dir()
        return Path(jupyter_data_dir()) / "prime_agent_lab" / "harness"

    def _provider_for(self, provider: str, model: str | None) -> Any:
        return make_provider(
            provider,
            model,
            **held_credentials(provider, self._held_keys),
            script_path=self.script_path,
            stream=self.stream,
            timeout=self.request_timeout,
            fenced_code=self.fenced_code_fallback,
            step_delay=self.step_delay,
        )

    def _default_bridge_url(self) -> str:
        app = self.serverapp
        if self.bridge_url:
            return self.bridge_url.rstrip("/")
        scheme = "https" if app.certfile else "http"
        host = "127.0.0.1" if app.ip in LOOPBACK_HOSTS else app.ip
        if ":" in host:
            host = f"[{host}]"
        return f"{scheme}://{host}:{app.port}{app.base_url}prime-agent/bridge"

    def _withhold_keys(self) -> None:
        """Before anything can start a kernel: the keys leave the environment for a holder."""
        withheld = withhold_keys(self.kernel_env_strip)
        self._held_keys = withheld.keys
        self.log.info("Prime Agent Lab: %s", withheld.summary())

    def initialize_settings(self) -> None:
        self._withhold_keys()
        try:
            first = self._make_provider()
        except (ValueError, FileNotFoundError) as exc:
            self.log.critical("Prime Agent Lab cannot start: %s", exc)
            sys.exit(1)
        root = Path(self.serverapp.root_dir)
        sessions_dir = (
            Path(self.sessions_dir) if self.sessions_dir else root / ".prime-agent" / "sessions"
        )
        settings = HostSettings(
            provider_name=first.name,
            model=first.model,
            agent=AgentConfig(
                output_cap=self.output_cap,
                cell_timeout=self.cell_timeout,
                max_iterations=self.max_iterations,
                max_retries=self.max_retries,
                retry_base_delay=self.retry_base_delay,
                max_retry_after=self.max_retry_after,
                max_tokens=self.max_tokens,
                accepts_images=self.accepts_images,
                context_window=self.context_window or None,
                compaction_enabled=self.compaction_enabled,
                compaction_reserve_tokens=self.compaction_reserve_tokens,
                compaction_keep_recent_tokens=self.compaction_keep_recent_tokens,
            ),
            notebook_output_cap=self.notebook_output_cap,
            kernel_name=self.kernel_name,
            kernel_env_strip=tuple(self.kernel_env_strip),
            bridge_url=self._default_bridge_url,
            max_message_chars=self.max_message_chars,
            max_depth=self.max_depth,
            kernel_pool_size=self.kernel_pool_size,
            evict_after=self.evict_after_minutes * 60.0,
            snapshot_variable_cap=self.snapshot_variable_cap,
            snapshot_total_cap=self.snapshot_total_cap,
            subagent_models=tuple(self.subagent_models),
            provider_for=self._provider_for,
            auto_refine_every=self.auto_refine_every,
            auto_refine_after_compaction=self.auto_refine_after_compaction,
            auto_refine_cooldown_minutes=self.auto_refine_cooldown_minutes,
            harness_dir=self._global_harness_dir(),
            shutdown_timeout=self.shutdown_timeout,
        )
        self.host = AgentHost(
            self.serverapp, SessionRepository(sessions_dir), settings, self._make_provider
        )
        self.settings["prime_agent_host"] = self.host
        self.host.runtime.mailbox.recover()  # messages queued before a restart wait again
        self._configure_server_created_rooms()
        kernel_websocket.install(self.serverapp, self.settings)  # a busy kernel never stalls a tab
        atomic_contents.install(  # no half-written notebooks
            self.serverapp.contents_manager, self.settings.get("file_id_manager")
        )
        self.log.info(
            "Prime Agent Lab: provider %s, model %s, sessions in %s",
            first.name,
            first.model,
            sessions_dir,
        )

    def _configure_server_created_rooms(self) -> None:
        """Rooms that the agent opens itself (no tab has the notebook open) get their update
        store from `ystore_class(...)` without the server's config, so `SQLiteYStore.db_path` is
        ignored and a `.jupyter_ystore.db` appears in the working directory. Hand the config to
        those stores too."""
        ext = self.serverapp.web_app.settings.get("jupyter_server_ydoc")
        if ext is None or getattr(ext.ystore_class, "_prime_agent_configured", False):
            return
        base, config = ext.ystore_class, ext.config

        class ConfiguredYStore(base):  # type: ignore[valid-type, misc]
            _prime_agent_configured = True

            def __init__(self, *args: Any, **kwargs: Any) -> None:
                kwargs.setdefault("config", config)
                super().__init__(*args, **kwargs)

        ConfiguredYStore.__name__ = ConfiguredYStore.__qualname__ = base.__name__
        ext.ystore_class = ConfiguredYStore

    async def _start_jupyter_server_extension(self, serverapp: Any) -> None:
        """The event loop runs now: deliver the messages that waited across the restart."""
        host = getattr(self, "host", None)
        if host is not None:
            host.runtime.mailbox.deliver_recovered()

    def initialize_handlers(self) -> None:
        self.handlers.extend(handlers())

    async def stop_extension(self) -> None:
        host = getattr(self, "host", None)
        if host is not None:
            await host.shutdown()
