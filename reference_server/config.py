"""The reference server's one typed configuration object, validated when built."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Literal

BatchingMode = Literal["continuous", "static"]
DTypeName = Literal["float32", "bfloat16", "float16"]


@dataclass(slots=True)
class EngineConfig:
    model: str = "tiny"                    # built-in (tiny, small) or a HF Llama checkpoint dir
    served_model_name: str | None = None   # name in the API; defaults to `model`
    device: str = "cpu"
    dtype: DTypeName = "float32"
    seed: int = 0                          # seed of the random weights of built-in models
    block_size: int = 16
    num_kv_blocks: int | None = None       # pool size; else derived from kv_cache_bytes
    kv_cache_bytes: int = 256 * 2**20
    max_model_len: int | None = None       # context limit; defaults to the model's
    max_num_seqs: int = 64
    max_num_batched_tokens: int = 2048
    enable_chunked_prefill: bool = True
    enable_prefix_caching: bool = True
    batching: BatchingMode = "continuous"
    static_batch_timeout_seconds: float = 0.05
    max_queue: int = 1024                  # waiting requests past which new ones get 429
    request_timeout_seconds: float = 600.0
    enable_fault_injection: bool = False
    admin_token: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    enable_metrics: bool = True
    num_threads: int | None = None         # torch intra-op threads on CPU

    def __post_init__(self) -> None:
        positive = {
            "block_size": self.block_size, "max_num_seqs": self.max_num_seqs,
            "max_num_batched_tokens": self.max_num_batched_tokens, "max_queue": self.max_queue,
            "kv_cache_bytes": self.kv_cache_bytes,
        }
        for name, value in positive.items():
            if value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        if self.num_kv_blocks is not None and self.num_kv_blocks < 1:
            raise ValueError(f"num_kv_blocks must be at least 1, got {self.num_kv_blocks}")
        if self.request_timeout_seconds <= 0 or self.static_batch_timeout_seconds < 0:
            raise ValueError("request_timeout_seconds must be > 0 and "
                             "static_batch_timeout_seconds >= 0")
        if self.batching not in ("continuous", "static"):
            raise ValueError(f"batching must be 'continuous' or 'static', got {self.batching!r}")
        if self.dtype not in ("float32", "bfloat16", "float16"):
            raise ValueError(f"dtype must be float32, bfloat16 or float16, got {self.dtype!r}")
        if self.max_model_len is not None and self.max_model_len < 2:
            raise ValueError(f"max_model_len must be at least 2, got {self.max_model_len}")
        if self.enable_fault_injection and len(self.admin_token) < 8:
            raise ValueError("admin_token must be at least 8 characters")
        if not self.enable_chunked_prefill and self.max_model_len is not None \
                and self.max_num_batched_tokens < self.max_model_len:
            raise ValueError("without chunked prefill, max_num_batched_tokens must be >= "
                             "max_model_len so that every prompt fits in one step")

    @property
    def model_name(self) -> str:
        return self.served_model_name or self.model
