"""The jupyter_server extension: configuration (`c.PrimeAgentLab.*`), the host and its routes."""

from __future__ import annotations

import ast
import dataclasses
import os
import sys
import types
from pathlib import Path
from typing import Any

from jupyter_core.paths import jupyter_data_dir
from jupyter_server.extension.application import ExtensionApp
from traitlets import Bool, Dict, Float, Integer, List, TraitError, TraitType, Unicode
from traitlets.config import Configurable

from ..adapters.model_choice import ModelChoice
from ..adapters.withhold_keys import withhold_keys
from ..core.gateway_url import url_problem
from ..core.harness.keeper import ENV_GLOBAL_DIR, default_global_dir
from ..core.held_keys import HeldKeys
from ..core.project_trust import SaveKeepsTrust
from ..core.sessions import SessionRepository
from ..core.settings import CONFIG_SECTION, SERVER, Declared, declared, help_text
from . import atomic_contents, kernel_websocket, notebook_sessions
from .admin_locks import LockError, apply_locks
from .gateway_log import leave_out_kernel_arguments
from .handlers import handlers
from .host import AgentHost, HostSettings
from .stop_order import StopAfter

LOOPBACK_HOSTS = {"", "localhost", "127.0.0.1", "0.0.0.0", "::", "::1"}
_TRAITS: dict[Any, type[TraitType[Any, Any]]] = {
    str: Unicode,
    bool: Bool,
    int: Integer,
    float: Float,
}


class _StringList(List):  # type: ignore[type-arg]
    """A list of strings that also reads a whole list given as one value on the command line
    (`--PrimeAgentLab.subagent_models=["a/b","c/d"]`). jupyter_server parses the extension's
    options before it knows their traits, so such a value reaches the trait as text, which
    traitlets' own `from_string` fails to read (it validates without an object) and keeps as
    one entry. Not a list literal: one entry (`--PrimeAgentLab.x=a/b`, repeatable)."""

    def from_string(self, s: str) -> list[str] | None:
        text = s.strip()
        if text == "None" and self.allow_none:
            return None
        if text.startswith("[") and text.endswith("]"):
            try:
                value = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                raise TraitError(f"{s!r} is not a list of strings") from None
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                return value
            raise TraitError(f"{s!r} is not a list of strings")
        return [s]


def _trait(setting: Declared) -> TraitType[Any, Any]:
    """The configurable trait of one declared setting (core/settings.py)."""
    help = help_text(setting.name, SERVER)
    if setting.type == tuple[str, ...]:
        trait: TraitType[Any, Any] = _StringList(
            Unicode(), default_value=list(setting.default), help=help
        )
    elif setting.type == tuple[str, ...] | None:
        trait = _StringList(Unicode(), default_value=setting.default, allow_none=True, help=help)
    elif setting.type == dict[str, Any] | None:
        trait = Dict(default_value=setting.default, allow_none=True, help=help)
    elif setting.type == str | None:
        trait = Unicode(setting.default, allow_none=True, help=help)
    else:
        trait = _TRAITS[setting.type](setting.default, help=help)
    return trait.tag(config=True)


# Every server setting as a trait, generated from the declaration; PrimeAgentLab declares none.
SettingTraits = types.new_class(
    "PrimeAgentLabSettings",
    (ExtensionApp,),
    exec_body=lambda body: body.update({s.name: _trait(s) for s in declared(SERVER)}),
)
# The same traits, read from the administrator's config files alone (jupyter/admin_locks.py).
AdminValues = types.new_class(
    CONFIG_SECTION,
    (Configurable,),
    exec_body=lambda body: body.update({s.name: _trait(s) for s in declared(SERVER)}),
)


