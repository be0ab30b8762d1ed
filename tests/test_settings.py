"""Settings are declared once (core/settings.py); the traitlets, the CLI flags, the README table
and the way a message names a setting are derived from that declaration and cannot drift."""

from __future__ import annotations

import ast
import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from jupyter_server.extension.application import ExtensionApp

from prime_agent_lab import cli as cli_module
from prime_agent_lab.adapters.model_choice import ModelChoice
from prime_agent_lab.core.messages import ModelResponse
from prime_agent_lab.core.ports import ProviderError
from prime_agent_lab.core.settings import (
    CLI,
    DECLARED,
    SERVER,
    SettingError,
    Settings,
    declared,
    help_text,
    spell,
)
from prime_agent_lab.core.settings_readme import markdown_table, readme_with_table
from prime_agent_lab.headless import HeadlessRun
from prime_agent_lab.jupyter.app import PrimeAgentLab
from tests.python_source import parse

from .lab_process import server_exit
from .test_cli import cli, json_lines
from .test_core import ListProvider, call, make_agent

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "prime_agent_lab"
DECLARATION = PACKAGE / "core" / "settings.py"

# The `c.PrimeAgentLab.*` names users had in their configs before the declaration existed.
TRAITLETS_BEFORE = [
    "provider",
    "model",
    "script_path",
    "stream",
    "output_cap",
    "notebook_output_cap",
    "max_message_chars",
    "cell_timeout",
    "max_iterations",
    "max_retries",
    "retry_base_delay",
    "max_retry_after",
    "request_timeout",
    "fenced_code_fallback",
    "accepts_images",
    "step_delay",
    "kernel_env_strip",
    "shutdown_timeout",
    "max_tokens",
    "context_window",
    "compaction_enabled",
    "compaction_reserve_tokens",
    "compaction_keep_recent_tokens",
    "sessions_dir",
    "kernel_name",
    "kernel_pool_size",
    "evict_after_minutes",
    "harness_dir",
    "snapshot_variable_cap",
    "snapshot_total_cap",
    "max_depth",
    "auto_refine_every",
    "auto_refine_after_compaction",
    "auto_refine_cooldown_minutes",
    "subagent_models",
    "bridge_url",
]

# `prime-agent-lab run` flags before the declaration existed, with a value each where they take one.
CLI_FLAGS_BEFORE: dict[str, tuple[list[str], dict[str, Any]]] = {
    "--provider": (["--provider", "openai"], {"provider": "openai"}),
    "--model": (["--model", "m1"], {"model": "m1"}),
    "--script": (["--script", "s.json"], {"script_path": "s.json"}),
    "--cell-timeout": (["--cell-timeout", "7.5"], {"cell_timeout": 7.5}),
    "--output-cap": (["--output-cap", "99"], {"output_cap": 99}),
    "--max-iterations": (["--max-iterations", "3"], {"max_iterations": 3}),
    "--harness-dir": (["--harness-dir", "h"], {"harness_dir": "h"}),
    "--context-window": (["--context-window", "5000"], {"context_window": 5000}),
    "--max-turns": (["--max-turns", "4"], {"max_turns": 4}),
    "--auto-refine-every": (["--auto-refine-every", "2"], {"auto_refine_every": 2}),
    "--no-auto-refine": (["--no-auto-refine"], {"auto_refine_every": 0}),
    "--no-stream": (["--no-stream"], {"stream": False}),
    "--kernel": (["--kernel", "k1"], {"kernel_name": "k1"}),
    "--fenced-code": (["--fenced-code"], {"fenced_code_fallback": True}),
    "--no-images": (["--no-images"], {"accepts_images": False}),
}

# What the CLI could not set before, now flags (message limits, depth, eviction, snapshot caps,
# retries, timeouts, compaction).
CLI_FLAGS_ADDED: dict[str, Any] = {
    "--max-depth": 0,
    "--max-task-chars": 500,
    "--message-max-bytes": 2048,
    "--message-max-pending": 5,
    "--message-rate-per-second": 10.0,
    "--message-rate-burst": 7,
    "--evict-after-minutes": 0.5,
    "--snapshot-variable-cap": 1024,
    "--snapshot-total-cap": 4096,
    "--snapshot-debounce": 0.2,
    "--max-retries": 1,
    "--retry-base-delay": 0.5,
    "--retry-max-delay": 2.0,
    "--max-retry-after": 9.0,
    "--request-timeout": 30.0,
    "--max-tokens": 1000,
    "--kernel-pool-size": 0,
    "--compaction-reserve-tokens": 100,
    "--compaction-keep-recent-tokens": 200,
    "--notebook-output-cap": 1000,
}


