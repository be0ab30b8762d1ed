"""MCP server configuration (prime_agent_lab/core/mcp/config.py, sources.py; docs/mcp.md): the
`mcpServers` shape, bad entries reported by name and skipped, and the places merged by
precedence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prime_agent_lab import cli as cli_module
from prime_agent_lab.core.mcp.config import (
    HTTP,
    STDIO,
    McpServerConfig,
    merge_servers,
    parse_mcp_config,
    read_mcp_config_file,
)
from prime_agent_lab.core.mcp.prompt import mcp_prompt_section
from prime_agent_lab.core.mcp.sources import ENV_GLOBAL_FILE, load_configured_servers
from prime_agent_lab.core.redaction import Redactor
from prime_agent_lab.core.settings import CLI, SERVER, SettingError, Settings

SECRET = "papers-secret-value-123"


def test_the_mcp_servers_shape_parses_stdio_and_http_servers_with_their_source() -> None:
    data = {
        "mcpServers": {
            "papers": {
                "command": "papers-mcp",
                "args": ["--fast"],
                "env": {"PAPERS_TOKEN": SECRET},
                "cwd": "/srv",
            },
            "wiki": {"url": "https://wiki.example/mcp", "headers": {"Authorization": "Bearer x"}},
            "typed": {"type": "streamable-http", "url": "http://127.0.0.1:9/mcp"},
        }
    }
    configs, problems = parse_mcp_config(data, "here.json")
    assert problems == []
    papers, wiki, typed = configs
    assert papers == McpServerConfig(
        name="papers",
        transport=STDIO,
        source="here.json",
        command="papers-mcp",
        args=("--fast",),
        env=(("PAPERS_TOKEN", SECRET),),
        cwd="/srv",
    )
    assert (wiki.transport, wiki.url, wiki.headers) == (
        HTTP,
        "https://wiki.example/mcp",
        (("Authorization", "Bearer x"),),
    )
    assert typed.transport == HTTP
    assert len({papers, wiki, typed}) == 3  # hashable: the hub keys sessions by them


def test_the_inner_dict_without_the_mcpservers_key_is_accepted() -> None:
    configs, problems = parse_mcp_config({"papers": {"command": "p"}}, "s")
    assert [c.name for c in configs] == ["papers"] and problems == []


def test_a_servers_secrets_are_not_in_its_repr_or_its_description() -> None:
    configs, _ = parse_mcp_config(
        {
            "a": {"command": "p", "env": {"T": SECRET}},
            "b": {"url": "http://h/", "headers": {"H": SECRET}},
        },
        "s",
    )
    for config in configs:
        assert SECRET not in repr(config)
        assert SECRET not in json.dumps(config.describe())
        assert config.secrets() == (SECRET,)


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ([1], "not an object (an array)"),
        ({"command": "p", "url": "http://h/"}, 'has both "command" (stdio) and "url" (HTTP)'),
        ({"args": []}, 'has neither "command" (stdio) nor "url" (HTTP)'),
        (
            {"command": "p", "args": ["a", 5]},
            '"args" must be an array of strings; item 1 is a number',
        ),
        ({"command": "p", "args": "a b"}, '"args" must be an array of strings, not a string'),
        ({"command": 7}, '"command" must be a non-empty string, not a number'),
        ({"command": "p", "env": {"T": 5}}, '"env" must map names to strings; "T" is a number'),
        ({"url": "ftp://h/"}, '"url" must start with http:// or https://'),
        (
            {"url": "http://h/", "headers": []},
            '"headers" must be an object of strings, not an array',
        ),
        ({"type": "sse", "url": "http://h/sse"}, 'type "sse" (the old HTTP+SSE transport) is not'),
        ({"type": "websocket", "url": "http://h/"}, 'unknown type "websocket"'),
        ({"type": "http", "command": "p"}, 'type "http" needs a "url", not a "command"'),
    ],
)
def test_a_bad_entry_is_reported_by_name_and_skipped_and_the_others_still_load(
    entry: object, reason: str
) -> None:
    configs, problems = parse_mcp_config({"bad": entry, "good": {"command": "ok"}}, "f.json")
    assert [c.name for c in configs] == ["good"]
    assert len(problems) == 1
    assert (problems[0].name, problems[0].source) == ("bad", "f.json")
    assert reason in problems[0].reason
    assert str(problems[0]).startswith("f.json: bad: ")


def test_a_secret_in_a_bad_entry_is_not_in_the_problem() -> None:
    _, problems = parse_mcp_config({"bad": {"command": "p", "env": {"T": SECRET, "U": 1}}}, "s")
    assert problems and SECRET not in str(problems[0])


def test_a_file_that_is_not_json_or_not_an_object_is_one_problem(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{nope")
    assert "not valid JSON" in read_mcp_config_file(broken, "b")[1][0].reason
    listed = tmp_path / "list.json"
    listed.write_text("[]")
    assert read_mcp_config_file(listed, "l")[1][0].reason == "not a JSON object (an array)"
    assert read_mcp_config_file(tmp_path / "none.json", "n")[1][0].reason == "no such file"
    assert read_mcp_config_file(tmp_path / "none.json", "n", missing_ok=True) == ([], [])


def test_a_project_servers_cwd_is_taken_from_its_folder(tmp_path: Path) -> None:
    data = {
        "a": {"command": "p"},
        "b": {"command": "p", "cwd": "tools"},
        "c": {"command": "p", "cwd": "/x"},
    }
    configs, _ = parse_mcp_config(data, "project: sub/.mcp.json", base_dir=tmp_path)
    assert [c.cwd for c in configs] == [str(tmp_path), str(tmp_path / "tools"), "/x"]
    assert parse_mcp_config({"a": {"command": "p"}}, "s")[0][0].cwd is None


def test_merging_lets_a_later_place_replace_a_server_of_the_same_name() -> None:
    first, _ = parse_mcp_config({"a": {"command": "one"}, "b": {"command": "b"}}, "first")
    second, _ = parse_mcp_config({"a": {"command": "two"}}, "second")
    merged = merge_servers(first, second)
    assert [(c.name, c.command, c.source) for c in merged] == [
        ("a", "two", "second"),
        ("b", "b", "first"),
    ]


def _write(path: Path, servers: dict[str, object]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def test_the_places_merge_global_file_then_setting_then_cli_files_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    glob = _write(tmp_path / "global" / "mcp.json", {"a": {"command": "g"}, "b": {"command": "g"}})
    monkeypatch.setenv(ENV_GLOBAL_FILE, str(glob))
    one = _write(tmp_path / "one.json", {"b": {"command": "one"}, "c": {"command": "one"}})
    two = _write(tmp_path / "two.json", {"c": {"command": "two"}})
    settings = Settings(host=SERVER, mcp_servers={"mcpServers": {"a": {"command": "setting"}}})

    configs, problems = load_configured_servers(settings, [str(one), str(two)])

    assert problems == []
    assert {c.name: (c.command, c.source) for c in configs} == {
        "a": ("setting", "c.PrimeAgentLab.mcp_servers"),
        "b": ("one", f"--mcp-config {one}"),
        "c": ("two", f"--mcp-config {two}"),
    }


def test_the_global_file_defaults_to_the_jupyter_config_dir_and_may_be_absent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_GLOBAL_FILE, raising=False)
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path))
    assert load_configured_servers(Settings(host=SERVER)) == ([], [])
    _write(tmp_path / "prime_agent_lab" / "mcp.json", {"papers": {"command": "p"}})
    configs, problems = load_configured_servers(Settings(host=SERVER))
    assert problems == []
    assert [(c.name, c.source) for c in configs] == [
        ("papers", str(tmp_path / "prime_agent_lab" / "mcp.json"))
    ]


def test_bad_places_are_reported_and_the_good_ones_still_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    glob = tmp_path / "mcp.json"
    glob.write_text("{broken")
    monkeypatch.setenv(ENV_GLOBAL_FILE, str(glob))
    good = _write(tmp_path / "good.json", {"ok": {"command": "p"}, "bad": {"url": 3}})
    settings = Settings(host=CLI, mcp_config_files=(str(good), "missing.json"))
    configs, problems = load_configured_servers(settings)
    assert [c.name for c in configs] == ["ok"]
    assert [(p.source, p.name) for p in problems] == [
        (str(glob), None),
        (f"--mcp-config {good}", "bad"),
        ("--mcp-config missing.json", None),
    ]


def test_the_cli_takes_mcp_config_files_in_the_order_given() -> None:
    args = cli_module._parser().parse_args(
        ["run", "--mcp-config", "a.json", "--mcp-config", "b.json", "go"]
    )
    settings = cli_module._settings_of(args)
    assert settings.mcp_config_files == ("a.json", "b.json")
    assert (settings.mcp_call_timeout, settings.mcp_output_cap) == (60.0, 1_000_000)


def test_the_mcp_servers_setting_must_be_a_dict() -> None:
    with pytest.raises(SettingError, match=r"c\.PrimeAgentLab\.mcp_servers must be a dict"):
        Settings(host=SERVER, mcp_servers=["papers"])  # type: ignore[arg-type]


def test_the_prompt_section_names_servers_and_how_to_list_tools_and_is_empty_without() -> None:
    assert mcp_prompt_section([]) == ""
    configs, _ = parse_mcp_config(
        {"papers": {"command": "p", "env": {"T": SECRET}}, "wiki": {"url": "http://h/mcp"}},
        "mcp.json",
    )
    section = mcp_prompt_section(configs)
    assert "papers" in section and "wiki" in section and "mcp.json" in section
    assert 'await mcp.list_tools("papers")' in section or "await mcp.list_tools(name)" in section
    assert SECRET not in section
    assert len(section) < 800


def test_loading_adds_the_servers_secrets_to_what_is_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_GLOBAL_FILE, str(tmp_path / "absent.json"))
    secret = "header-secret-" + tmp_path.name
    settings = Settings(
        host=SERVER, mcp_servers={"w": {"url": "http://h/", "headers": {"A": secret}}}
    )
    load_configured_servers(settings)
    assert Redactor.from_environ().text(f"A: {secret}") == "A: [redacted]"


def test_only_env_values_that_look_secret_are_secrets_and_every_header_is() -> None:
    env = {
        "REGION": "us-east-1",
        "DEBUG": "1",
        "API_TOKEN": "tok-1",
        "db_password": "hunter2",
        "SessionId": "s-9",
        "OPAQUE": "x" * 16,
        "GREETING": "hello there, long and spaced",
    }
    configs, _ = parse_mcp_config(
        {
            "a": {"command": "p", "env": env},
            "b": {"url": "http://h/", "headers": {"X-Region": "eu"}},
        },
        "s",
    )
    assert set(configs[0].secrets()) == {"tok-1", "hunter2", "s-9", "x" * 16}
    assert configs[1].secrets() == ("eu",)


def test_secrets_in_args_and_url_are_secrets_and_never_described() -> None:
    configs, _ = parse_mcp_config(
        {
            "db": {
                "command": "/opt/bin/pg-mcp",
                "args": ["--api-key=ak-1", "--token", "tk-2", "postgresql://me:pw-3@db/x", "-v"],
            },
            "web": {"url": "https://me:pw-4@h.example/mcp?api_key=qk-5&page=2#frag"},
        },
        "s",
    )
    db, web = configs
    assert set(db.secrets()) == {"ak-1", "tk-2", "pw-3"}
    assert set(web.secrets()) == {"pw-4", "qk-5"}
    assert db.describe()["command"] == "pg-mcp"
    assert web.describe()["url"] == "https://h.example/mcp"
