"""Providers are plugins: a provider declares itself (`ProviderPlugin`) and an entry point of the
group `prime_agent_lab.providers` registers it; the built-in ones are registered the same way.

The plugin here (tests/provider_plugin/plugged_provider.py) is installed as a distribution of its
own: its module and a `*.dist-info` folder with an `entry_points.txt`, in a directory on
PYTHONPATH, which is what `importlib.metadata` reads for any installed package. Nothing else
tells the package about it, yet the CLI and the server run it, withhold and redact its key
variable and use its context windows.
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import nbformat
import pytest

import prime_agent_lab.core
from prime_agent_lab.core import installed_providers
from prime_agent_lab.core.installed_providers import (
    GROUP,
    InstalledProviders,
    checkout_entry_points,
    discover,
)
from prime_agent_lab.core.ports import ProviderOptions, ProviderPlugin
from prime_agent_lab.core.redaction import REPLACEMENT, Redactor, kernel_environment

from .lab_fixtures import (  # noqa: F401  (fixtures: a subprocess server, no in-process one)
    jp_asyncio_loop,
    jp_server_cleanup,
    servers,
    start_server,
)
from .lab_process import LabServer
from .test_cli import ROOT, cli_with_env, json_lines
from .test_server_crash import (
    entries,
    turn_ends,
    wait_until,
)

PLUGIN_SOURCE = Path(__file__).parent / "provider_plugin" / "plugged_provider.py"
PLUGGED = EntryPoint("plugged", "tests.provider_plugin.plugged_provider:PLUGIN", GROUP)
SECRET = "plugged-secret-5e1f9a7c3b"
BUILT_IN = ("anthropic", "openai", "scripted")


def install_distribution(site: Path, name: str, entry_points: dict[str, str]) -> None:
    """A distribution `name` installed into `site`: its metadata and its entry points of GROUP."""
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    lines = [f"[{GROUP}]", *(f"{k} = {v}" for k, v in entry_points.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")


def install_plugin(site: Path) -> Path:
    """The plugged provider installed into `site`, as a package of its own installs it."""
    site.mkdir(parents=True, exist_ok=True)
    shutil.copy(PLUGIN_SOURCE, site / "plugged_provider.py")
    install_distribution(site, "plugged-provider", {"plugged": "plugged_provider:PLUGIN"})
    return site


@pytest.fixture
def with_plugin(monkeypatch: pytest.MonkeyPatch) -> Iterator[InstalledProviders]:
    """This process's providers, with the plugged one among them."""
    found = discover(extra=[PLUGGED])
    monkeypatch.setattr(installed_providers, "_installed", found)
    yield found


# ---------------------------------------------------------------- discovery


