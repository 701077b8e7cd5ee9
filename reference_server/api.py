"""The HTTP API: OpenAI-compatible completions (streaming and not), models, health,
metrics, and the fault-injection admin endpoint."""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Annotated, Any, TypeVar

from fastapi import Depends, FastAPI, Header, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.exceptions import HTTPException as StarletteHTTPException

from exporters.instrumentation import EngineMetrics
from reference_server.async_engine import AsyncEngine
from reference_server.errors import InvalidRequest, QueueFull, RequestRejected
from reference_server.faults import FaultKind
from reference_server.outputs import RequestOutput
from reference_server.protocol import (
    ChatCompletionRequest, CompletionRequest, FaultRequest, _SamplingFields, error_body,
)
from reference_server.sse import SSE_DONE, ResponseShape, sse_error

logger = logging.getLogger(__name__)

DEFAULT_MAX_TOKENS = 16
T = TypeVar("T")

# HTTP status and OpenAI error type of a request that failed inside the engine.
_ENGINE_ERRORS: dict[str, tuple[int, str]] = {
    "timeout": (504, "timeout_error"),
    "bad_request": (400, "invalid_request_error"),
    "oom": (500, "server_error"),
    "model_error": (500, "server_error"),
}


def create_app(engine: AsyncEngine, metrics: EngineMetrics, registry: CollectorRegistry) -> FastAPI:
    config = engine.engine.config
    tokenizer = engine.engine.tokenizer

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine.start(asyncio.get_running_loop())
        yield
        await asyncio.to_thread(engine.shutdown)

    app = FastAPI(title="inferwatch reference server", lifespan=lifespan)
    _install_error_handlers(app, metrics)

    @app.get("/health")
    async def health() -> JSONResponse:
        if not engine.is_alive:
            return JSONResponse({"status": "engine loop stopped"}, status_code=503)
        return JSONResponse({"status": "ok"})

    @app.get("/metrics")
    async def prometheus_metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{
            "id": config.model_name, "object": "model", "created": 0, "owned_by": "inferwatch",
            "max_model_len": engine.engine.max_model_len}]}

    async def run(body: _SamplingFields, prompt_ids: list[int], request: Request,
                  chat: bool) -> Response:
        if body.model != config.model_name:
            return JSONResponse(error_body(f"the model {body.model!r} does not exist",
                                           "NotFoundError", "model", "model_not_found"), 404)
        params = body.sampling_params(DEFAULT_MAX_TOKENS)
        request_id = engine.new_request_id("chatcmpl" if chat else "cmpl")
        shape = ResponseShape(request_id, config.model_name, chat, body.include_usage)
        gen = engine.generate(request_id, prompt_ids, params)
        if body.stream:
            return await _stream(gen, shape, request)
        return await _complete(gen, shape, request)

    @app.post("/v1/completions")
    async def completions(body: CompletionRequest, request: Request) -> Response:
        prompt = body.prompt
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], int):
            ids = [int(t) for t in prompt]
        else:
            text = prompt if isinstance(prompt, str) else str(prompt[0]) if prompt else ""
            ids = tokenizer.encode(text, add_bos=True)
        return await run(body, ids, request, chat=False)

    @app.post("/v1/chat/completions")
    async def chat_completions(body: ChatCompletionRequest, request: Request) -> Response:
        messages = [{"role": m.role, "content": m.text()} for m in body.messages]
        text = tokenizer.apply_chat_template(messages)
        ids = tokenizer.encode(text, add_bos=True)   # the tokenizer never doubles a BOS
        return await run(body, ids, request, chat=True)

    if config.enable_fault_injection:
        _add_fault_routes(app, engine, config.admin_token)
    return app


