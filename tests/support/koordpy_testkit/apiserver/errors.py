"""The emulator's failure type: an HTTP status plus the Kubernetes ``Status`` body to send."""

from __future__ import annotations

from typing import Any

__all__ = ["StatusError", "status_body"]

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
}


def status_body(code: int, reason: str | None, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """A ``v1 Status`` object as the API server renders it."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if code < 400 else "Failure",
        "message": message,
        "reason": reason if reason is not None else _REASONS.get(code, ""),
        "code": code,
    }
    if details:
        body["details"] = details
    return body


class StatusError(Exception):
    """Raised inside the emulator; rendered as an HTTP error with a ``Status`` body."""

    def __init__(self, code: int, message: str, reason: str | None = None, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.code = code
        self.body = status_body(code, reason, message, details)
