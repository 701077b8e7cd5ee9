"""A small OpenAI-compatible upstream with scripted timing, for the gateway's tests.

It streams ``num_chunks`` content chunks (after ``num_reasoning`` reasoning chunks), the first
after ``first_delay`` seconds and each next after ``interval``, and records what it received
and whether each stream ran to its end or was cut by the client."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


@dataclass
class Script:
    num_chunks: int = 5
    num_reasoning: int = 0
    first_delay: float = 0.0
    interval: float = 0.0
    pause_after_first: float = 0.0  # a silence after the first chunk
    status: int = 200  # non-200: answer with this status and an OpenAI error body
    answer_delay: float = 0.0  # before any answer (headers included)
    metrics: dict[str, float] | None = None  # vLLM's per-request metrics object
    error_after: int | None = None  # an SSE error event after this many chunks, then the end


@dataclass
class Upstream:
    script: Script = field(default_factory=Script)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    peers: list[int] = field(default_factory=list)  # the client port of each request
    finished: int = 0  # streams sent to the end
    cut: int = 0  # streams stopped because the client went away
    streaming: int = 0  # streams open now
    peak_streaming: int = 0  # the most open at once

    def app(self) -> Starlette:
        return Starlette(routes=[
            Route("/v1/chat/completions", self._completions, methods=["POST"]),
            Route("/v1/completions", self._completions, methods=["POST"]),
            Route("/v1/models", self._models, methods=["GET"]),
        ])

    async def _models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": "tiny", "object": "model"}]})

    async def _completions(self, request: Request) -> Response:
        body = await request.json()
        self.bodies.append(body)
        self.headers.append(dict(request.headers))
        self.peers.append(request.client.port if request.client else -1)
        script = self.script
        await asyncio.sleep(script.answer_delay)
        if script.status != 200:
            return JSONResponse({"error": {"message": "scripted", "code": script.status}},
                                status_code=script.status)
        chat = request.url.path.endswith("chat/completions")
        if not body.get("stream"):
            await asyncio.sleep(script.first_delay)
            full: dict[str, Any] = {"id": "x", "object": "chat.completion", "model": "tiny",
                                    "choices": [{"index": 0, "message": {"content": "a b"}}],
                                    "usage": _usage(script.num_chunks)}
            if script.metrics:
                full["metrics"] = script.metrics
            return JSONResponse(full)
        usage = (body.get("stream_options") or {}).get("include_usage", False)
        return StreamingResponse(self._stream(chat, usage), media_type="text/event-stream")

    async def _stream(self, chat: bool, usage: bool) -> AsyncIterator[bytes]:
        script = self.script
        done = False
        self.streaming += 1
        self.peak_streaming = max(self.peak_streaming, self.streaming)
        try:
            await asyncio.sleep(script.first_delay)
            total = script.num_reasoning + script.num_chunks
            for i in range(total):
                if i == script.error_after:
                    yield _sse({"error": {"message": "engine failed", "type": "server_error",
                                          "code": 500}})
                    yield b"data: [DONE]\n\n"
                    done = True
                    return
                if i == 1 and script.pause_after_first:
                    await asyncio.sleep(script.pause_after_first)
                elif i:
                    await asyncio.sleep(script.interval)
                yield _chunk(chat, f"t{i} ", reasoning=i < script.num_reasoning)
            if usage:
                last: dict[str, Any] = {"id": "x", "choices": [],
                                        "usage": _usage(script.num_chunks + script.num_reasoning)}
                if script.metrics:
                    last["metrics"] = script.metrics
                yield _sse(last)
            yield b"data: [DONE]\n\n"
            done = True
        finally:
            self.streaming -= 1
            if done:
                self.finished += 1
            else:
                self.cut += 1


def _usage(completion_tokens: int) -> dict[str, int]:
    return {"prompt_tokens": 7, "completion_tokens": completion_tokens,
            "total_tokens": 7 + completion_tokens}


def _chunk(chat: bool, text: str, reasoning: bool) -> bytes:
    if chat:
        delta = {"reasoning_content": text} if reasoning else {"content": text}
        choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": None}
    else:
        choice = {"index": 0, "text": text, "finish_reason": None}
    return _sse({"id": "x", "object": "chunk", "model": "tiny", "choices": [choice]})


def _sse(body: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(body).encode() + b"\n\n"
