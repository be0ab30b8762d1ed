"""Turn SDK and transport exceptions into `ProviderError`s.

Both vendor SDKs are generated from the same template, so they share the shape this module relies
on: `APIStatusError` (with `status_code`, `response`, `body`), `APIConnectionError` and its
subclass `APITimeoutError`. Errors raised while reading a stream come straight from httpx2, the
SDKs' HTTP library, and are mapped here too.

Only the loop retries; `retryable` tells it whether a retry can help.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Iterable, Mapping
from typing import Any

from ..core.ports import ProviderError

ANTHROPIC_KEY_ENV = "ANTHROPIC_API_KEY"
OPENAI_KEY_ENV = "OPENAI_API_KEY"
ANTHROPIC_BASE_URL_ENV = "ANTHROPIC_BASE_URL"
OPENAI_BASE_URL_ENV = "OPENAI_BASE_URL"

# What a web server, not a model API, answers: a base URL that points at a website or a proxy's
# login page gets one of these, with 200, for any path.
_PAGE_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_EVENT_STREAM = "text/event-stream"

# In-stream errors arrive with HTTP 200; their `error.type` tells what really happened.
_ERROR_TYPE_STATUS: dict[str, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "rate_limit_exceeded": 429,
    "insufficient_quota": 429,
    "api_error": 500,
    "server_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}

_MAX_DETAIL = 500


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait, from `retry-after-ms` or `retry-after` (seconds or an HTTP date)."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def redact(text: str, secrets: Iterable[str | None]) -> str:
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "[redacted]")
    return text


def error_for_status(
    status: int,
    detail: str,
    *,
    vendor: str,
    key_env: str | None,
    retry_after: float | None = None,
) -> ProviderError:
    """The `ProviderError` for an HTTP status; `detail` is the server's own explanation."""
    suffix = f": {detail}" if detail else ""
    if status in (401, 403):
        hint = ""
        if key_env:
            hint = f"; check the {key_env} environment variable or the configured API key"
        return ProviderError(
            f"{vendor} rejected the credentials (HTTP {status}){hint}{suffix}",
            kind="auth",
            status=status,
        )
    if status == 429:
        return ProviderError(
            f"{vendor} rate limit (HTTP 429){suffix}",
            kind="rate_limit",
            status=status,
            retryable=True,
            retry_after=retry_after,
        )
    if status == 408:
        return ProviderError(
            f"{vendor} request timed out (HTTP 408){suffix}",
            kind="timeout",
            status=status,
            retryable=True,
            retry_after=retry_after,
        )
    if status >= 500 or status == 409:
        return ProviderError(
            f"{vendor} server error (HTTP {status}){suffix}",
            kind="server",
            status=status,
            retryable=True,
            retry_after=retry_after,
        )
    return ProviderError(
        f"{vendor} rejected the request (HTTP {status}){suffix}",
        kind="bad_request",
        status=status,
    )


def missing_credentials(vendor: str, key_env: str) -> ProviderError:
    return ProviderError(
        f"No API key for {vendor}: set the {key_env} environment variable or pass an API key.",
        kind="auth",
    )


def incomplete_stream(vendor: str) -> ProviderError:
    return ProviderError(
        f"{vendor} stream ended before the response was complete (connection dropped?)",
        kind="connection",
        retryable=True,
    )


def not_the_api(response: Any, media: str, *, vendor: str, base_url_env: str) -> ProviderError:
    """A 200 answer that is not the API's (a web page, plain text): a wrong base URL, which no
    retry can fix."""
    return ProviderError(
        f"the server at {_address(response)} answered with {media or 'no content type'}, not "
        f"the {vendor}: check the base URL ({base_url_env} or base_url)",
        kind="not_api",
    )


def refuse_a_page(response: Any, *, vendor: str, base_url_env: str) -> None:
    """Raise `not_the_api` for an answer that is a web page, before its body is read."""
    media = media_type(response)
    if media in _PAGE_TYPES:
        raise not_the_api(response, media, vendor=vendor, base_url_env=base_url_env)


def answer_json(response: Any, *, vendor: str, base_url_env: str) -> Any:
    """The JSON body of a non-streamed answer; a page, or a body in another format that is not
    JSON either, is `not_the_api`."""
    refuse_a_page(response, vendor=vendor, base_url_env=base_url_env)
    try:
        return response.json()
    except ValueError:
        media = media_type(response)
        if _is_json(media):
            raise  # the API's own format, broken: reported as an unexpected failure
        raise not_the_api(response, media, vendor=vendor, base_url_env=base_url_env) from None


def unfinished_stream(
    response: Any, events_seen: bool, *, vendor: str, base_url_env: str
) -> ProviderError:
    """Why a streamed answer ended unfinished: a body that held no event at all and is neither
    an event stream nor JSON is not the API's; anything else is a stream that stopped early."""
    media = media_type(response)
    if not events_seen and media and media != _EVENT_STREAM and not _is_json(media):
        return not_the_api(response, media, vendor=vendor, base_url_env=base_url_env)
    return incomplete_stream(vendor)


