"""Settings the administrator locks (`locked_settings`, docs/jupyterhub.md; design in
docs/gateway.md 2.6).

The lock and the values it fixes are read only from the JSON config files the server loaded from
the administrator's config folders: jupyter's config path without the user's config folder and
without anything inside the user's home. Python config files are not run a second time (one may
do more than set values: docker-stacks' makes a certificate), so a locked setting's value must
be in a JSON file there too. A locked setting takes the value given there (its
default when none is), whatever the user's config or the command line says; what it replaces is
logged, naming the setting. The runtime's refusals (a model, a permission mode, a budget past a
lock) read `Settings.locked_settings` (core/locked.py).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jupyter_core.paths import jupyter_config_dir, jupyter_config_path
from traitlets.config import Config, Configurable
from traitlets.config.loader import JSONFileConfigLoader

from ..core.settings import DECLARED, SERVER, spell

LOCKS = "locked_settings"


class LockError(ValueError):
    """The administrator's locks cannot be applied; the message names what is wrong."""


def admin_folders() -> list[Path]:
    """The config folders that are the administrator's, in jupyter's order: its config path
    without the user's config folder (`JUPYTER_CONFIG_DIR`, else ~/.jupyter) and without any
    folder inside the user's home (a venv or `~/.local` of the user's own)."""
    home = Path.home().resolve()
    user = Path(jupyter_config_dir()).resolve()
    folders: list[Path] = []
    for entry in jupyter_config_path():
        path = Path(entry).resolve()
        inside_home = home != Path(home.anchor) and path.is_relative_to(home)
        if path == user or path.is_relative_to(user) or inside_home or path in folders:
            continue
        folders.append(path)
    return folders


def admin_files(loaded: Sequence[str]) -> list[Path]:
    """Of the config files the server loaded (in the order it loaded them), the JSON ones in an
    administrator's folder."""
    folders = admin_folders()
    files: list[Path] = []
    for name in loaded:
        path = Path(name).resolve()
        if path.suffix == ".json" and path.parent in folders and path not in files:
            files.append(path)
    return files


def _read(files: Sequence[Path]) -> Config:
    merged = Config()
    for path in files:
        try:
            merged.merge(JSONFileConfigLoader(path.name, path=str(path.parent)).load_config())
        except Exception as exc:  # the server read it a moment ago: it changed since
            raise LockError(f"cannot read the administrator's config {path}: {exc}") from None
    return merged


def _shown(value: Any) -> str:
    """A value for the log; a dict (MCP servers, their headers) may hold secrets: not shown."""
    return "(not shown)" if isinstance(value, dict) else repr(value)


def apply_locks(
    app: Configurable,
    values: type[Configurable],
    loaded: Sequence[str],
    log: logging.Logger | logging.LoggerAdapter[Any],
) -> list[str]:
    """Set each setting the administrator locked on `app` (the extension, its traits already
    configured) to the administrator's value, and `app.locked_settings` to the lock; the names
    locked. `values`: a Configurable with the same traits, named as the config section, that
    reads the administrator's files alone. LockError: a name that is no server setting, or a
    value its trait refuses."""
    files = admin_files(loaded)
    try:
        admin = values(config=_read(files))
    except LockError:
        raise
    except Exception as exc:  # a TraitError: the administrator's value of the wrong type
        raise LockError(f"the administrator's config ({_where(files)}): {exc}") from None
    names = list(getattr(admin, LOCKS))
    wrong = [n for n in names if n == LOCKS or n not in DECLARED or SERVER not in DECLARED[n].hosts]
    if wrong:
        raise LockError(
            f"{spell(LOCKS, SERVER)} ({_where(files)}) names {', '.join(map(repr, wrong))}, "
            "which is not a setting of the server"
        )
    if list(getattr(app, LOCKS)) != names:
        log.warning(
            "Prime Agent Lab: %s is read only from the administrator's config folders (%s); "
            "the value %r given elsewhere is not used",
            spell(LOCKS, SERVER),
            ", ".join(map(str, admin_folders())) or "none here",
            list(getattr(app, LOCKS)),
        )
    for name in names:
        value, given = getattr(admin, name), getattr(app, name)
        if given != value:
            log.warning(
                "Prime Agent Lab: %s is locked by the administrator to %s (%s); the value %s "
                "given by your config or the command line is not used",
                spell(name, SERVER),
                _shown(value),
                _where(files),
                _shown(given),
            )
        setattr(app, name, value)
    setattr(app, LOCKS, names)
    if names:
        log.info(
            "Prime Agent Lab: settings locked by the administrator (%s): %s",
            _where(files),
            ", ".join(names),
        )
    return names


def _where(files: Sequence[Path]) -> str:
    return ", ".join(map(str, files)) or "no config file: the defaults"
