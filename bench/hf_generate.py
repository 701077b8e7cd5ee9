"""Against Hugging Face generate() serving the same requests one by one and in static batches,
with the same weights: tokens/s ratio.

The built-in model's seeded random weights are saved as a HF checkpoint and loaded into
transformers' LlamaForCausalLM (fp32, eval, same process, so the same torch threads). One
offline workload (all requests known at t=0, greedy, output lengths forced) is then served:

  1. HF generate(), one request at a time (batch 1, KV cache on);
  2. HF generate(), static batches of --hf-batch-size in arrival order, left padded, each
     batch running to its longest member;
  3. this engine (continuous batching), every request added at t=0.

Only useful output tokens count: each request's own requested length, even when its HF batch
ran longer. Wall-clock seconds per run, after a short warm-up of each path; the three runs
are repeated in turn (--repeats, default 3) and each one's median is reported, so that a
burst of load from elsewhere does not land on one run only.

    python -m bench.hf_generate                          # the recorded run (tiny, 64 requests)
    python -m bench.hf_generate --num-requests 16        # quicker
    python -m bench.hf_generate --model small --json bench/out/hf_generate.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

import transformers

from bench.cpu_meter import OtherCpuMeter
from bench.workload import BOS, lognormal_lengths

from reference_server.config import EngineConfig
from reference_server.engine import LLMEngine
from reference_server.model import BUILTIN_MODELS, count_parameters
from reference_server.sampling import SamplingParams
from reference_server.server import build_engine
from reference_server.weights import save_hf_checkpoint

# transformers' own annotations do not type-check under mypy --strict (generate() is declared
# on a mixin self-type); the HF model is passed around untyped.
HFModel = Any

PAD = 258


# --------------------------------------------------------------------------------------------
# Workload
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Request:
    prompt: list[int]     # BOS + random bytes
    output_len: int       # exactly this many tokens are generated (no early stop)


def make_workload(n: int, seed: int, prompt_mean: float = 128, output_mean: float = 64,
                  sigma: float = 0.6, max_prompt: int = 512, max_output: int = 256,
                  ) -> list[Request]:
    rng = np.random.default_rng(seed)
    prompt_lens = lognormal_lengths(rng, n, prompt_mean, sigma, 4, max_prompt).tolist()
    output_lens = lognormal_lengths(rng, n, output_mean, sigma, 4, max_output).tolist()
    return [Request([BOS, *rng.integers(0, 256, p - 1).tolist()], o)
            for p, o in zip(prompt_lens, output_lens, strict=True)]


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------

@dataclass(slots=True)
class RunResult:
    name: str
    seconds: float
    useful_tokens: int       # sum of each request's requested output length
    generated_tokens: int    # what the run computed, padding rows of a static batch included
    other_cpu_cores: float | None = None   # cores other processes kept busy meanwhile
    all_seconds: list[float] = field(default_factory=list)   # every repeat, when merged

    @property
    def tokens_per_s(self) -> float:
        return self.useful_tokens / self.seconds


def merge_repeats(runs: list[RunResult]) -> RunResult:
    """One result for repeats of the same run: the median wall time, the busiest neighbour."""
    others = [r.other_cpu_cores for r in runs if r.other_cpu_cores is not None]
    first = runs[0]
    return RunResult(first.name, statistics.median(r.seconds for r in runs),
                     first.useful_tokens, first.generated_tokens,
                     max(others) if others else None, [r.seconds for r in runs])


# --------------------------------------------------------------------------------------------
# Our engine
# --------------------------------------------------------------------------------------------

def kv_blocks_needed(requests: list[Request], block_size: int) -> int:
    """Enough KV blocks that no request waits for memory or is preempted (HF's cache has no
    limit either), plus room for the scheduler's 1% watermark."""
    needed = sum(-(-(len(r.prompt) + r.output_len) // block_size) for r in requests)
    return int(needed * 1.05) + 64


def build_our_engine(model: str, seed: int, max_num_seqs: int, max_num_batched_tokens: int,
                     num_kv_blocks: int) -> LLMEngine:
    """Prefix caching off: repeats send the same prompts again (HF has no such cache, and
    the random prompts share nothing across requests anyway)."""
    engine, _ = build_engine(EngineConfig(
        model=model, seed=seed, max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens, num_kv_blocks=num_kv_blocks,
        enable_prefix_caching=False))
    return engine


def engine_generate(engine: LLMEngine, requests: list[Request], tag: str) -> list[list[int]]:
    """Adds every request at once, steps to completion; the output token ids, in order."""
    ids = [f"{tag}-{i}" for i in range(len(requests))]
    for rid, req in zip(ids, requests, strict=True):
        engine.add_request(rid, req.prompt, SamplingParams(
            max_tokens=req.output_len, temperature=0.0, ignore_eos=True))
    outputs: dict[str, list[int]] = {rid: [] for rid in ids}
    while engine.has_unfinished_requests():
        for out in engine.step():
            outputs[out.request_id].extend(out.token_ids)
            if out.finished and out.finish_reason != "length":
                raise RuntimeError(f"{out.request_id} finished with {out.finish_reason}: "
                                   f"{out.error_message}")
    return [outputs[rid] for rid in ids]


def run_engine(engine: LLMEngine, requests: list[Request]) -> tuple[RunResult, list[list[int]]]:
    meter = OtherCpuMeter()
    start = time.perf_counter()
    tokens = engine_generate(engine, requests, "run")
    seconds = time.perf_counter() - start
    _check_lengths("engine", tokens, requests)
    useful = sum(r.output_len for r in requests)
    return RunResult("engine (continuous batching)", seconds, useful, useful,
                     meter.cores()), tokens


# --------------------------------------------------------------------------------------------
# Hugging Face
# --------------------------------------------------------------------------------------------

def load_hf_copy(engine: LLMEngine, directory: Path) -> HFModel:
    """The engine's weights, saved as a HF checkpoint and loaded by transformers in fp32."""
    save_hf_checkpoint(engine.runner.model, directory)
    hf: HFModel = transformers.LlamaForCausalLM.from_pretrained(directory, dtype=torch.float32)
    hf.generation_config.eos_token_id = None   # nothing may stop a request early
    hf.generation_config.pad_token_id = PAD
    return hf.eval()


def hf_generate(hf: HFModel, prompts: list[list[int]],
                max_new_tokens: int) -> list[list[int]]:
    """Greedy generate() for a left-padded batch, exactly max_new_tokens new tokens each."""
    width = max(len(p) for p in prompts)
    input_ids = torch.tensor([[PAD] * (width - len(p)) + p for p in prompts])
    attention_mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    config = transformers.GenerationConfig(  # type: ignore[no-untyped-call]
        do_sample=False, max_new_tokens=max_new_tokens, min_new_tokens=max_new_tokens,
        eos_token_id=None, pad_token_id=PAD, bos_token_id=BOS, use_cache=True)
    with torch.inference_mode():
        out = hf.generate(input_ids=input_ids, attention_mask=attention_mask,
                          generation_config=config)
    new = out[:, width:]
    if new.shape[1] != max_new_tokens:
        raise RuntimeError(f"HF generate stopped after {new.shape[1]} of {max_new_tokens} "
                           "tokens")
    return [row.tolist() for row in new]


def run_hf_one_by_one(hf: HFModel, requests: list[Request],
                      ) -> tuple[RunResult, list[list[int]]]:
    meter = OtherCpuMeter()
    start = time.perf_counter()
    tokens = [hf_generate(hf, [r.prompt], r.output_len)[0] for r in requests]
    seconds = time.perf_counter() - start
    useful = sum(r.output_len for r in requests)
    return RunResult("HF generate, one by one", seconds, useful, useful, meter.cores()), tokens


def run_hf_static(hf: HFModel, requests: list[Request],
                  batch_size: int) -> tuple[RunResult, list[list[int]]]:
    batches = [requests[i:i + batch_size] for i in range(0, len(requests), batch_size)]
    tokens: list[list[int]] = []
    generated = 0
    meter = OtherCpuMeter()
    start = time.perf_counter()
    for batch in batches:
        longest = max(r.output_len for r in batch)
        rows = hf_generate(hf, [r.prompt for r in batch], longest)
        tokens += [row[:r.output_len] for row, r in zip(rows, batch, strict=True)]
        generated += longest * len(batch)
    seconds = time.perf_counter() - start
    useful = sum(r.output_len for r in requests)
    return RunResult(f"HF generate, static batches of {batch_size}", seconds, useful,
                     generated, meter.cores()), tokens


# --------------------------------------------------------------------------------------------
# Checks and warm-up
# --------------------------------------------------------------------------------------------

def _check_lengths(name: str, tokens: list[list[int]], requests: list[Request]) -> None:
    for i, (toks, req) in enumerate(zip(tokens, requests, strict=True)):
        if len(toks) != req.output_len:
            raise RuntimeError(f"{name}: request {i} got {len(toks)} tokens, asked "
                               f"{req.output_len}")


def sanity_first_token(engine: LLMEngine, hf: HFModel,
                       prompt: list[int]) -> tuple[int, int]:
    """Greedy first token of one prompt from our engine and from HF (must agree)."""
    ours = engine_generate(engine, [Request(prompt, 1)], "sanity")[0][0]
    theirs = hf_generate(hf, [prompt], 1)[0][0]
    return ours, theirs


def warm_up(engine: LLMEngine, hf: HFModel, batch_size: int,
            seed: int) -> None:
    """A few short requests through each path (allocator, thread pool, lazy inits), with
    other random prompts than the measured ones."""
    warm = make_workload(max(4, batch_size), seed + 10_000, prompt_mean=48, output_mean=8)
    engine_generate(engine, warm, "warm")
    hf_generate(hf, [warm[0].prompt], 8)
    hf_generate(hf, [r.prompt for r in warm[:batch_size]], 8)


def agreement(a: list[list[int]], b: list[list[int]]) -> tuple[int, float]:
    """(requests with identical outputs, fraction of tokens equal up to the first mismatch)."""
    same = sum(x == y for x, y in zip(a, b, strict=True))
    prefix = 0
    for x, y in zip(a, b, strict=True):
        prefix += next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), len(x))
    return same, prefix / max(1, sum(len(x) for x in a))


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------

