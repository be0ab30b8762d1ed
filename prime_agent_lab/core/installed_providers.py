"""The model providers installed, and what each declares, found through entry points.

A provider is a `ProviderPlugin` (core/ports.py) named by an entry point of the group
`prime_agent_lab.providers`. The built-in ones are declared in pyproject.toml and found the same
way as one another package installs. Nothing here names a provider: the provider a host may
choose, the key variables withheld from kernels and redacted, and the context windows all come
from the declarations.

A source checkout whose installed metadata predates the group (an editable install from before
it, `pip install -e .` not re-run since), or that is run from its directory without an install,
has no entry points for its own providers: they are then read from the checkout's pyproject.toml.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import TypeVar

from .ports import DEFAULT_CONTEXT_WINDOW, Price, ProviderPlugin

V = TypeVar("V")
GROUP = "prime_agent_lab.providers"
DISTRIBUTION = "prime-agent-lab"
CHECKOUT_PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


@dataclass(frozen=True)
class InstalledProviders:
    """The providers found, by name, and the entry points that could not be used (with why)."""

    plugins: Mapping[str, ProviderPlugin]
    problems: Mapping[str, str]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.plugins)

    def find(self, name: str) -> ProviderPlugin:
        """The provider called `name` (any case); ValueError naming the valid ones otherwise."""
        key = name.strip().lower()
        if key in self.plugins:
            return self.plugins[key]
        if key in self.problems:
            raise ValueError(f"Model provider {name!r} cannot be used: {self.problems[key]}")
        valid = ", ".join(self.names) or "none installed"
        raise ValueError(f"Unknown model provider {name!r}; valid names: {valid}")

    def key_variables(self) -> tuple[str, ...]:
        """Every provider's key variables, each once."""
        return tuple(dict.fromkeys(v for p in self.plugins.values() for v in p.key_variables))

    def context_window(self, model: str, provider: str | None = None) -> int:
        """The context window of `model` (a bare name or `provider/model`) as its provider
        declares it: the longest prefix in its table, else its default. Without a provider
        (or one not installed), the longest prefix in any provider's table, else
        DEFAULT_CONTEXT_WINDOW."""
        vendor, _, bare = model.rpartition("/")
        chosen = self.plugins.get((provider or vendor).strip().lower())
        candidates = [chosen] if chosen is not None else list(self.plugins.values())
        name = bare.lower()
        found = [m for p in candidates if (m := _longest_prefix(p.context_windows, name))]
        if found:
            return max(found, key=lambda match: match[0])[1]
        return chosen.default_context_window if chosen is not None else DEFAULT_CONTEXT_WINDOW

    def price(self, provider: str, model: str) -> Price | None:
        """The list price of `model` (a bare name or `provider/model`) answered by `provider`, as
        that provider declares it: the longest matching prefix of its `prices`, else None."""
        plugin = self.plugins.get(provider.strip().lower())
        if plugin is None:
            return None
        match = _longest_prefix(plugin.prices, model.rpartition("/")[2].lower())
        return match[1] if match else None


def _longest_prefix(table: Mapping[str, V], name: str) -> tuple[int, V] | None:
    """(length, value) of the longest prefix of `name` in `table` (any case), else None."""
    known = [
        (len(prefix), value) for prefix, value in table.items() if name.startswith(prefix.lower())
    ]
    return max(known, key=lambda match: match[0]) if known else None


def discover(extra: Iterable[EntryPoint] = ()) -> InstalledProviders:
    """Load the providers the installed entry points of GROUP declare, and `extra` ones (tests
    pass entry points of their own). An entry point that fails to load, that is not a
    `ProviderPlugin`, whose name differs from the declaration's or that two distributions
    declare is not used; `problems` says why, and choosing it by name reports that. Another
    package's provider under a built-in name is ignored (and said in `problems`): the built-in
    stays usable."""
    points: dict[str, list[EntryPoint]] = {}
    for point in [*_installed_entry_points(), *extra]:
        points.setdefault(point.name.strip().lower(), []).append(point)
    plugins: dict[str, ProviderPlugin] = {}
    problems: dict[str, str] = {}
    for name in sorted(points):
        found = points[name]
        ours = [p for p in found if p.value.startswith(f"{__package__.split('.')[0]}.")]
        if ours and len(found) > len(ours):  # a built-in's name is not another package's to take
            others = " and ".join(f"{p.value} ({_distribution(p)})" for p in found if p not in ours)
            problems[name] = f"also declared by {others}, which is ignored: the name is built in"
            found = ours
        if len({p.value for p in found}) > 1:
            where = " and ".join(f"{p.value} ({_distribution(p)})" for p in found)
            problems[name] = f"declared more than once: {where}"
            continue
        try:
            plugin = found[0].load()
        except Exception as exc:  # a broken plugin must not stop the others, nor the host
            problems[name] = f"{found[0].value} failed to load: {type(exc).__name__}: {exc}"
            continue
        if not isinstance(plugin, ProviderPlugin):
            problems[name] = f"{found[0].value} is not a ProviderPlugin"
        elif plugin.name != name:
            problems[name] = f"its entry point is {name!r}, its declaration says {plugin.name!r}"
        else:
            plugins[name] = plugin
    return InstalledProviders(plugins, problems)


_installed: InstalledProviders | None = None


def installed() -> InstalledProviders:
    """The providers of this process (discovered once, on first use)."""
    global _installed
    if _installed is None:
        _installed = discover()
    return _installed


def context_window(model: str, override: int | None = None, provider: str | None = None) -> int:
    """The context window for `model`: `override` (the `context_window` setting) when set, else
    as its provider declares it (`InstalledProviders.context_window`)."""
    return override or installed().context_window(model, provider)


def _installed_entry_points() -> list[EntryPoint]:
    found = list(metadata.entry_points(group=GROUP))
    if not any(_canonical(_distribution(p)) == DISTRIBUTION for p in found):
        found += checkout_entry_points()
    return found


def checkout_entry_points(pyproject: Path = CHECKOUT_PYPROJECT) -> list[EntryPoint]:
    """This package's entry points of GROUP as its source checkout's pyproject.toml declares
    them; none outside a checkout of this project."""
    if not pyproject.is_file():
        return []
    import tomllib

    project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    if _canonical(str(project.get("name", ""))) != DISTRIBUTION:
        return []
    declared = project.get("entry-points", {}).get(GROUP, {})
    return [EntryPoint(name, value, GROUP) for name, value in declared.items()]


def _distribution(point: EntryPoint) -> str:
    dist = point.dist
    return dist.name if dist is not None else "this checkout"


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def provider_problem(entry: str) -> str | None:
    """Why the provider of a `provider/model` entry cannot be used (not installed, or broken),
    or None."""
    provider = entry.partition("/")[0]
    found, key = installed(), provider.lower()
    if key in found.problems:
        return f"entry {entry!r}: model provider {provider!r} cannot be used: {found.problems[key]}"
    if key not in found.plugins:
        valid = ", ".join(found.names) or "none installed"
        return f"has an unknown model provider {provider!r} (in {entry!r}); valid names: {valid}"
    return None