def parse_run(*flags: str) -> Settings:
    args = cli_module._parser().parse_args(["run", *flags, "go"])
    return cli_module._settings_of(args)


# ---------------------------------------------------------------- derived copies


def test_every_server_setting_is_a_traitlet_with_the_declared_default_and_help() -> None:
    inherited = set(ExtensionApp.class_traits(config=True))
    traits = {
        name: trait
        for name, trait in PrimeAgentLab.class_traits(config=True).items()
        if name not in inherited
    }
    assert set(traits) == {s.name for s in declared(SERVER)}
    for setting in declared(SERVER):
        trait = traits[setting.name]
        default = trait.default()
        expected = list(setting.default) if isinstance(setting.default, tuple) else setting.default
        assert default == expected, setting.name
        assert trait.help == help_text(setting.name, SERVER), setting.name


def test_every_traitlet_name_users_had_still_configures_the_server() -> None:
    traits = PrimeAgentLab.class_traits(config=True)
    assert [name for name in TRAITLETS_BEFORE if name not in traits] == []


def test_every_cli_setting_is_a_flag_with_the_declared_default() -> None:
    run = cli_module._parser()._subparsers._group_actions[0].choices["run"]  # type: ignore[union-attr]
    actions = {a.dest: a for a in run._actions if a.option_strings}
    for setting in declared(CLI):
        action = actions[setting.name]
        assert action.default == setting.default, setting.name
        assert set(setting.flags) <= set(run._option_string_actions), setting.name
    assert parse_run() == Settings(host=CLI)  # no flag: every default


@pytest.mark.parametrize("flag", sorted(CLI_FLAGS_BEFORE))
def test_the_cli_flags_users_had_still_work(flag: str) -> None:
    words, expected = CLI_FLAGS_BEFORE[flag]
    settings = parse_run(*words)
    assert {name: getattr(settings, name) for name in expected} == expected


def test_message_limits_depth_eviction_snapshot_caps_and_retries_have_cli_flags() -> None:
    words = [w for flag, value in CLI_FLAGS_ADDED.items() for w in (flag, str(value))]
    settings = parse_run(*words)
    got = {flag: getattr(settings, flag[2:].replace("-", "_")) for flag in CLI_FLAGS_ADDED}
    assert got == CLI_FLAGS_ADDED