def _trait_value(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


class PrimeAgentLab(SettingTraits):  # type: ignore[misc, valid-type]
    """A Recursive Language Model agent whose REPL is the notebook's own kernel."""

    name = "prime_agent_lab"
    load_other_extensions = True
    _held_keys = HeldKeys()  # the `kernel_env_strip` variables, taken out of the environment

    def _link_jupyter_server_extension(self, serverapp: Any) -> None:
        """A value of the wrong type (`c.PrimeAgentLab.cell_timeout = "abc"`) stops the server
        with one line naming the setting, like a value out of bounds does; jupyter_server would
        log the error and go on with this extension half-configured."""
        leave_out_kernel_arguments(serverapp.log)  # before any kernel starts on a gateway
        try:
            super()._link_jupyter_server_extension(serverapp)
        except TraitError as exc:
            serverapp.log.critical("Prime Agent Lab cannot start: c.PrimeAgentLab: %s", exc)
            sys.exit(1)

    def _global_harness_dir(self) -> Path:
        if self.harness_dir:
            return Path(self.harness_dir).expanduser()
        if os.environ.get(ENV_GLOBAL_DIR):
            return default_global_dir()
        return Path(jupyter_data_dir()) / "prime_agent_lab" / "harness"

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

    def _apply_admin_locks(self) -> None:
        """Before any setting is used: the administrator's locked values replace the user's."""
        loaded = [*self.serverapp.loaded_config_files, *self.loaded_config_files]
        try:
            apply_locks(self, AdminValues, loaded, self.log)
        except LockError as exc:
            self.log.critical("Prime Agent Lab cannot start: %s", exc)
            sys.exit(1)

    def _check_gateway_url(self) -> None:
        """jupyter_server takes `JUPYTER_GATEWAY_URL` unchecked (a pasted leading space fails
        at the first kernel start) and a token in its query (then in the gateway's log)."""
        gateway = self.serverapp.gateway_config
        token_setting = "c.GatewayClient.auth_token (or JUPYTER_GATEWAY_AUTH_TOKEN)"
        if gateway.gateway_enabled and (problem := url_problem(gateway.url, token_setting)):
            self.log.critical(
                "Prime Agent Lab cannot start: the gateway URL (c.GatewayClient.url, "
                "JUPYTER_GATEWAY_URL or jupyter_server's gateway-url option) %s",
                problem,
            )
            sys.exit(1)

    def initialize_settings(self) -> None:
        self._check_gateway_url()
        self._apply_admin_locks()
        self._withhold_keys()
        try:
            settings = HostSettings(  # the bounds are checked here (a SettingError names one)
                **{s.name: _trait_value(getattr(self, s.name)) for s in declared(SERVER)},
                host=SERVER,
                bridge_address=self._default_bridge_url,
            )
            first = ModelChoice(lambda: settings, self._held_keys).configured()
        except (ValueError, FileNotFoundError) as exc:
            self.log.critical("Prime Agent Lab cannot start: %s", exc)
            sys.exit(1)
        settings = dataclasses.replace(
            settings,
            provider=first.name,
            model=first.model,
            harness_dir=str(self._global_harness_dir()),
        )
        root = Path(self.serverapp.root_dir)
        sessions_dir = (
            Path(self.sessions_dir) if self.sessions_dir else root / ".prime-agent" / "sessions"
        )
        self.host = AgentHost(
            self.serverapp, SessionRepository(sessions_dir), settings, keys=self._held_keys
        )
        self.settings["prime_agent_host"] = self.host
        StopAfter(self.serverapp, self.host.shutdown).install()  # snapshots while listening
        self.host.runtime.start()  # messages queued before a restart wait again
        self._configure_server_created_rooms()
        kernel_websocket.install(self.serverapp, self.settings)  # a busy kernel never stalls a tab
        notebook_sessions.install(self.serverapp.session_manager)  # one kernel per notebook
        atomic_contents.install(  # no half-written notebooks
            self.serverapp.contents_manager, self.settings.get("file_id_manager")
        )
        SaveKeepsTrust(self.host.runtime.project.trusted, root).install(  # project-context.md
            self.serverapp.contents_manager
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
            host.runtime.deliver_recovered()

    def initialize_handlers(self) -> None:
        self.handlers.extend(handlers())

    async def stop_extension(self) -> None:
        host = getattr(self, "host", None)
        if host is not None:
            await host.shutdown()