def machine_line() -> str:
    return (f"machine: {platform.machine()}, nproc {len(os.sched_getaffinity(0))}, "
            f"torch {torch.__version__} ({torch.get_num_threads()} threads), "
            f"transformers {transformers.__version__}, python {platform.python_version()}")


def print_table(results: list[RunResult], baseline: RunResult) -> None:
    print(f"{'run':<36} {'wall s':>8} {'useful tok':>10} {'computed':>9} {'tok/s':>9} "
          f"{'vs HF 1x1':>9} {'others':>7}")
    for r in results:
        others = "n/a" if r.other_cpu_cores is None else f"{r.other_cpu_cores:.2f}"
        print(f"{r.name:<36} {r.seconds:>8.2f} {r.useful_tokens:>10} {r.generated_tokens:>9} "
              f"{r.tokens_per_s:>9.1f} {r.tokens_per_s / baseline.tokens_per_s:>8.2f}x "
              f"{others:>7}")
    print("computed: output tokens generated, a static batch's padding rows included; "
          "others: CPU cores other processes kept busy during the run")
    busiest = max((r.other_cpu_cores or 0.0) for r in results)
    if busiest > 0.2:
        print(f"warning: other processes used up to {busiest:.2f} cores during a run; with "
              f"{len(os.sched_getaffinity(0))} cores these timings are not clean")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="tiny", choices=sorted(BUILTIN_MODELS))
    p.add_argument("--seed", type=int, default=0, help="seed of the weights and the workload")
    p.add_argument("--num-requests", type=int, default=64)
    p.add_argument("--prompt-mean", type=float, default=128)
    p.add_argument("--output-mean", type=float, default=64)
    p.add_argument("--sigma", type=float, default=0.6, help="lognormal sigma of both lengths")
    p.add_argument("--hf-batch-size", type=int, default=16)
    p.add_argument("--max-num-seqs", type=int, default=64)
    p.add_argument("--max-num-batched-tokens", type=int, default=2048)
    p.add_argument("--repeats", type=int, default=3,
                   help="times each run is repeated (interleaved); the median is reported")
    p.add_argument("--threads", type=int, default=None,
                   help="torch intra-op threads for both (default: torch's own)")
    p.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = p.parse_args()
    if min(args.num_requests, args.hf_batch_size, args.max_num_seqs, args.repeats) < 1:
        p.error("--num-requests, --hf-batch-size, --max-num-seqs and --repeats must be >= 1")
    return args


