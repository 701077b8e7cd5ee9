"""Per-request state: token ids, KV block table, progress and timestamps."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from reference_server.sampling import SamplingParams

if TYPE_CHECKING:
    import torch

    from reference_server.tokenizer import IncrementalDetokenizer


class SequenceStatus(enum.Enum):
    WAITING = enum.auto()
    RUNNING = enum.auto()
    FINISHED = enum.auto()


class FinishReason(enum.StrEnum):
    STOP = "stop"
    LENGTH = "length"
    ABORT = "abort"
    ERROR = "error"
    TIMEOUT = "timeout"


class Sequence:
    """One request inside the engine.

    ``token_ids`` holds the prompt followed by the generated tokens; ``num_computed_tokens``
    counts the prefix whose K/V is in the cache. After a preemption by recompute the block
    table is emptied and ``num_computed_tokens`` goes back to 0, so generated tokens are
    recomputed as if they were prompt.
    """

    __slots__ = (
        "request_id", "token_ids", "num_prompt_tokens", "sampling", "status", "block_table",
        "num_computed_tokens", "num_cached_tokens", "arrival_time", "first_scheduled_time",
        "first_token_time", "last_token_time", "finish_time", "finish_reason", "error_type",
        "error_message", "generator", "detokenizer", "output_text", "num_emitted_chars",
        "num_preemptions", "fail_on_first_step", "num_hashed_blocks",
    )

    def __init__(
        self, request_id: str, prompt_token_ids: list[int], sampling: SamplingParams,
        arrival_time: float,
    ) -> None:
        self.request_id = request_id
        self.token_ids: list[int] = list(prompt_token_ids)
        self.num_prompt_tokens = len(prompt_token_ids)
        self.sampling = sampling
        self.status = SequenceStatus.WAITING
        self.block_table: list[int] = []
        self.num_computed_tokens = 0
        self.num_cached_tokens = 0
        self.arrival_time = arrival_time
        self.first_scheduled_time: float | None = None
        self.first_token_time: float | None = None
        self.last_token_time: float | None = None
        self.finish_time: float | None = None
        self.finish_reason: FinishReason | None = None
        self.error_type: str | None = None
        self.error_message: str | None = None
        self.generator: torch.Generator | None = None
        self.detokenizer: IncrementalDetokenizer | None = None
        self.output_text = ""
        self.num_emitted_chars = 0
        self.num_preemptions = 0
        self.fail_on_first_step = False
        self.num_hashed_blocks = 0   # leading blocks already registered in the prefix cache

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self.token_ids) - self.num_prompt_tokens

    @property
    def output_token_ids(self) -> list[int]:
        return self.token_ids[self.num_prompt_tokens:]

    @property
    def num_uncomputed_tokens(self) -> int:
        return len(self.token_ids) - self.num_computed_tokens

    @property
    def is_finished(self) -> bool:
        return self.status is SequenceStatus.FINISHED

    def __repr__(self) -> str:
        return (f"Sequence({self.request_id!r}, tokens={self.num_tokens}, "
                f"computed={self.num_computed_tokens}, status={self.status.name})")
