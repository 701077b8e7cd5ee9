"""The models the live Triton serves (issue 21), through nvidia-pytriton, which bundles a
Triton server: run by tests/live/triton_server.py with the Python of the Triton venv
(`make live-engines`), never imported by the test suite (numpy and pytriton live only there).

    python tests/live/triton_model.py HTTP_PORT GRPC_PORT METRICS_PORT WORKSPACE

Two models, no weights, no torch, deterministic:

* ``tiny_llm``: a decoupled (streaming) "LLM": ``prompt`` (BYTES) and ``max_tokens`` (INT64)
  in, one response per generated token out (``token_id``, ``text``), as Triton streams an LLM's
  tokens through ``/v2/models/tiny_llm/generate_stream``. A prompt starting with ``fail`` makes
  the model raise after the request was taken (the client gets the error as a streamed event).
* ``tiny_classifier``: a batched, non-streaming model (``prompt`` in, ``label`` out), called
  through ``/v2/models/tiny_classifier/infer``; it raises on a prompt starting with ``fail``
  too.
"""

from __future__ import annotations

import signal
import sys
import time
import zlib

import numpy as np
from pytriton.decorators import batch
from pytriton.model_config import ModelConfig, Tensor
from pytriton.triton import Triton, TritonConfig

VOCABULARY = 512
SECONDS_PER_TOKEN = 0.002  # a visible, small decode time


def _tokens(prompt: bytes, count: int) -> list[int]:
    """A deterministic token sequence seeded by the prompt (a stand-in for a language model)."""
    rng = np.random.default_rng(zlib.crc32(prompt))
    return [int(t) for t in rng.integers(0, VOCABULARY, size=count)]


def generate(requests: list[dict[str, np.ndarray]]):  # type: ignore[no-untyped-def]
    for request in requests:
        prompt = bytes(request["prompt"].reshape(-1)[0])
        if prompt.startswith(b"fail"):
            raise ValueError(f"tiny_llm refuses prompts starting with 'fail': {prompt!r}")
        for token in _tokens(prompt, int(request["max_tokens"].reshape(-1)[0])):
            time.sleep(SECONDS_PER_TOKEN)
            yield [{"token_id": np.array([token], dtype=np.int64),
                    "text": np.array([f"t{token} ".encode()], dtype=np.object_)}]


@batch
def classify(prompt: np.ndarray) -> dict[str, np.ndarray]:
    if any(bytes(p[0]).startswith(b"fail") for p in prompt):
        raise ValueError("tiny_classifier refuses prompts starting with 'fail'")
    labels = [zlib.crc32(bytes(p[0])) % 2 for p in prompt]
    return {"label": np.array(labels, dtype=np.int64).reshape(-1, 1)}


def _exit_cleanly(signum: int, _frame: object) -> None:
    # SIGTERM ends serve() by an exception, so the with-block stops Triton and its stubs and
    # pytriton frees its shared-memory regions (/dev/shm/pytrtion<pid>-*); killed outright, it
    # leaves them behind.
    raise SystemExit(128 + signum)


def main(argv: list[str]) -> None:
    signal.signal(signal.SIGTERM, _exit_cleanly)
    http_port, grpc_port, metrics_port = (int(a) for a in argv[:3])
    config = TritonConfig(
        http_address="127.0.0.1", http_port=http_port, grpc_address="127.0.0.1",
        grpc_port=grpc_port, metrics_address="127.0.0.1", metrics_port=metrics_port,
        allow_metrics=True, allow_gpu_metrics=False, allow_cpu_metrics=True,
        metrics_interval_ms=500, log_verbose=0)
    with Triton(config=config, workspace=argv[3]) as triton:
        triton.bind(
            "tiny_llm", generate,
            inputs=[Tensor(name="prompt", dtype=np.bytes_, shape=(1,)),
                    Tensor(name="max_tokens", dtype=np.int64, shape=(1,))],
            outputs=[Tensor(name="token_id", dtype=np.int64, shape=(1,)),
                     Tensor(name="text", dtype=np.bytes_, shape=(1,))],
            config=ModelConfig(batching=False, decoupled=True))
        triton.bind(
            "tiny_classifier", classify,
            inputs=[Tensor(name="prompt", dtype=np.bytes_, shape=(1,))],
            outputs=[Tensor(name="label", dtype=np.int64, shape=(1,))],
            config=ModelConfig(max_batch_size=8))
        triton.serve()


if __name__ == "__main__":
    main(sys.argv[1:])
