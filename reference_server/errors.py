"""Exceptions the engine raises for requests it refuses; the API maps them to HTTP."""

from __future__ import annotations


class RequestRejected(Exception):
    """A request refused before it entered the engine."""

    status_code = 400
    error_type = "bad_request"     # the schema's error_type label

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


class InvalidRequest(RequestRejected):
    pass


class QueueFull(RequestRejected):
    status_code = 429
    error_type = "rejected"

    def __init__(self, message: str, retry_after_seconds: int = 1) -> None:
        super().__init__(message)
        self.retry_after_seconds = retry_after_seconds


class EngineDead(RequestRejected):
    status_code = 503
    error_type = "model_error"
