"""The `mcpServers` JSON shape other agents read, as frozen `McpServerConfig` values.

    {"mcpServers": {"papers": {"command": "papers-mcp", "args": [], "env": {}, "cwd": "."},
                    "wiki": {"url": "https://wiki.example/mcp", "headers": {}}}}

(the inner dict alone is accepted too). `command` means stdio, `url` streamable HTTP. A bad entry
is reported by name with the reason and skipped; the others still load. Which files and settings
are read, and in which order, is `sources.py`.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from ..text import json_type

STDIO = "stdio"
HTTP = "http"
Transport = Literal["stdio", "http"]

_HTTP_TYPES = ("http", "streamable-http", "streamable_http", "streamableHttp")
_STDIO_TYPES = ("stdio",)

# an `env` (or argument, or URL query) name that says its value is a secret (docs/mcp.md)
SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASS|AUTH|CREDENTIAL|COOKIE|SESSION", re.IGNORECASE)
LONG_SECRET = 16  # characters without whitespace: a value this long is taken for a secret


def looks_secret(name: str, value: str) -> bool:
    """Whether the value of `name` is redacted: its name says it is a secret, or it is a long
    token (`"REGION": "us-east-1"` is not)."""
    return bool(SECRET_NAME.search(name)) or (
        len(value) >= LONG_SECRET and not any(c.isspace() for c in value)
    )


def shown_url(url: str) -> str:
    """`url` without its userinfo, query and fragment: what may be shown of it."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _url_secrets(url: str) -> Iterator[str]:
    """The password of `url`'s userinfo (its user name too when there is no password) and the
    values of its query and fragment parameters that look secret."""
    parts = urlsplit(url)
    if "@" in parts.netloc:
        user, _, password = parts.netloc.rpartition("@")[0].partition(":")
        yield password or user
    for name, value in parse_qsl(parts.query) + parse_qsl(parts.fragment):
        if looks_secret(name, value):
            yield value


def _arg_secrets(args: tuple[str, ...]) -> Iterator[str]:
    """The values of `--api-key=V` or `--api-key V` (a name that looks secret), and the secrets
    of an argument that is a URL (`postgresql://user:pass@host/db`)."""
    for index, arg in enumerate(args):
        name, equals, value = arg.partition("=")
        if equals and name.startswith("-") and looks_secret(name, value):
            yield value
        elif arg.startswith("-") and SECRET_NAME.search(arg) and index + 1 < len(args):
            yield args[index + 1]
        if "://" in arg:
            yield from _url_secrets(value if equals and "://" in value else arg)


@dataclass(frozen=True)
class McpServerConfig:
    """One server as configured. Hashable: the hub keys its sessions by it, so two project
    folders with a server of the same name get a session each. `env` and `headers` hold
    secrets: they are left out of `repr` and of `describe()`."""

    name: str
    transport: Transport
    source: str  # where it came from, for people: "~/.jupyter/prime_agent_lab/mcp.json"
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    cwd: str | None = None
    url: str = ""
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    def secrets(self) -> tuple[str, ...]:
        """What must never reach a log or a kernel: every `headers` value, the `env` values that
        look secret (`looks_secret`), and the secrets of `args` and `url` (`_arg_secrets`,
        `_url_secrets`)."""
        found = [value for _, value in self.headers]
        found += [value for name, value in self.env if looks_secret(name, value)]
        found += [*_arg_secrets(self.args), *_url_secrets(self.url)]
        return tuple(dict.fromkeys(value for value in found if value))

    def describe(self) -> dict[str, Any]:
        """What may be shown of it (to the user, the model, a log): the command's program name
        (never its arguments), the URL without userinfo, query and fragment; no env or header
        values."""
        shown: dict[str, Any] = {"name": self.name, "transport": self.transport}
        if self.transport == STDIO:
            shown["command"] = posixpath.basename(self.command) or self.command
        else:
            shown["url"] = shown_url(self.url)
        shown["source"] = self.source
        return shown


@dataclass(frozen=True)
class McpConfigProblem:
    """A server entry (or a whole file, when `name` is None) that was skipped, and why."""

    source: str
    name: str | None
    reason: str

    def __str__(self) -> str:
        return (
            f"{self.source}: {self.name}: {self.reason}"
            if self.name
            else (f"{self.source}: {self.reason}")
        )


class _Bad(ValueError):
    """One entry's reason to be skipped."""