def media_type(response: Any) -> str:
    """`text/html` for `Content-Type: text/html; charset=utf-8`; "" when there is none."""
    headers = getattr(response, "headers", None) or {}
    return str(headers.get("content-type") or "").split(";", 1)[0].strip().lower()


def _is_json(media: str) -> bool:
    return media == "application/json" or media.endswith("+json")


def _address(response: Any) -> str:
    """Where the request went, without credentials or query (either may hold a secret)."""
    try:
        url = response.request.url
    except (AttributeError, RuntimeError):  # httpx2 raises RuntimeError when there is no request
        return "the base URL"
    port = f":{url.port}" if url.port else ""
    return f"{url.scheme}://{url.host}{port}{url.path}"


def map_sdk_error(
    exc: BaseException,
    *,
    vendor: str,
    key_env: str,
    secrets: Iterable[str | None] = (),
) -> ProviderError:
    """Map an exception from the `anthropic` or `openai` SDK (or httpx2 under them)."""
    import httpx2

    secrets = tuple(secrets)
    if isinstance(exc, ProviderError):
        return exc

    status_code = getattr(exc, "status_code", None)
    response = getattr(exc, "response", None)
    if isinstance(status_code, int) and response is not None:
        body = getattr(exc, "body", None)
        detail = redact(_server_detail(body, exc), secrets)
        status = status_code
        if status < 400:
            # An error event inside a 200 stream: derive the status from the error type.
            status = _ERROR_TYPE_STATUS.get(_error_type(body) or "", 500)
        headers = getattr(response, "headers", None)
        return error_for_status(
            status, detail, vendor=vendor, key_env=key_env, retry_after=parse_retry_after(headers)
        )

    name = type(exc).__name__
    lineage = {cls.__name__ for cls in type(exc).__mro__}
    if "APITimeoutError" in lineage or isinstance(exc, httpx2.TimeoutException | TimeoutError):
        return ProviderError(
            f"{vendor} request timed out{_where(exc)}", kind="timeout", retryable=True
        )
    if "APIConnectionError" in lineage or isinstance(exc, httpx2.TransportError | ConnectionError):
        cause = exc.__cause__ or exc
        return ProviderError(
            f"{vendor} connection failed{_where(exc)}: {redact(str(cause), secrets) or name}",
            kind="connection",
            retryable=True,
        )
    if name == "APIError":
        # openai raises a bare APIError for an error object inside a stream.
        body = getattr(exc, "body", None)
        fallback = getattr(exc, "message", None) or str(exc)
        return stream_error(
            body, vendor=vendor, key_env=key_env, secrets=secrets, fallback=fallback
        )
    if "Missing credentials" in str(exc) or "Could not resolve authentication" in str(exc):
        return missing_credentials(vendor, key_env)
    return ProviderError(f"{vendor} call failed: {name}: {redact(str(exc), secrets)}")


def stream_error(
    body: Any,
    *,
    vendor: str,
    key_env: str,
    secrets: Iterable[str | None] = (),
    fallback: str = "an error event arrived inside the answer's stream",
) -> ProviderError:
    """An error object inside a 200 stream: its `error.type` tells what really happened."""
    status = _ERROR_TYPE_STATUS.get(_error_type(body) or "", 500)
    detail = redact(_server_detail(body, fallback), secrets)
    return error_for_status(status, detail, vendor=vendor, key_env=key_env)


def _error_type(body: Any) -> str | None:
    if isinstance(body, Mapping):
        inner = body.get("error")
        if isinstance(inner, Mapping) and isinstance(inner.get("type"), str):
            return inner["type"]
        for key in ("type", "code"):
            if isinstance(body.get(key), str) and body[key] != "error":
                return body[key]
    return None


def _server_detail(body: Any, fallback: BaseException | str) -> str:
    text: str | None = None
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping):
            message = inner.get("message")
            text = message if isinstance(message, str) else None
        elif isinstance(inner, str):
            text = inner
    elif isinstance(body, str):
        text = body
    if text is None:
        text = fallback if isinstance(fallback, str) else _exception_text(fallback)
    text = " ".join(text.split())
    return text[:_MAX_DETAIL] + ("…" if len(text) > _MAX_DETAIL else "")


def _exception_text(exc: BaseException) -> str:
    return getattr(exc, "message", None) or str(exc)


def _where(exc: BaseException) -> str:
    try:
        url = exc.request.url  # type: ignore[attr-defined]
    except (AttributeError, RuntimeError):  # httpx2 raises RuntimeError when there is no request
        return ""
    port = f":{url.port}" if url.port else ""
    return f" ({url.scheme}://{url.host}{port})"