# --- responses ----------------------------------------------------------------------------------
async def _until_disconnect(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _race_disconnect(work: Awaitable[T], request: Request) -> T | None:
    """Await ``work`` unless the client goes away first (then ``work`` is cancelled)."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_until_disconnect(request))
    done, _ = await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    if task in done:
        watcher.cancel()
        return task.result()
    task.cancel()
    try:
        await task
    except (asyncio.CancelledError, Exception):  # noqa: BLE001 - the client is gone
        pass
    return None


def _engine_error(out: RequestOutput) -> JSONResponse:
    status, err_type = _ENGINE_ERRORS.get(out.error_type or "", (500, "server_error"))
    message = out.error_message or "the request failed"
    return JSONResponse(error_body(message, err_type, None, out.error_type), status)


async def _complete(gen: AsyncIterator[RequestOutput], shape: ResponseShape,
                    request: Request) -> Response:
    async def collect() -> tuple[str, RequestOutput]:
        parts: list[str] = []
        last = RequestOutput(shape.request_id)
        try:
            async for out in gen:
                parts.append(out.text)
                last = out
        finally:
            await gen.aclose()  # type: ignore[attr-defined]
        return "".join(parts), last

    result = await _race_disconnect(collect(), request)
    if result is None:
        return Response(status_code=499)  # client closed request; nobody reads this
    text, last = result
    if last.error_type:
        return _engine_error(last)
    return JSONResponse(shape.full(text, last))


async def _stream(gen: AsyncIterator[RequestOutput], shape: ResponseShape,
                  request: Request) -> Response:
    # Wait for the first output before sending headers, so a request that fails before
    # its first token (rejected, injected error, timeout in the queue) gets a real status.
    first = await _race_disconnect(gen.__anext__(), request)
    if first is None:
        await gen.aclose()  # type: ignore[attr-defined]
        return Response(status_code=499)
    if first.finished and first.error_type:
        return _engine_error(first)

    async def events() -> AsyncIterator[str]:
        out = first
        try:
            yield shape.chunk(out, first=True)
            while not out.finished:
                out = await gen.__anext__()
                if out.error_type:
                    status, err_type = _ENGINE_ERRORS.get(out.error_type, (500, "server_error"))
                    yield sse_error(error_body(out.error_message or "failed", err_type, None,
                                               out.error_type))
                    break
                yield shape.chunk(out, first=False)
            else:
                if shape.include_usage:
                    yield shape.usage_chunk(out)
            yield SSE_DONE
        finally:
            await gen.aclose()  # type: ignore[attr-defined]

    return StreamingResponse(events(), media_type="text/event-stream")


# --- errors -------------------------------------------------------------------------------------
def _install_error_handlers(app: FastAPI, metrics: EngineMetrics) -> None:
    @app.exception_handler(RequestRejected)
    async def rejected(request: Request, exc: RequestRejected) -> JSONResponse:
        metrics.record_rejected(exc.error_type)
        err_type = {429: "rate_limit_error", 503: "service_unavailable"}.get(
            exc.status_code, "invalid_request_error")
        headers = {"Retry-After": str(exc.retry_after_seconds)} if isinstance(exc, QueueFull) \
            else None
        return JSONResponse(error_body(exc.message, err_type, exc.param), exc.status_code,
                            headers=headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        metrics.record_rejected("bad_request")
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        loc = [str(p) for p in first.get("loc", ()) if p != "body"]
        param = ".".join(loc) or None
        message = f"{param}: {first.get('msg')}" if param else str(first.get("msg"))
        return JSONResponse(error_body(message, "invalid_request_error", param), 400)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse(error_body(str(exc.detail), "invalid_request_error"),
                            exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("unhandled error on %s", request.url.path)
        return JSONResponse(error_body(f"internal error: {type(exc).__name__}",
                                       "server_error"), 500)


# --- fault injection ----------------------------------------------------------------------------
_FAULT_KINDS = frozenset(k.value for k in FaultKind)


def _add_fault_routes(app: FastAPI, engine: AsyncEngine, token: str) -> None:
    def require_token(authorization: Annotated[str | None, Header()] = None) -> None:
        expected = f"Bearer {token}"
        if authorization is None or not secrets.compare_digest(authorization, expected):
            raise StarletteHTTPException(401, "a valid bearer token is required",
                                         headers={"WWW-Authenticate": "Bearer"})

    admin = [Depends(require_token)]
    faults = engine.engine.faults

    @app.get("/admin/faults", dependencies=admin)
    async def list_faults() -> dict[str, Any]:
        return {"faults": [faults.describe(f) for f in faults.active()]}

    @app.post("/admin/faults", dependencies=admin)
    async def add_fault(body: FaultRequest) -> dict[str, Any]:
        if body.kind not in _FAULT_KINDS:
            raise InvalidRequest(f"kind must be one of {[k.value for k in FaultKind]}, got "
                                 f"{body.kind!r}", param="kind")
        try:
            fault = faults.add(body.kind, body.value, body.duration_seconds)
        except ValueError as exc:
            raise InvalidRequest(str(exc), param="value") from exc
        logger.warning("fault injected: %s %g for %g s", fault.kind.value, fault.value,
                       fault.duration_seconds)
        return faults.describe(fault)

    @app.delete("/admin/faults", dependencies=admin)
    async def clear_faults(kind: str | None = None) -> dict[str, Any]:
        if kind is not None and kind not in _FAULT_KINDS:
            raise InvalidRequest(f"unknown fault kind {kind!r}", param="kind")
        return {"cleared": faults.clear(kind)}

