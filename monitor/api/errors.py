"""Every error the API returns is a JSON body: {"error": {"status", "code", "message"}}.

Routes raise ``ApiError`` (or FastAPI's HTTPException); request validation errors, unknown
routes and unexpected exceptions are translated here, so no client ever parses an HTML or
plain-text error page.
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

logger = logging.getLogger(__name__)


class ApiError(Exception):
    """An error for the client: its HTTP status, a short code and a message naming what."""

    def __init__(self, status: int, code: str, message: str,
                 headers: dict[str, str] | None = None,
                 extra: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers
        self.extra = extra or {}  # more members of the error object (e.g. file, problems)


def not_found(what: str, name: str) -> ApiError:
    return ApiError(404, "not_found", f"{what} {name!r} not found")


def bad_request(message: str) -> ApiError:
    return ApiError(400, "bad_request", message)


def error_body(status: int, code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": {"status": status, "code": code, "message": message, **extra}}


def _code_of(status: int) -> str:
    try:
        return HTTPStatus(status).phrase.lower().replace(" ", "_").replace("-", "_")
    except ValueError:
        return "error"


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(_request: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(error_body(exc.status, exc.code, exc.message, **exc.extra),
                            exc.status,
                            headers=exc.headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        return JSONResponse(error_body(exc.status_code, _code_of(exc.status_code), message),
                            exc.status_code, headers=getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', '')}"
                    for e in exc.errors()]
        return JSONResponse(error_body(422, "invalid_request", "; ".join(problems),
                                       problems=problems), 422)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("%s %s failed", request.method, request.url.path)
        return JSONResponse(error_body(500, "internal_error",
                                       f"{type(exc).__name__}: the monitor failed to answer; "
                                       "see its log"), 500)