def main() -> None:
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    transformers.logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    transformers.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    print(machine_line())
    requests = make_workload(args.num_requests, args.seed, args.prompt_mean, args.output_mean,
                             args.sigma)
    prompt_lens = [len(r.prompt) for r in requests]
    output_lens = [r.output_len for r in requests]
    num_kv_blocks = kv_blocks_needed(requests, EngineConfig().block_size)
    engine = build_our_engine(args.model, args.seed, args.max_num_seqs,
                              args.max_num_batched_tokens, num_kv_blocks)
    print(f"model {args.model} ({count_parameters(engine.runner.model) / 1e6:.1f}M params, "
          f"fp32, seed {args.seed}); {args.num_requests} requests, prompt tokens mean "
          f"{np.mean(prompt_lens):.0f} [{min(prompt_lens)}, {max(prompt_lens)}], output tokens "
          f"mean {np.mean(output_lens):.0f} [{min(output_lens)}, {max(output_lens)}]; greedy, "
          f"output lengths forced; engine max_num_seqs {args.max_num_seqs}, "
          f"{num_kv_blocks} KV blocks, prefix caching off; median of {args.repeats} "
          "interleaved repeats")

    with tempfile.TemporaryDirectory() as tmp:
        hf = load_hf_copy(engine, Path(tmp))
    probe = make_workload(1, args.seed + 20_000, args.prompt_mean)[0].prompt  # not a measured one
    ours, theirs = sanity_first_token(engine, hf, probe)
    print(f"sanity: greedy first token of a {len(probe)}-token prompt: engine {ours}, HF {theirs} "
          f"({'match' if ours == theirs else 'MISMATCH'})")
    if ours != theirs:
        raise SystemExit("the engine and HF disagree on the first token: not the same model")

    warm_up(engine, hf, args.hf_batch_size, args.seed)
    repeats: list[list[RunResult]] = [[], [], []]
    for i in range(args.repeats):
        hf_one, hf_one_tokens = run_hf_one_by_one(hf, requests)
        hf_static, _ = run_hf_static(hf, requests, args.hf_batch_size)
        ours_run, ours_tokens = run_engine(engine, requests)
        for runs, r in zip(repeats, (hf_one, hf_static, ours_run), strict=True):
            runs.append(r)
        print(f"  repeat {i + 1}/{args.repeats}: " + ", ".join(
            f"{r.name} {r.seconds:.2f} s" for r in (hf_one, hf_static, ours_run)), flush=True)
    results = [merge_repeats(runs) for runs in repeats]
    hf_one, hf_static, ours_run = results
    print()
    print_table(results, hf_one)
    vs_static = ours_run.tokens_per_s / hf_static.tokens_per_s
    print(f"engine / HF static batches: {vs_static:.2f}x tokens/s")
    same, prefix = agreement(ours_tokens, hf_one_tokens)
    print(f"greedy outputs, engine vs HF one by one: {same}/{len(requests)} requests identical, "
          f"{prefix:.1%} of tokens before the first divergence (fp32 near-ties can flip an "
          "argmax on random weights)")
    if args.json:
        payload: dict[str, Any] = {
            "machine": machine_line(), "args": {k: str(v) if isinstance(v, Path) else v
                                                for k, v in vars(args).items()},
            "runs": [{**asdict(r), "tokens_per_s": r.tokens_per_s,
                      "ratio_vs_hf_one_by_one": r.tokens_per_s / hf_one.tokens_per_s}
                     for r in results],
            "engine_vs_hf_static": vs_static,
            "identical_requests": same, "agreeing_token_fraction": prefix,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