def test_the_built_in_providers_are_declared_in_pyproject_and_found_as_installed_metadata(
    tmp_path: Path,
) -> None:
    """What a wheel install reads: prime-agent-lab's metadata carrying pyproject's entry points
    (here a dist-info made from pyproject.toml, ahead of the editable install's), and another
    distribution's plugin beside them."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = project["entry-points"][GROUP]
    assert declared == {n: f"prime_agent_lab.providers.builtin:{n.upper()}" for n in BUILT_IN}
    site = install_plugin(tmp_path / "site")
    install_distribution(site, "prime-agent-lab", declared)

    probe = (
        "import json\n"
        "from importlib import metadata\n"
        "from prime_agent_lab.core import installed_providers as p\n"
        f"points = metadata.entry_points(group={GROUP!r})\n"
        "found = p.installed()\n"
        "print(json.dumps({\n"
        "    'points': sorted([e.name, e.dist.name] for e in points),\n"
        "    'names': found.names, 'problems': dict(found.problems),\n"
        "    'keys': found.key_variables(),\n"
        "    'all_from_metadata': all(e.dist for e in p._installed_entry_points()),\n"
        "}))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["points"] == sorted(
        [*([n, "prime-agent-lab"] for n in BUILT_IN), ["plugged", "plugged-provider"]]
    )
    assert seen["names"] == ["anthropic", "openai", "plugged", "scripted"]
    assert seen["problems"] == {}
    assert "PLUGGED_API_KEY" in seen["keys"] and "OPENAI_API_KEY" in seen["keys"]
    assert seen["all_from_metadata"]  # pyproject.toml was not read: the metadata had them


def test_a_checkout_whose_install_predates_the_group_reads_its_providers_from_pyproject() -> None:
    points = checkout_entry_points()
    assert sorted(p.name for p in points) == list(BUILT_IN)
    for point in points:
        plugin = point.load()
        assert isinstance(plugin, ProviderPlugin) and plugin.name == point.name


def test_every_installed_provider_builds_and_reports_its_own_name() -> None:
    for plugin in installed_providers.installed().plugins.values():
        provider = plugin.make(plugin.default_model, _options())
        assert (provider.name, provider.model) == (plugin.name, plugin.default_model)


def test_a_broken_or_misnamed_plugin_is_reported_and_leaves_the_others_usable() -> None:
    found = discover(
        extra=[
            PLUGGED,
            EntryPoint("broken", "tests.provider_plugin.no_such_module:PLUGIN", GROUP),
            EntryPoint("renamed", "tests.provider_plugin.plugged_provider:PLUGIN", GROUP),
            EntryPoint("notaplugin", "tests.provider_plugin.plugged_provider:CELL", GROUP),
        ]
    )
    assert found.names == ("anthropic", "openai", "plugged", "scripted")
    assert "failed to load: ModuleNotFoundError" in found.problems["broken"]
    assert "its declaration says 'plugged'" in found.problems["renamed"]
    assert "is not a ProviderPlugin" in found.problems["notaplugin"]
    with pytest.raises(ValueError, match=r"'broken' cannot be used: .*failed to load"):
        found.find("broken")
    with pytest.raises(ValueError, match="valid names: anthropic, openai, plugged, scripted"):
        found.find("gemini")
    assert found.find(" Plugged ").name == "plugged"


# ---------------------------------------------------------------- what the declaration drives


def test_context_windows_come_from_the_providers_declaration(
    with_plugin: InstalledProviders,
) -> None:
    window = installed_providers.context_window
    assert window("plugged-small", provider="plugged") == 32_000
    assert window("plugged-large-2", provider="plugged") == 1_000_000  # the longest prefix
    assert window("other-model", provider="plugged") == 8_000  # the plugin's default
    assert window("plugged/plugged-small") == 32_000
    assert window("plugged-small", override=500, provider="plugged") == 500
    assert window("some-local-model") == 128_000  # no provider knows it


def test_redaction_and_the_kernel_environment_take_the_plugins_key_variables(
    with_plugin: InstalledProviders,
) -> None:
    environ = {"PLUGGED_API_KEY": SECRET, "OPENAI_API_KEY": "sk-other-1234567", "HOME": "/h"}
    assert Redactor.from_environ(environ).text(f"key {SECRET}.") == f"key {REPLACEMENT}."
    assert kernel_environment(environ=environ) == {"HOME": "/h"}
    kept = kernel_environment(["OPENAI_API_KEY"], environ)  # a configured list replaces them
    assert kept == {"PLUGGED_API_KEY": SECRET, "HOME": "/h"}


def test_core_names_no_provider_in_its_tables() -> None:
    """No constant of the core (module level, or a class's) is, or holds, a fact a provider
    declares: its name, key variables, default model, context-window prefixes or error types.
    The one exception is a choice, not a table: the default provider."""
    facts: set[str] = set()
    for plugin in installed_providers.installed().plugins.values():
        facts |= {plugin.name, plugin.default_model, *plugin.key_variables, *plugin.context_windows}
        if plugin.errors is not None:
            facts |= {plugin.errors.vendor, *plugin.errors.stream_error_statuses}
            facts |= {v for v in (plugin.errors.key_variable, plugin.errors.base_url_variable) if v}
    allowed = {"prime_agent_lab.core.settings.Settings.provider"}  # a setting's default choice
    found = []
    for module in pkgutil.walk_packages(prime_agent_lab.core.__path__, "prime_agent_lab.core."):
        namespace = importlib.import_module(module.name)
        for where, value in _constants(namespace):
            if where not in allowed and (named := _facts_in(value, facts)):
                found.append(f"{where}: {sorted(named)}")
    assert found == []


def _constants(module: Any) -> Iterator[tuple[str, Any]]:
    for name, value in vars(module).items():
        if name.startswith("__"):
            continue
        if isinstance(value, type) and value.__module__ == module.__name__:
            for attribute, inner in vars(value).items():
                if not attribute.startswith("__") and not callable(inner):
                    yield f"{module.__name__}.{name}.{attribute}", inner
        elif not callable(value):
            yield f"{module.__name__}.{name}", value


def _facts_in(value: Any, facts: set[str]) -> set[str]:
    if isinstance(value, str):
        return {value} & facts
    if isinstance(value, dict):
        return set().union(*(_facts_in(v, facts) for v in [*value, *value.values()]))
    if isinstance(value, tuple | list | set | frozenset):
        return set().union(*(_facts_in(v, facts) for v in value))
    return set()


def _options() -> ProviderOptions:
    return ProviderOptions(stream=True, timeout=5.0, fenced_code=False, step_delay=0.0)


# ---------------------------------------------------------------- the plugin in the hosts


def assert_the_plugin_ran(answer: str) -> None:
    """The plugged provider's answer: what its cell printed, and whether it held its key."""
    printed, _, held = answer.rpartition(" | ")
    assert held == "the provider holds its key: yes", answer
    lines = printed.splitlines()
    assert "kernel reads the key variable: False" in lines, answer  # withheld from the kernel
    assert f"the file holds {REPLACEMENT}" in lines, answer  # redacted
    assert "context window 32000" in lines, answer  # from its declaration


def test_a_plugin_registered_only_by_its_entry_point_runs_in_the_cli(tmp_path: Path) -> None:
    site = install_plugin(tmp_path / "site")
    work = tmp_path / "work"
    work.mkdir()
    (work / "plugged-key.txt").write_text(SECRET)

    done = cli_with_env(
        work,
        {"PYTHONPATH": str(site), "PLUGGED_API_KEY": SECRET},
        "run",
        "--provider",
        "plugged",
        "--mode",
        "json",
        "show me",
    )

    assert done.returncode == 0, done.stderr
    end = json_lines(done.stdout)[-1]
    assert end["type"] == "run_end" and end["ok"] is True, end
    assert_the_plugin_ran(end["final_text"])
    header = json.loads((work / end["session_dir"] / "session.jsonl").read_text().splitlines()[0])
    assert (header["provider"], header["model"]) == ("plugged", "plugged-small")
    written = [p for p in work.rglob("*") if p.is_file() and p.name != "plugged-key.txt"]
    assert written and all(SECRET not in p.read_text(errors="replace") for p in written)
    assert SECRET not in done.stdout + done.stderr


def test_the_cli_lists_an_installed_plugin_among_the_providers(tmp_path: Path) -> None:
    site = install_plugin(tmp_path / "site")
    done = cli_with_env(tmp_path, {"PYTHONPATH": str(site)}, "run", "--provider", "nope", "hi")
    assert done.returncode == 2
    assert "(choose from 'anthropic', 'openai', 'plugged', 'scripted')" in done.stderr


def test_a_plugin_registered_only_by_its_entry_point_runs_in_the_server(
    tmp_path: Path,
    servers: list[LabServer],  # noqa: F811  (the fixture imported above)
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    site = install_plugin(tmp_path / "site")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("PLUGGED_API_KEY", SECRET)
    server = start_server(tmp_path / "lab", servers, {"turns": []}, provider="plugged")
    nbformat.write(nbformat.v4.new_notebook(), server.root_dir / "plugged.ipynb")
    (server.root_dir / "plugged-key.txt").write_text(SECRET)

    info = server.api("POST", "prime-agent/api/sessions", {"notebook_path": "plugged.ipynb"})
    sid = info["session_id"]
    server.api("POST", f"prime-agent/api/sessions/{sid}/messages", {"text": "show me"})
    base = server.base
    wait_until(lambda: _turn_ended(base, sid), "the plugged provider's turn", server)

    assert turn_ends(base, sid) == [(1, "end_turn")], server.log_tail()
    [end] = [e for e in entries(base, sid) if e["type"] == "turn_end"]
    assert_the_plugin_ran(end["final_text"])
    header = json.loads((base / "sessions" / sid / "session.jsonl").read_text().splitlines()[0])
    assert (header["provider"], header["model"]) == ("plugged", "plugged-small")
    assert "PLUGGED_API_KEY" in server.log_path.read_text()  # named in what was withheld


def _turn_ended(base: Path, session_id: str) -> bool:
    try:
        return bool(turn_ends(base, session_id))
    except FileNotFoundError:
        return False


def test_another_packages_provider_under_a_built_in_name_is_ignored_and_the_built_in_stays() -> (
    None
):
    found = discover(
        extra=[EntryPoint("scripted", "tests.provider_plugin.plugged_provider:PLUGIN", GROUP)]
    )
    assert found.find("scripted").default_model == "demo"  # the built-in, not the plugin
    assert "ignored: the name is built in" in found.problems["scripted"]
    assert "tests.provider_plugin.plugged_provider:PLUGIN" in found.problems["scripted"]
