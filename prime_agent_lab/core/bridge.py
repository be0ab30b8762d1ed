"""The host side of the kernel-to-host bridge.

A kernel calls the host over HTTP with a body `{"kernel_id", "ts", "nonce", "op", "payload"}`
signed with HMAC-SHA256 under the key of that kernel's own connection. The host checks the
signature against the key it holds for the kernel named in the URL, so the caller's identity is
proved by the signature; the session is then looked up from the kernel, never read from the
payload. The operation is the body's `op` field, outside `payload`, so no payload key can reroute
a request; a service built with `declared` (the runtime's: the table of
`prime_agent_kernel.operations`, which the kernel uses too) registers only those operations.
Calls that take longer than `sync_wait` become jobs the kernel polls, which keeps every HTTP
request short and lets an awaiting cell be interrupted.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import math
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from .jsonfile import BadJson, parse_json
from .text import shorten

MAX_CLOCK_SKEW = 60.0
MAX_BODY_BYTES = 4 * 1024 * 1024
NONCE_MEMORY = 4096
JOB_ABANDONED_AFTER = 120.0  # a kernel polls every `sync_wait` seconds while it waits
MAX_JOBS_PER_KERNEL = 256
_JOB_ID = re.compile(r"[A-Za-z0-9_-]{8,64}")


@dataclass(frozen=True)
class Caller:
    """Who is calling, as proved by the signature (never taken from the payload)."""

    kernel_id: str
    session_id: str


Handler = Callable[[Caller, dict[str, Any]], Awaitable[Any]]


class BridgeError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def payload_number(
    payload: dict[str, Any], key: str, *, default: float, minimum: float, maximum: float
) -> float:
    """A number an operation reads from its payload: finite and within bounds, else a 400.

    Python's json reads NaN and Infinity, so a payload can carry them: operations read numbers
    through this."""
    value = payload.get(key, default)
    if value is None:
        return default
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not minimum <= value <= maximum
    ):
        bounds = f"from {minimum:g} to {maximum:g}"
        raise BridgeError(400, f"{key} must be a number {bounds}, not {shorten(value, 40)}")
    return float(value)


def sign(key: bytes, body: bytes) -> str:
    return hmac.new(key, body, hashlib.sha256).hexdigest()


@dataclass
class _Job:
    task: asyncio.Future[Any]
    kernel_id: str
    touched_at: float


class BridgeService:
    def __init__(
        self,
        key_for_kernel: Callable[[str], bytes | None],
        session_for_kernel: Callable[[str], str | None],
        *,
        declared: Mapping[str, Collection[str]] | None = None,
        sync_wait: float = 20.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._declared = declared
        self._key_for_kernel = key_for_kernel
        self._session_for_kernel = session_for_kernel
        self._handlers: dict[str, Handler] = {}
        self._nonces: dict[str, OrderedDict[str, float]] = {}
        self._jobs: dict[tuple[str, str], _Job] = {}
        self._sync_wait = sync_wait
        self._clock = clock

    def register(self, op: str, handler: Handler) -> None:
        """Offer `handler` as operation `op`, which must be one of `declared` when given."""
        if self._declared is not None and op not in self._declared:
            raise ValueError(
                f"bridge operation {op!r} is not declared in prime_agent_kernel/operations.py"
            )
        if op in self._handlers:
            raise ValueError(f"bridge operation {op!r} is already registered")
        self._handlers[op] = handler

    @property
    def operations(self) -> list[str]:
        return sorted(self._handlers)

    def handler(self, op: str) -> Handler:
        """What answers `op` (KeyError when nothing is registered for it)."""
        return self._handlers[op]

    # ------------------------------------------------------------ verification

    def verify(self, url_kernel_id: str, body: bytes, signature: str | None) -> dict[str, Any]:
        """Check a signed body; return it parsed. Raises BridgeError(403/400) when it fails."""
        if len(body) > MAX_BODY_BYTES:
            raise BridgeError(413, "request body too large")
        key = self._key_for_kernel(url_kernel_id)
        if key is None:
            raise BridgeError(403, "unknown kernel")
        if not signature or not hmac.compare_digest(sign(key, body), signature):
            raise BridgeError(403, "bad signature")
        try:
            request = parse_json(body, allow_nan=True)  # a NaN timestamp is refused below
        except BadJson as exc:  # not UTF-8, not JSON, nested too deeply, ...
            raise BridgeError(400, f"body is not JSON this host reads: it {exc.reason}") from None
        if not isinstance(request, dict):
            raise BridgeError(400, "body must be a JSON object")
        if request.get("kernel_id") != url_kernel_id:
            raise BridgeError(403, "kernel id does not match the signed body")
        ts = request.get("ts")
        if (
            not isinstance(ts, int | float)
            or not math.isfinite(ts)
            or abs(self._clock() - ts) > MAX_CLOCK_SKEW
        ):
            raise BridgeError(403, "stale or missing timestamp")
        nonce = request.get("nonce")
        if not isinstance(nonce, str) or not nonce:
            raise BridgeError(403, "missing nonce")
        self._remember_nonce(url_kernel_id, nonce)
        return request

    def _remember_nonce(self, kernel_id: str, nonce: str) -> None:
        seen = self._nonces.setdefault(kernel_id, OrderedDict())
        now = self._clock()
        # A nonce is kept as long as a request carrying it could still pass the timestamp check.
        while seen and next(iter(seen.values())) < now - 2 * MAX_CLOCK_SKEW:
            seen.popitem(last=False)
        if nonce in seen:
            raise BridgeError(403, "replayed request")
        if len(seen) >= NONCE_MEMORY:
            raise BridgeError(429, "too many bridge calls from this kernel; slow down")
        seen[nonce] = now

    # ------------------------------------------------------------ dispatch

    def _check_arguments(self, op: str, payload: dict[str, Any]) -> None:
        """A payload carries only the operation's declared arguments (a handler never sees a
        key it was not written for, whatever a kernel sends)."""
        if self._declared is None:
            return
        takes = self._declared[op]
        unknown = sorted(key for key in payload if key not in takes)
        if unknown:
            named = ", ".join(shorten(key, 40) for key in unknown[:5])
            raise BridgeError(
                400,
                f"bridge operation {op} takes {', '.join(takes) or 'no arguments'}, not {named}",
            )

    def _caller(self, kernel_id: str) -> Caller:
        session_id = self._session_for_kernel(kernel_id)
        if session_id is None:
            raise BridgeError(409, "no agent session is attached to this kernel")
        return Caller(kernel_id=kernel_id, session_id=session_id)

    async def call(self, url_kernel_id: str, body: bytes, signature: str | None) -> tuple[int, Any]:
        """Verify and run one call. Returns (HTTP status, JSON-able answer).

        The call is a job from its first moment, under the kernel's `call_id` when it sent one,
        so the kernel can cancel it even before this first answer arrives.
        """
        try:
            request = self.verify(url_kernel_id, body, signature)
            op = request.get("op")
            handler = self._handlers.get(op) if isinstance(op, str) else None
            if handler is None:
                raise BridgeError(404, f"unknown bridge operation {shorten(op, 60)}")
            payload = request.get("payload") or {}
            if not isinstance(payload, dict):
                raise BridgeError(400, "payload must be a JSON object")
            self._check_arguments(op, payload)
            caller = self._caller(url_kernel_id)
            job_id = self._new_job_id(url_kernel_id, request.get("call_id"))
        except BridgeError as exc:
            return exc.status, {"status": "error", "error": exc.message}
        job = _Job(asyncio.ensure_future(handler(caller, payload)), url_kernel_id, self._clock())
        self._jobs[(url_kernel_id, job_id)] = job
        return await self._answer(job, job_id)

    async def poll(self, url_kernel_id: str, body: bytes, signature: str | None) -> tuple[int, Any]:
        """A signed poll for a job: `{"kernel_id", "ts", "nonce", "job_id", "cancel"?}`."""
        try:
            request = self.verify(url_kernel_id, body, signature)
            job_id = str(request.get("job_id"))
            job = self._jobs.get((url_kernel_id, job_id))
            if job is None:
                raise BridgeError(404, "unknown job")
        except BridgeError as exc:
            return exc.status, {"status": "error", "error": exc.message}
        job.touched_at = self._clock()
        if request.get("cancel"):
            job.task.cancel()
        return await self._answer(job, job_id)

    def _new_job_id(self, kernel_id: str, proposed: Any) -> str:
        self._sweep_jobs()
        if sum(1 for kid, _ in self._jobs if kid == kernel_id) >= MAX_JOBS_PER_KERNEL:
            raise BridgeError(
                429, f"too many calls in flight from this kernel ({MAX_JOBS_PER_KERNEL})"
            )
        if isinstance(proposed, str) and _JOB_ID.fullmatch(proposed):
            if (kernel_id, proposed) in self._jobs:
                raise BridgeError(409, "call_id already in use")
            return proposed
        return secrets.token_hex(8)

    async def _answer(self, job: _Job, job_id: str) -> tuple[int, Any]:
        task = job.task
        done, _ = await asyncio.wait({task}, timeout=self._sync_wait)
        if not done:
            return 202, {"status": "pending", "job_id": job_id}
        self._jobs.pop((job.kernel_id, job_id), None)  # delivered: nothing to keep
        if task.cancelled():
            return 200, {"status": "error", "error": "the call was cancelled"}
        exc = task.exception()
        if isinstance(exc, BridgeError):
            return exc.status, {"status": "error", "error": exc.message}
        if exc is not None:
            return 200, {"status": "error", "error": f"{type(exc).__name__}: {exc}"}
        return 200, {"status": "ok", "result": task.result()}

    def _sweep_jobs(self) -> None:
        """Cancel and forget jobs whose kernel stopped polling (it was interrupted or died)."""
        cutoff = self._clock() - JOB_ABANDONED_AFTER
        for key, job in list(self._jobs.items()):
            if job.touched_at < cutoff:
                job.task.cancel()
                del self._jobs[key]

    @property
    def jobs_in_flight(self) -> int:
        return len(self._jobs)
