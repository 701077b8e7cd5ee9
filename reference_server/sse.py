"""OpenAI response and stream-chunk bodies for completions and chat completions."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from reference_server.outputs import RequestOutput


@dataclass(slots=True)
class ResponseShape:
    """What differs between /v1/completions and /v1/chat/completions."""

    request_id: str
    model: str
    chat: bool
    include_usage: bool = False
    created: int = field(default_factory=lambda: int(time.time()))

    def _base(self, obj: str) -> dict[str, Any]:
        return {"id": self.request_id, "object": obj, "created": self.created, "model": self.model}

    def chunk(self, out: RequestOutput, first: bool) -> str:
        if self.chat:
            delta: dict[str, Any] = {"role": "assistant", "content": out.text} if first \
                else ({"content": out.text} if out.text or not out.finished else {})
            choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None,
                                      "finish_reason": out.finish_reason}
            body = self._base("chat.completion.chunk")
        else:
            choice = {"index": 0, "text": out.text, "logprobs": None,
                      "finish_reason": out.finish_reason}
            body = self._base("text_completion")
        body["choices"] = [choice]
        if self.include_usage:
            body["usage"] = None
        return _sse(body)

    def usage_chunk(self, out: RequestOutput) -> str:
        body = self._base("chat.completion.chunk" if self.chat else "text_completion")
        body["choices"] = []
        body["usage"] = usage(out)
        return _sse(body)

    def full(self, text: str, last: RequestOutput) -> dict[str, Any]:
        if self.chat:
            body = self._base("chat.completion")
            body["choices"] = [{"index": 0, "message": {"role": "assistant", "content": text},
                                "logprobs": None, "finish_reason": last.finish_reason}]
        else:
            body = self._base("text_completion")
            body["choices"] = [{"index": 0, "text": text, "logprobs": None,
                                "finish_reason": last.finish_reason}]
        body["usage"] = usage(last)
        return body


def usage(out: RequestOutput) -> dict[str, Any]:
    return {
        "prompt_tokens": out.num_prompt_tokens,
        "completion_tokens": out.num_output_tokens,
        "total_tokens": out.num_prompt_tokens + out.num_output_tokens,
        "prompt_tokens_details": {"cached_tokens": out.num_cached_tokens},
    }


def _sse(body: dict[str, Any]) -> str:
    return f"data: {json.dumps(body, separators=(',', ':'))}\n\n"


def sse_error(body: dict[str, Any]) -> str:
    return _sse(body)


SSE_DONE = "data: [DONE]\n\n"