def test_nothing_is_declared_twice() -> None:
    spellings: list[str] = []
    for setting in declared():
        spellings += setting.flags + tuple(flag for flag, _ in setting.spec.cli_constants)
        if setting.type is bool:
            spellings += tuple(f"--no-{flag[2:]}" for flag in setting.flags)
    assert len(spellings) == len(set(spellings))
    assert len(DECLARED) == len({name.lower() for name in DECLARED})


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes of a module, its classes and functions."""
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            found.add(id(first.value))
    return found


def _package_sources() -> list[tuple[Path, ast.Module]]:
    return [
        (path, parse(path.read_text(encoding="utf-8")))
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != DECLARATION
    ]


def _restates(default: ast.expr | None, name: str) -> bool:
    """A literal default equal to the declared one (None means "not given" everywhere)."""
    value = DECLARED[name].default
    return isinstance(default, ast.Constant) and value is not None and default.value == value


def test_no_dataclass_or_core_function_restates_a_settings_default() -> None:
    restated = []
    for path, tree in _package_sources():
        in_core = PACKAGE / "core" in path.parents
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(
                "dataclass" in ast.unparse(d) for d in node.decorator_list
            ):
                for item in node.body:
                    if (
                        isinstance(item, ast.AnnAssign)
                        and isinstance(item.target, ast.Name)
                        and item.target.id in DECLARED
                        and _restates(item.value, item.target.id)
                    ):
                        restated.append(f"{path.name}: {node.name}.{item.target.id}")
            elif in_core and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                args = node.args
                positional = args.args[len(args.args) - len(args.defaults) :]
                pairs = [
                    *zip(positional, args.defaults, strict=True),
                    *zip(args.kwonlyargs, args.kw_defaults, strict=True),
                ]
                restated += [
                    f"{path.name}: {node.name}({arg.arg}=...)"
                    for arg, default in pairs
                    if arg.arg in DECLARED and _restates(default, arg.arg)
                ]
    assert restated == []


def test_no_message_spells_a_setting_by_hand() -> None:
    flags = {f for s in declared(CLI) for f in s.flags} | {
        f for s in declared(CLI) for f, _ in s.spec.cli_constants
    }
    by_hand = []
    for path, tree in _package_sources():
        docstrings = _docstrings(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
                continue
            if id(node) in docstrings:
                continue
            words = set(re.findall(r"--[a-z][a-z-]+", node.value)) & flags
            words |= {m for m in re.findall(r"PrimeAgentLab\.(\w+)", node.value) if m in DECLARED}
            by_hand += [f"{path.name}:{node.lineno}: {w}" for w in sorted(words)]
    assert by_hand == []


def test_the_readme_settings_table_is_current() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme_with_table(readme) == readme, (
        "the README's settings table is stale: run "
        "`python -m prime_agent_lab.core.settings_readme --readme README.md`"
    )
    assert "| `cell_timeout` | `--cell-timeout` |" in markdown_table()


def test_every_help_text_names_only_declared_settings() -> None:
    for setting in declared():
        for style in (SERVER, CLI, "markdown"):  # a `{name}` not declared is a KeyError
            assert "{" not in help_text(setting.name, style), setting.name


# ---------------------------------------------------------------- bounds, one check for all hosts


@pytest.mark.parametrize(
    ("values", "host", "message"),
    [
        ({"max_depth": -1}, CLI, "--max-depth must be 0 or a positive whole number, not -1"),
        (
            {"max_depth": -1},
            SERVER,
            "c.PrimeAgentLab.max_depth must be 0 or a positive whole number, not -1",
        ),
        ({"cell_timeout": 0.0}, CLI, "--cell-timeout must be a positive number, not 0"),
        ({"cell_timeout": float("nan")}, SERVER, "cell_timeout must be a positive number, not nan"),
        ({"message_rate_burst": 0}, CLI, "--message-rate-burst must be a positive whole number"),
        ({"max_iterations": 2.5}, CLI, "--max-iterations must be a whole number, not 2.5"),
        ({"stream": "no"}, SERVER, "c.PrimeAgentLab.stream must be True or False, not 'no'"),
        ({"shutdown_timeout": -1.0}, CLI, "c.PrimeAgentLab.shutdown_timeout must be 0 or a"),
    ],
)
def test_an_out_of_bounds_value_is_refused_naming_the_setting_as_the_host_spells_it(
    values: dict[str, Any], host: str, message: str
) -> None:
    with pytest.raises(SettingError, match=re.escape(message)):
        Settings(host=host, **values)


def test_the_cli_refuses_an_out_of_bounds_flag_before_running(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli_module.main(["run", "--message-max-pending", "0", "go"])
    assert exited.value.code == 2
    assert "argument --message-max-pending: must be a positive whole number, not 0" in (
        capsys.readouterr().err
    )


def test_a_server_with_an_out_of_bounds_setting_stops_at_start_naming_it(tmp_path: Path) -> None:
    done = server_exit(tmp_path, "--PrimeAgentLab.cell_timeout=-5")
    assert done.returncode == 1
    assert (
        "Prime Agent Lab cannot start: c.PrimeAgentLab.cell_timeout must be a positive number, "
        "not -5" in done.stderr
    )


def test_a_server_with_a_setting_of_the_wrong_type_stops_at_start_naming_it(
    tmp_path: Path,
) -> None:
    """jupyter_server logs a failed extension link and goes on; the agent would run on the
    defaults (the demo model instead of the one asked for)."""
    done = server_exit(tmp_path, "--PrimeAgentLab.model=foo", "--PrimeAgentLab.output_cap=1.5")
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Prime Agent Lab cannot start: c.PrimeAgentLab: The 'output_cap' trait" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_headless_run_refuses_a_setting_that_is_not_declared(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="no such setting: cell_timout"):
        HeadlessRun(cwd=tmp_path, notebook="a.ipynb", cell_timout=5)


# ---------------------------------------------------------------- messages spell it per host


@pytest.mark.parametrize(
    ("host", "named"), [(CLI, "--max-iterations"), (SERVER, "c.PrimeAgentLab.max_iterations")]
)
def test_the_iteration_limit_names_the_setting_as_the_host_spells_it(
    tmp_path: Path, host: str, named: str
) -> None:
    provider = ListProvider([ModelResponse(tool_calls=[call("1", f"c{i}")]) for i in range(2)])
    agent, _ = make_agent(tmp_path, provider, max_iterations=2, host=host)
    outcome = asyncio.run(agent.run_turn("go"))
    assert outcome.final_text == f"Stopped after 2 model calls in one turn ({named})."


@pytest.mark.parametrize(
    ("host", "named"), [(CLI, "--request-timeout"), (SERVER, "c.PrimeAgentLab.request_timeout")]
)
def test_a_model_call_past_the_request_timeout_names_the_setting_as_the_host_spells_it(
    tmp_path: Path, host: str, named: str
) -> None:
    error = ProviderError("took too long", kind="timeout", setting="request_timeout")
    agent, _ = make_agent(tmp_path, ListProvider([error]), host=host)
    outcome = asyncio.run(agent.run_turn("go"))
    assert outcome.error == f"took too long ({named})"


def test_spell_renders_each_host_and_falls_back_to_the_server_for_server_only_settings() -> None:
    assert spell("cell_timeout", CLI) == "--cell-timeout"
    assert spell("cell_timeout", SERVER) == "c.PrimeAgentLab.cell_timeout"
    assert spell("kernel_name", CLI) == "--kernel-name"
    assert spell("max_message_chars", CLI) == "c.PrimeAgentLab.max_message_chars"


def test_a_cli_run_takes_the_depth_limit_and_names_its_flag_when_a_spawn_is_refused(
    tmp_path: Path,
) -> None:
    script = tmp_path / "s.json"
    code = "try:\n    await rlm('look', name='kid')\nexcept Exception as exc:\n    print(exc)"
    script.write_text(json.dumps({"turns": [{"code": code}, {"text": "{last_output}"}]}))

    done = cli(tmp_path, "run", "--mode", "json", "--max-depth", "0", "--script", str(script), "go")

    assert done.returncode == 0, done.stderr
    end = json_lines(done.stdout)[-1]
    assert "the depth limit is 0 (--max-depth)" in end["final_text"]
    assert "PrimeAgentLab" not in done.stdout


def test_a_list_setting_is_a_repeatable_cli_flag_in_the_order_given() -> None:
    settings = parse_run("--autonomous-gate", "pytest -q", "--autonomous-gate", "py:assert ok")
    assert settings.autonomous_gates == ("pytest -q", "py:assert ok")
    assert parse_run().autonomous_gates == ()


def test_a_list_setting_given_as_a_list_on_the_server_command_line_is_that_list() -> None:
    """jupyter_server parses `--PrimeAgentLab.x=...` before it knows the extension's traits, so
    the value arrives as text the trait reads itself."""
    from jupyter_server.serverapp import ServerApp
    from traitlets.config.loader import KVArgParseConfigLoader

    def configured(*argv: str) -> Any:
        config = KVArgParseConfigLoader(list(argv), classes=[ServerApp]).load_config()
        return PrimeAgentLab(config=config)

    app = configured('--PrimeAgentLab.subagent_models=["scripted/demo-b","openai/gpt-4.1"]')
    assert app.subagent_models == ["scripted/demo-b", "openai/gpt-4.1"]
    app = configured("--PrimeAgentLab.subagent_models=['scripted/demo-b']")
    assert app.subagent_models == ["scripted/demo-b"]
    app = configured("--PrimeAgentLab.subagent_models=scripted/demo-b")
    assert app.subagent_models == ["scripted/demo-b"]
    app = configured(
        "--PrimeAgentLab.subagent_models=scripted/demo-b",
        "--PrimeAgentLab.subagent_models=openai/gpt-4.1",
    )
    assert app.subagent_models == ["scripted/demo-b", "openai/gpt-4.1"]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("gpt-4.1", "'gpt-4.1' is not provider/model"),
        ("openai/", "'openai/' is not provider/model"),
        ('["scripted/demo-b"', "unknown model provider '[\"scripted'"),
        ("nosuch/model-x", "unknown model provider 'nosuch'"),
    ],
)
def test_a_subagent_model_that_is_malformed_or_of_no_installed_provider_is_refused(
    entry: str, message: str
) -> None:
    """The form is the settings' to check, the provider the model choice's (as a host starts)."""
    with pytest.raises(SettingError) as refused:
        settings = Settings(subagent_models=("scripted/demo-b", entry))
        ModelChoice(lambda: settings, {}).configured()
    assert str(refused.value).startswith("c.PrimeAgentLab.subagent_models ")
    assert message in str(refused.value)


def test_a_server_with_a_subagent_model_of_no_installed_provider_stops_at_start_naming_it(
    tmp_path: Path,
) -> None:
    done = server_exit(
        tmp_path,
        "--PrimeAgentLab.provider=scripted",
        '--PrimeAgentLab.subagent_models=["scripted/demo-b","nosuch/model-x"]',
    )
    assert done.returncode == 1, done.stderr[-2000:]
    assert (
        "Prime Agent Lab cannot start: c.PrimeAgentLab.subagent_models "
        "has an unknown model provider 'nosuch'" in done.stderr
    )
    assert "Traceback" not in done.stderr


def test_the_gateways_token_is_no_part_of_how_settings_are_shown() -> None:
    shown = repr(Settings(host=CLI, gateway_auth_token="tok-4f2a9c"))
    assert "tok-4f2a9c" not in shown and "gateway_auth_token" not in shown
    assert "gateway_url=None" in shown  # the other settings are shown as before
