"""A scripted OpenAI-compatible streaming server (FastAPI under uvicorn on a port-0 socket):
known delays and failures, so the load generator's measurements can be checked exactly.

The prompt picks the behaviour: ``ok`` (first chunk after ``ttft`` s, then a chunk every
``itl`` s), ``reject`` (429), ``fail`` (500), ``cut`` (two chunks, then the connection
drops), ``stream-error`` (an error event mid-stream), ``hang`` (never answers). At most
``capacity`` requests are served at once; the rest wait (a server that saturates).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from tests.asgi_thread import serving


@dataclass
class Script:
    ttft: float = 0.05
    itl: float = 0.02
    capacity: int = 1000
    slowdown: float = 1.0
    per_request_metrics: bool = False   # vLLM's `metrics` object in the usage chunk
    # what the server saw
    prompts: list[str] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0


def build_app(script: Script) -> FastAPI:
    app = FastAPI()
    slots = asyncio.Semaphore(script.capacity)

    @app.post("/v1/completions")
    @app.post("/v1/chat/completions")
    async def complete(request: Request) -> Response:
        body = await request.json()
        prompt = body.get("prompt") or body["messages"][-1]["content"]
        script.prompts.append(prompt)
        script.arrivals.append(time.perf_counter())
        if body.get("model") == "missing":
            return JSONResponse({"error": {"message": "no such model"}}, status_code=404)
        if prompt.startswith("reject"):
            return JSONResponse({"error": {"message": "queue full"}}, status_code=429)
        if prompt.startswith("fail"):
            return JSONResponse({"error": {"message": "boom"}}, status_code=500)
        tokens = int(body.get("max_tokens", 8))
        chat = "messages" in body

        async def events() -> AsyncIterator[bytes]:
            queued = time.perf_counter()
            async with slots:
                scheduled = time.perf_counter()
                script.in_flight += 1
                script.max_in_flight = max(script.max_in_flight, script.in_flight)
                try:
                    if prompt.startswith("hang"):
                        await asyncio.sleep(3600)
                    await asyncio.sleep(script.ttft * script.slowdown)
                    first_token = time.perf_counter()
                    for i in range(tokens):
                        if i:
                            await asyncio.sleep(script.itl * script.slowdown)
                        if prompt.startswith("cut") and i == 2:
                            raise RuntimeError("connection dropped")
                        if prompt.startswith("stream-error") and i == 2:
                            yield _event({"error": {"message": "engine step failed"}})
                            return
                        choice: dict[str, Any] = ({"delta": {"content": "a"}, "index": 0}
                                                  if chat else {"text": "a", "index": 0})
                        yield _event({"choices": [choice]})
                    final: dict[str, Any] = {
                        "choices": [], "usage": {"prompt_tokens": len(prompt),
                                                 "completion_tokens": tokens}}
                    if script.per_request_metrics:
                        final["metrics"] = {
                            "queue_time_ms": (scheduled - queued) * 1000,
                            "time_to_first_token_ms": (first_token - scheduled) * 1000}
                    yield _event(final)
                    yield b"data: [DONE]\n\n"
                finally:
                    script.in_flight -= 1

        return StreamingResponse(events(), media_type="text/event-stream")

    return app


def _event(payload: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()


@contextmanager
def scripted_server(script: Script | None = None) -> Iterator[tuple[str, Script]]:
    script = script or Script()
    with serving(build_app(script), log_level="critical") as url:
        yield url, script