def parse_mcp_config(
    data: object, source: str, base_dir: Path | None = None
) -> tuple[list[McpServerConfig], list[McpConfigProblem]]:
    """The servers in `data` (the parsed JSON), each marked with `source`, and the entries that
    were skipped. `base_dir` (a project's folder) is where a relative `cwd` is taken from and the
    `cwd` of a server that names none; without it a server runs where the host runs."""
    if not isinstance(data, Mapping):
        return [], [McpConfigProblem(source, None, f"not a JSON object ({json_type(data)})")]
    servers = data.get("mcpServers", data)
    if not isinstance(servers, Mapping):
        wrong = f'"mcpServers" is {json_type(servers)}, not an object'
        return [], [McpConfigProblem(source, None, wrong)]
    configs: list[McpServerConfig] = []
    problems: list[McpConfigProblem] = []
    for name, entry in servers.items():
        try:
            configs.append(_server(name, entry, source, base_dir))
        except _Bad as bad:
            problems.append(McpConfigProblem(source, str(name), str(bad)))
    return configs, problems


def read_mcp_config_file(
    path: Path, source: str, base_dir: Path | None = None, *, missing_ok: bool = False
) -> tuple[list[McpServerConfig], list[McpConfigProblem]]:
    """`parse_mcp_config` of a JSON file; a file that cannot be read or parsed is one problem
    (none when it is absent and `missing_ok`)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return [], [] if missing_ok else [McpConfigProblem(source, None, "no such file")]
    except (OSError, UnicodeDecodeError) as exc:
        return [], [McpConfigProblem(source, None, f"cannot be read: {exc}")]
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return [], [McpConfigProblem(source, None, f"not valid JSON: {exc}")]
    return parse_mcp_config(data, source, base_dir)


def merge_servers(*layers: Iterable[McpServerConfig]) -> list[McpServerConfig]:
    """The servers of `layers` in order of precedence: a later layer's server replaces an
    earlier one of the same name (keeping the earlier one's place in the list)."""
    merged: dict[str, McpServerConfig] = {}
    for layer in layers:
        for config in layer:
            merged[config.name] = config
    return list(merged.values())


def _server(name: object, entry: object, source: str, base_dir: Path | None) -> McpServerConfig:
    if not isinstance(name, str) or not name.strip():
        raise _Bad("a server's name must be a non-empty string")
    if not isinstance(entry, Mapping):
        raise _Bad(f"not an object ({json_type(entry)})")
    kind = entry.get("type")
    if kind is not None and not isinstance(kind, str):
        raise _Bad(f'"type" must be a string, not {json_type(kind)}')
    if kind == "sse":
        raise _Bad(
            'type "sse" (the old HTTP+SSE transport) is not supported: give the server\'s '
            "streamable HTTP url"
        )
    if kind is not None and kind not in (*_HTTP_TYPES, *_STDIO_TYPES):
        raise _Bad(f'unknown type "{kind}" (stdio, http or streamable-http)')
    has_command, has_url = "command" in entry, "url" in entry
    if has_command and has_url:
        raise _Bad('has both "command" (stdio) and "url" (HTTP); give one')
    if not has_command and not has_url:
        raise _Bad('has neither "command" (stdio) nor "url" (HTTP)')
    if has_command:
        if kind in _HTTP_TYPES:
            raise _Bad(f'type "{kind}" needs a "url", not a "command"')
        return McpServerConfig(
            name=name,
            transport=STDIO,
            source=source,
            command=_text(entry, "command"),
            args=_strings(entry.get("args", []), "args"),
            env=_string_map(entry.get("env", {}), "env"),
            cwd=_cwd(entry, base_dir),
        )
    if kind in _STDIO_TYPES:
        raise _Bad('type "stdio" needs a "command", not a "url"')
    url = _text(entry, "url")
    if not url.startswith(("http://", "https://")):
        raise _Bad('"url" must start with http:// or https://')
    return McpServerConfig(
        name=name,
        transport=HTTP,
        source=source,
        url=url,
        headers=_string_map(entry.get("headers", {}), "headers"),
    )


def _text(entry: Mapping[str, Any], key: str) -> str:
    value = entry[key]
    if not isinstance(value, str) or not value.strip():
        raise _Bad(f'"{key}" must be a non-empty string, not {json_type(value)}')
    return value


def _strings(value: object, key: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise _Bad(f'"{key}" must be an array of strings, not {json_type(value)}')
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise _Bad(f'"{key}" must be an array of strings; item {index} is {json_type(item)}')
    return tuple(value)


def _string_map(value: object, key: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, Mapping):
        raise _Bad(f'"{key}" must be an object of strings, not {json_type(value)}')
    for name, item in value.items():
        if not isinstance(name, str) or not isinstance(item, str):
            # the value may be a secret: name its key and type only
            raise _Bad(f'"{key}" must map names to strings; "{name}" is {json_type(item)}')
    return tuple(sorted(value.items()))


def _cwd(entry: Mapping[str, Any], base_dir: Path | None) -> str | None:
    if "cwd" not in entry:
        return str(base_dir) if base_dir is not None else None
    cwd = Path(_text(entry, "cwd")).expanduser()
    if base_dir is not None and not cwd.is_absolute():
        cwd = base_dir / cwd
    return str(cwd)
