"""The kernel side of the bridge: signed HTTP calls to the Prime Agent Lab host.

Each request body is signed with HMAC-SHA256 under the key of this kernel's own Jupyter
connection; the host derives who is calling from that signature. The kernel never holds the
Jupyter server's token. Calls are plain HTTP, so they work with or without a browser attached
and cannot deadlock a cell that is awaiting them (no shell or comm round trip is involved).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import secrets
import time
import urllib.error
import urllib.request
from typing import Any

SIGNATURE_HEADER = "X-Prime-Agent-Signature"


class BridgeError(RuntimeError):
    """The host refused or failed a call; the message says why."""


class BridgeClient:
    def __init__(self, url: str, kernel_id: str, key: bytes, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.kernel_id = kernel_id
        self._key = key
        self.timeout = timeout

    def _signed(self, fields: dict[str, Any]) -> tuple[bytes, str]:
        body = {
            **fields,
            "kernel_id": self.kernel_id,
            "ts": time.time(),
            "nonce": secrets.token_hex(12),
        }
        # The host checks the signature over these exact bytes, so no canonical key order is
        # needed; and key order is data (a skill's arguments are its call's parameters, in order).
        raw = json.dumps(body, separators=(",", ":")).encode()
        return raw, hmac.new(self._key, raw, hashlib.sha256).hexdigest()

    def _post(self, route: str, fields: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        raw, signature = self._signed(fields)
        request = urllib.request.Request(
            f"{self.url}/kernels/{self.kernel_id}/{route}",
            data=raw,
            method="POST",
            headers={"Content-Type": "application/json", SIGNATURE_HEADER: signature},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            try:
                answer = json.loads(exc.read() or b"{}")
            except ValueError:
                answer = {}
            message = answer.get("error") or answer.get("message") or exc.reason
            raise BridgeError(f"host refused the call ({exc.code}): {message}") from None
        except urllib.error.URLError as exc:
            raise BridgeError(
                f"cannot reach the Prime Agent Lab host at {self.url}: {exc.reason}"
            ) from None

    def call(self, op: str, payload: dict[str, Any] | None = None) -> Any:
        """A blocking call; long operations are polled until done."""
        call_id = secrets.token_hex(12)
        status, answer = self._post(
            "call", {"op": op, "payload": payload or {}, "call_id": call_id}
        )
        while status == 202:
            status, answer = self._post("jobs", {"job_id": call_id})
        return _unwrap(answer)

    async def acall(self, op: str, payload: dict[str, Any] | None = None) -> Any:
        """The same call awaited without blocking the kernel's event loop.

        Interrupting the cell cancels the call on the host, even while the first request is
        still waiting for its answer.
        """
        loop = asyncio.get_running_loop()
        call_id = secrets.token_hex(12)
        request = {"op": op, "payload": payload or {}, "call_id": call_id}
        try:
            status, answer = await loop.run_in_executor(None, self._post, "call", request)
            while status == 202:
                status, answer = await loop.run_in_executor(
                    None, self._post, "jobs", {"job_id": call_id}
                )
        except (asyncio.CancelledError, KeyboardInterrupt):
            with contextlib.suppress(BridgeError):
                await loop.run_in_executor(
                    None, self._post, "jobs", {"job_id": call_id, "cancel": True}
                )
            raise
        return _unwrap(answer)


def _unwrap(answer: dict[str, Any]) -> Any:
    if answer.get("status") == "ok":
        return answer.get("result")
    if answer.get("status") == "error":
        raise BridgeError(str(answer.get("error", "unknown error")))
    raise BridgeError(f"unexpected answer from the host: {answer!r}")
