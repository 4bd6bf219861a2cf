"""koordpy's API error vocabulary, independent of the HTTP library underneath.

Every failed call made through :mod:`koordpy.kube` raises an :class:`ApiError` subclass. Transport
failures (refused connections, resets, timeouts) raise :class:`ApiConnectionError`, which is an
``ApiError`` with ``status == 0`` so one ``except ApiError`` catches everything.

Not guaranteed: ``reason``/``message`` are whatever the server put in its ``Status`` body; a server
that answers with a non-``Status`` body gets a generic reason (the HTTP phrase) and the body text as
the message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

__all__ = [
    "ApiConnectionError",
    "ApiError",
    "BadRequest",
    "Conflict",
    "Forbidden",
    "Gone",
    "NotFound",
    "ServerError",
    "TooManyRequests",
    "Unauthorized",
    "UnprocessableEntity",
    "error_from_response",
    "error_from_status",
    "is_temporary",
]


class ApiError(Exception):
    """An API call failed. ``body`` is the decoded ``Status`` object when the server sent one."""

    def __init__(self, status: int, reason: str = "", message: str = "", body: Mapping[str, Any] | None = None) -> None:
        self.status = status
        self.reason = reason
        self.message = message
        self.body: dict[str, Any] = dict(body) if body else {}
        super().__init__(f"{status} {reason}: {message}" if message else f"{status} {reason}")

    @property
    def details(self) -> dict[str, Any]:
        """The ``Status.details`` mapping (name, kind, causes, retryAfterSeconds), empty when absent."""
        details = self.body.get("details")
        return details if isinstance(details, dict) else {}


class BadRequest(ApiError):  # noqa: N818 - the HTTP reason phrase is the name
    """400: malformed request (bad selector, bad patch, undecodable body)."""


class Unauthorized(ApiError):  # noqa: N818 - the HTTP reason phrase is the name
    """401: no or invalid credentials."""


class Forbidden(ApiError):  # noqa: N818 - the HTTP reason phrase is the name
    """403: authenticated but not allowed (RBAC)."""


class NotFound(ApiError):  # noqa: N818 - the HTTP reason phrase is the name
    """404: the object, or the resource type itself, does not exist."""


class Conflict(ApiError):  # noqa: N818 - the HTTP reason phrase is the name
    """409: either the object already exists (``reason == "AlreadyExists"``) or an update carried a stale
    ``resourceVersion``/precondition (``reason == "Conflict"``)."""

    @property
    def already_exists(self) -> bool:
        return self.reason == "AlreadyExists"


class Gone(ApiError):  # noqa: N818 - the HTTP reason phrase is the name
    """410: the requested resourceVersion (watch start or list continue token) is too old; relist."""


class UnprocessableEntity(ApiError):  # noqa: N818 - the HTTP reason phrase is the name
    """422: the object failed validation (``reason == "Invalid"``)."""


class TooManyRequests(ApiError):  # noqa: N818 - the HTTP reason phrase is the name
    """429: throttled, or an eviction refused by a PodDisruptionBudget. ``retry_after`` is in seconds when
    the server said (``Retry-After`` header or ``details.retryAfterSeconds``), else None."""

    def __init__(
        self,
        status: int,
        reason: str = "",
        message: str = "",
        body: Mapping[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(status, reason, message, body)
        self.retry_after = retry_after


class ServerError(ApiError):
    """5xx: the server failed; usually worth retrying."""


class ApiConnectionError(ApiError):
    """The request never got an HTTP answer (connect refused, reset, timeout, truncated stream). status == 0."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "ConnectionError", message)


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: UnprocessableEntity,
}


def _parse_retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP-date; not worth parsing for our purposes


def error_from_status(status: int, body: Mapping[str, Any] | None, *, retry_after: str | None = None) -> ApiError:
    """Build the matching exception from an HTTP status code and an already decoded ``Status`` body.

    Also used for watch ``ERROR`` events, whose object is a ``Status`` with the code inside.
    """
    body = body or {}
    reason = str(body.get("reason") or "")
    message = str(body.get("message") or "")
    if status == 429:
        after = _parse_retry_after(retry_after)
        if after is None:
            details = body.get("details")
            if isinstance(details, dict) and details.get("retryAfterSeconds") is not None:
                after = _parse_retry_after(str(details["retryAfterSeconds"]))
        return TooManyRequests(status, reason or "TooManyRequests", message, body, retry_after=after)
    if status >= 500:
        return ServerError(status, reason or "InternalError", message, body)
    cls = _BY_STATUS.get(status, ApiError)
    return cls(status, reason, message, body)


def error_from_response(status: int, raw_body: bytes, *, retry_after: str | None = None) -> ApiError:
    """Build the matching exception from a raw HTTP error response."""
    body: dict[str, Any] = {}
    try:
        decoded = orjson.loads(raw_body) if raw_body else {}
        if isinstance(decoded, dict):
            body = decoded
    except orjson.JSONDecodeError:
        body = {}
    if not body:
        body = {"message": raw_body[:500].decode("utf-8", "replace")} if raw_body else {}
    return error_from_status(status, body, retry_after=retry_after)


def is_temporary(exc: BaseException) -> bool:
    """True for failures worth retrying as-is: 429, 5xx, and connection errors/timeouts.

    Not a judgement about 409 Conflict: a conflict is retryable only after re-reading the object, which
    the caller must do, so it returns False.
    """
    if isinstance(exc, TooManyRequests | ServerError | ApiConnectionError):
        return True
    if isinstance(exc, ApiError):
        return False
    return isinstance(exc, ConnectionError | TimeoutError)
