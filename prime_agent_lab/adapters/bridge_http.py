"""HTTP endpoints of the kernel bridge, shared by the server extension and the headless CLI."""

from __future__ import annotations

import json
from typing import Any

from tornado import web

from ..core.bridge import MAX_BODY_BYTES, BridgeService

SIGNATURE_HEADER = "X-Prime-Agent-Signature"
KERNEL_ROUTE = r"(?P<kernel_id>[\w-]+)"


class BridgeEndpoint:
    """Mixin for a tornado handler: POST a signed body, get the bridge's answer as JSON.

    `operation` is "call" (run an operation) or "jobs" (poll or cancel a long one).
    """

    operation = "call"
    request: Any

    def bridge_service(self) -> BridgeService:
        raise NotImplementedError

    def check_xsrf_cookie(self) -> None:
        """Kernels are authenticated by the HMAC signature, not by a browser cookie."""

    def limit_body(self) -> None:
        """Refuse oversized bodies before reading them (the routes need no login)."""
        self._chunks: list[bytes] = []
        self._size = 0
        self.request.connection.set_max_body_size(MAX_BODY_BYTES)
        length = self.request.headers.get("Content-Length", "0")
        if not length.isdigit() or int(length) > MAX_BODY_BYTES:
            raise web.HTTPError(413, "request body too large")

    def data_received(self, chunk: bytes) -> None:
        self._size += len(chunk)
        if self._size > MAX_BODY_BYTES:
            raise web.HTTPError(413, "request body too large")
        self._chunks.append(chunk)

    async def answer_bridge(self, kernel_id: str) -> None:
        service = self.bridge_service()
        signature = self.request.headers.get(SIGNATURE_HEADER)
        handle = service.call if self.operation == "call" else service.poll
        status, answer = await handle(kernel_id, b"".join(self._chunks), signature)
        self.set_status(status)  # type: ignore[attr-defined]
        self.set_header("Content-Type", "application/json")  # type: ignore[attr-defined]
        self.finish(json.dumps(answer))  # type: ignore[attr-defined]


@web.stream_request_body
class StandaloneBridgeHandler(BridgeEndpoint, web.RequestHandler):
    def initialize(self, service: BridgeService, operation: str) -> None:
        self._service = service
        self.operation = operation

    def prepare(self) -> None:
        self.limit_body()

    def bridge_service(self) -> BridgeService:
        return self._service

    async def post(self, kernel_id: str) -> None:
        await self.answer_bridge(kernel_id)


def standalone_routes(service: BridgeService, prefix: str = "/prime-agent/bridge") -> list[Any]:
    return [
        (
            rf"{prefix}/kernels/{KERNEL_ROUTE}/{operation}",
            StandaloneBridgeHandler,
            {"service": service, "operation": operation},
        )
        for operation in ("call", "jobs")
    ]
