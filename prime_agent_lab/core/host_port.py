"""`HOST:PORT` as the CLI's `--bridge-listen` takes it (`127.0.0.1:0`, `0.0.0.0:8765`,
`[::1]:8765`)."""

from __future__ import annotations


def host_and_port(text: str) -> tuple[str, int]:
    """(host, port); ValueError saying what is wrong."""
    host, _, port = text.strip().rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"must be HOST:PORT (127.0.0.1:0, 0.0.0.0:8765), not {text!r}")
    return host, int(port)
