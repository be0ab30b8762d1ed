"""HTTP endpoints of the kernel bridge, shared by the server extension and the headless CLI."""

from __future__ import annotations

import json
from typing import Any

from tornado import web

from ..core.bridge import BridgeService

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

    async def answer_bridge(self, kernel_id: str) -> None:
        service = self.bridge_service()
        signature = self.request.headers.get(SIGNATURE_HEADER)
        handle = service.call if self.operation == "call" else service.poll
        status, answer = await handle(kernel_id, self.request.body, signature)
        self.set_status(status)  # type: ignore[attr-defined]
        self.set_header("Content-Type", "application/json")  # type: ignore[attr-defined]
        self.finish(json.dumps(answer))  # type: ignore[attr-defined]


class StandaloneBridgeHandler(BridgeEndpoint, web.RequestHandler):
    def initialize(self, service: BridgeService, operation: str) -> None:
        self._service = service
        self.operation = operation

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
