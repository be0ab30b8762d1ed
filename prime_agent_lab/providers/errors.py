"""Turn SDK and transport exceptions into `ProviderError`s.

Both vendor SDKs are generated from the same template, so they share the shape this module relies
on: `APIStatusError` (with `status_code`, `response`, `body`), `APIConnectionError` and its
subclass `APITimeoutError`. Errors raised while reading a stream come straight from httpx2, the
SDKs' HTTP library, and are mapped here too.

Nothing here names a vendor: each provider declares its `ErrorMapping` (core/ports.py: the
vendor as messages name it, its key and base URL variables, what its in-stream error types mean)
and hands it to these helpers. Only the loop retries; `retryable` tells it whether a retry can
help.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Iterable, Mapping
from typing import Any

from ..core.ports import ErrorMapping, ProviderError

# What a web server, not a model API, answers: a base URL that points at a website or a proxy's
# login page gets one of these, with 200, for any path.
_PAGE_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_EVENT_STREAM = "text/event-stream"

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
    status: int, detail: str, errors: ErrorMapping, retry_after: float | None = None
) -> ProviderError:
    """The `ProviderError` for an HTTP status; `detail` is the server's own explanation."""
    vendor = errors.vendor
    suffix = f": {detail}" if detail else ""
    if status in (401, 403):
        hint = ""
        if errors.key_variable:
            hint = (
                f"; check the {errors.key_variable} environment variable or the configured API key"
            )
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


def missing_credentials(errors: ErrorMapping) -> ProviderError:
    where = f"set the {errors.key_variable} environment variable or " if errors.key_variable else ""
    return ProviderError(f"No API key for {errors.vendor}: {where}pass an API key.", kind="auth")


def incomplete_stream(errors: ErrorMapping) -> ProviderError:
    return ProviderError(
        f"{errors.vendor} stream ended before the response was complete (connection dropped?)",
        kind="connection",
        retryable=True,
    )


def not_the_api(response: Any, media: str, errors: ErrorMapping) -> ProviderError:
    """A 200 answer that is not the API's (a web page, plain text): a wrong base URL, which no
    retry can fix."""
    setting = " or ".join(v for v in (errors.base_url_variable, "base_url") if v)
    return ProviderError(
        f"the server at {_address(response)} answered with {media or 'no content type'}, not "
        f"the {errors.vendor}: check the base URL ({setting})",
        kind="not_api",
    )


def refuse_a_page(response: Any, errors: ErrorMapping) -> None:
    """Raise `not_the_api` for an answer that is a web page, before its body is read."""
    media = media_type(response)
    if media in _PAGE_TYPES:
        raise not_the_api(response, media, errors)


def answer_json(response: Any, errors: ErrorMapping) -> Any:
    """The JSON body of a non-streamed answer; a page, or a body in another format that is not
    JSON either, is `not_the_api`."""
    refuse_a_page(response, errors)
    try:
        return response.json()
    except ValueError:
        media = media_type(response)
        if _is_json(media):
            raise  # the API's own format, broken: reported as an unexpected failure
        raise not_the_api(response, media, errors) from None


def unfinished_stream(response: Any, events_seen: bool, errors: ErrorMapping) -> ProviderError:
    """Why a streamed answer ended unfinished: a body that held no event at all and is neither
    an event stream nor JSON is not the API's; anything else is a stream that stopped early."""
    media = media_type(response)
    if not events_seen and media and media != _EVENT_STREAM and not _is_json(media):
        return not_the_api(response, media, errors)
    return incomplete_stream(errors)


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
    exc: BaseException, errors: ErrorMapping, secrets: Iterable[str | None] = ()
) -> ProviderError:
    """Map an exception from an SDK generated like the `anthropic` and `openai` ones (or from
    httpx2 under them)."""
    import httpx2

    vendor = errors.vendor
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
            status = _stream_status(body, errors)
        headers = getattr(response, "headers", None)
        return error_for_status(status, detail, errors, parse_retry_after(headers))

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
        return stream_error(body, errors, secrets, fallback=fallback)
    if "Missing credentials" in str(exc) or "Could not resolve authentication" in str(exc):
        return missing_credentials(errors)
    return ProviderError(f"{vendor} call failed: {name}: {redact(str(exc), secrets)}")


def stream_error(
    body: Any,
    errors: ErrorMapping,
    secrets: Iterable[str | None] = (),
    fallback: str = "an error event arrived inside the answer's stream",
) -> ProviderError:
    """An error object inside a 200 stream: its `error.type` tells what really happened."""
    detail = redact(_server_detail(body, fallback), secrets)
    return error_for_status(_stream_status(body, errors), detail, errors)


def _stream_status(body: Any, errors: ErrorMapping) -> int:
    """The HTTP status an error object inside a 200 stream stands for (500 when its type is
    not one the provider declares)."""
    return errors.stream_error_statuses.get(_error_type(body) or "", 500)


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
