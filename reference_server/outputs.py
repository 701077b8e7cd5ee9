"""What the engine hands back per request per step."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class RequestOutput:
    request_id: str
    text: str = ""                       # text completed by this step's tokens
    token_ids: list[int] = field(default_factory=list)
    finished: bool = False
    finish_reason: str | None = None     # stop | length | abort | error | timeout
    error_type: str | None = None        # oom | timeout | model_error | ...
    error_message: str | None = None
    num_prompt_tokens: int = 0
    num_output_tokens: int = 0
    num_cached_tokens: int = 0
