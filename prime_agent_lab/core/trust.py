"""Signatures on what the product loads or acts on by itself, the way Jupyter signs notebooks.

A kernel snapshot (its pickles run code when loaded), a session's local harness (its notes enter
the system prompt, its skill modules become importable) and queued mail (it starts model turns)
are signed with HMAC-SHA256 under a per-user secret kept in the Jupyter data directory. What is
unsigned, or signed with another secret (a colleague's folder, a git clone), is described but not
loaded until the user trusts it (docs/trust.md). The secret never leaves the host: kernels get
at most the digest of a file the host checked.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import secrets
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

SECRET_FILE = "signing_secret"
SECRET_BYTES = 32
ENV_SECRET_FILE = "PRIME_AGENT_LAB_SECRET_FILE"

SIGNATURE = "signature"
"""The field of a signed JSON object (a manifest, a mail record) that holds its signature."""

Purpose = str
"""What a signature is for (`snapshot`, `harness`, `mail`): a signature made for one purpose never
verifies for another, so a signed mail record cannot pass as a manifest."""


def default_secret_file() -> Path:
    """`$PRIME_AGENT_LAB_SECRET_FILE`, else `prime_agent_lab/signing_secret` in the Jupyter data
    directory (`$JUPYTER_DATA_DIR` or `~/.local/share/jupyter`), next to Jupyter's own
    `notebook_secret`."""
    explicit = os.environ.get(ENV_SECRET_FILE)
    if explicit:
        return Path(explicit).expanduser()
    data = os.environ.get("JUPYTER_DATA_DIR") or "~/.local/share/jupyter"
    return Path(data).expanduser() / "prime_agent_lab" / SECRET_FILE


def canonical(value: Any) -> bytes:
    """The bytes a JSON value is signed as: key order and spacing do not matter."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True
    ).encode("utf-8")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Signer:
    """Signs and checks with one user's secret."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) < 16:
            raise ValueError("a signing secret needs at least 16 bytes")
        self._secret = secret

    def __repr__(self) -> str:  # never the secret
        return "Signer(...)"

    @classmethod
    def load(cls, path: Path | None = None) -> Signer:
        """The secret in `path` (default: `default_secret_file()`), made on first use: random,
        readable by the user only, created exclusively so two processes starting at once agree."""
        path = path or default_secret_file()
        try:
            return cls(path.read_bytes())
        except FileNotFoundError:
            pass
        path.parent.mkdir(parents=True, exist_ok=True)
        secret = secrets.token_bytes(SECRET_BYTES)
        temp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        try:
            descriptor = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(secret)
                handle.flush()
                os.fsync(handle.fileno())
            with contextlib.suppress(FileExistsError):  # another process made one: use that
                os.link(temp, path)
        finally:
            with contextlib.suppress(OSError):
                temp.unlink()
        return cls(path.read_bytes())

    @classmethod
    def load_or_ephemeral(cls, path: Path | None = None) -> Signer:
        """`load`, or, when the secret can be neither read nor made (a read-only home), a
        secret for this process only, with an error in the log: what it signs is trusted until
        the process ends and untrusted after, never the other way round."""
        try:
            return cls.load(path)
        except (OSError, ValueError) as exc:
            log.error(
                "the signing secret %s cannot be read or made (%s): this process signs with a "
                "secret of its own, so what it saves will be untrusted after a restart "
                "(docs/trust.md)",
                path or default_secret_file(),
                exc,
            )
            return cls(secrets.token_bytes(SECRET_BYTES))

    def sign(self, purpose: Purpose, payload: bytes) -> str:
        message = purpose.encode("ascii") + b"\0" + payload
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    def verify(self, purpose: Purpose, payload: bytes, signature: object) -> bool:
        if not isinstance(signature, str):
            return False
        return hmac.compare_digest(self.sign(purpose, payload), signature)

    def sign_object(self, purpose: Purpose, value: dict[str, Any]) -> dict[str, Any]:
        """`value` with its `signature` field set (over every other field)."""
        unsigned = {k: v for k, v in value.items() if k != SIGNATURE}
        return {**unsigned, SIGNATURE: self.sign(purpose, canonical(unsigned))}

    def verify_object(self, purpose: Purpose, value: dict[str, Any]) -> bool:
        unsigned = {k: v for k, v in value.items() if k != SIGNATURE}
        try:
            payload = canonical(unsigned)
        except (TypeError, ValueError, RecursionError):
            return False
        return self.verify(purpose, payload, value.get(SIGNATURE))
