from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from prometheus_client import CollectorRegistry

from reference_server.config import EngineConfig
from reference_server.engine import LLMEngine
from reference_server.server import build_engine


@dataclass
class Result:
    token_ids: list[int] = field(default_factory=list)
    text: str = ""
    finish_reason: str | None = None
    error_type: str | None = None
    num_cached_tokens: int = 0


def drain(engine: LLMEngine, max_steps: int = 100_000) -> dict[str, Result]:
    """Step the engine until idle; collect each request's outputs."""
    results: dict[str, Result] = {}
    for _ in range(max_steps):
        if not engine.has_unfinished_requests():
            return results
        for out in engine.step():
            r = results.setdefault(out.request_id, Result())
            r.token_ids += out.token_ids
            r.text += out.text
            if out.finished:
                r.finish_reason, r.error_type = out.finish_reason, out.error_type
                r.num_cached_tokens = out.num_cached_tokens
    raise AssertionError("engine did not go idle")


MakeEngine = Callable[..., tuple[LLMEngine, CollectorRegistry]]


@pytest.fixture
def make_engine() -> MakeEngine:
    def make(**overrides: object) -> tuple[LLMEngine, CollectorRegistry]:
        # A small KV pool keeps engine construction fast; tests that need more say so.
        settings: dict[str, object] = {"num_kv_blocks": 256, **overrides}
        return build_engine(EngineConfig(**settings))  # type: ignore[arg-type]
    return make
