"""Decode step time of the reference engine against batch size and context length.

Explains the batching comparison: on a GPU a decode step costs about the same at batch 1 and
64 (reading the weights dominates); on a small CPU it grows with the batch, which bounds
what continuous batching can gain. Also times one batch of mixed contexts, which is what
grouping decodes by context length is for.

    python -m bench.step_time
    python -m bench.step_time --model small --batches 1,4,16 --contexts 128
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import time

import torch

from bench.cpu_meter import OtherCpuMeter
from reference_server.config import EngineConfig
from reference_server.engine import LLMEngine
from reference_server.sampling import SamplingParams
from reference_server.server import build_engine
from bench.workload import BOS


def decoding_engine(model: str, contexts: list[int], device: str) -> LLMEngine:
    """An engine whose every sequence has finished prefill and is decoding."""
    engine, _ = build_engine(EngineConfig(model=model, device=device, num_kv_blocks=8192,
                                          max_num_seqs=256, max_num_batched_tokens=8192))
    rng = random.Random(0)
    for i, n in enumerate(contexts):
        prompt = [BOS, *(rng.randrange(256) for _ in range(n - 1))]
        engine.add_request(f"r{i}", prompt, SamplingParams(max_tokens=64, ignore_eos=True))
    while any(s.num_output_tokens == 0 for s in engine.sequences.values()):
        engine.step()
    return engine


def median_step_ms(engine: LLMEngine, num_steps: int = 15) -> float:
    times = []
    for _ in range(num_steps):
        start = time.perf_counter()
        engine.step()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--model", default="tiny")
    p.add_argument("--device", default="cpu")
    p.add_argument("--batches", default="1,8,32,64")
    p.add_argument("--contexts", default="64,512")
    args = p.parse_args()
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, torch {torch.__version__} "
          f"({torch.get_num_threads()} threads); model {args.model} on {args.device}")
    meter = OtherCpuMeter()
    print(f"{'batch':>6} {'context':>8} {'ms/step':>9} {'tokens/s':>10}")
    for context in (int(c) for c in args.contexts.split(",")):
        for batch in (int(b) for b in args.batches.split(",")):
            ms = median_step_ms(decoding_engine(args.model, [context] * batch, args.device))
            print(f"{batch:>6} {context:>8} {ms:>9.2f} {batch / ms * 1000:>10.0f}", flush=True)
    mixed = [60, 90, 120, 150, 200, 250, 300, 350, 400, 500, 600, 800, 1000, 1200, 1400, 1500]
    ms = median_step_ms(decoding_engine(args.model, mixed, args.device))
    print(f"{len(mixed):>6} {'60..1500':>8} {ms:>9.2f} {len(mixed) / ms * 1000:>10.0f}"
          "   (mixed contexts)")
    print(f"others: {meter.cores() or 0:.2f} cores used by other processes meanwhile")


if __name__ == "__main__":
    main()
