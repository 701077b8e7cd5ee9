"""Where a GPU is available: decode tokens/s at batch 1 against the memory-bandwidth bound
(weight bytes / HBM bandwidth), as a fraction.

At batch 1 every decode step reads all the weights plus the request's KV cache and does
little arithmetic per byte, so bytes per step / memory bandwidth bounds tokens/s from above.
One request (a short prompt, ignore_eos) runs through the engine's own step loop; after the
prefill step, --num-tokens decode steps are timed.

Bandwidth: on CUDA the peak HBM figure from --bandwidth-gbs, else from a small table keyed by
the device name; on CPU --bandwidth-gbs, else a STREAM-like copy measured here (bytes read +
bytes written per second of a large tensor copy).

    python -m bench.decode_bandwidth                          # cuda if present: small, bf16
    python -m bench.decode_bandwidth --device cpu --model tiny --num-tokens 64
    python -m bench.decode_bandwidth --bandwidth-gbs 3350 --json bench/out/decode_bw.json
    python -m bench.decode_bandwidth --model llama-8b-shape   # a real model's size, on a GPU

Besides the server's built-in models, --model takes the layer shapes of Llama 3.2 1B and
Llama 3.1 8B (``llama-1b-shape``, ``llama-8b-shape``) with random weights drawn on the device
itself (drawing 8B weights on the host would take minutes). They keep the byte-level
vocabulary of 264 tokens, so they lack the real models' 0.26-1.05B embedding and LM-head
parameters; the bound counts the weights actually built, so the fraction is self-consistent.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

import torch

from bench.cpu_meter import OtherCpuMeter

from reference_server.config import DTypeName, EngineConfig
from reference_server.engine import LLMEngine
from exporters.instrumentation import NullEngineMetrics
from reference_server.model import (
    BUILTIN_MODELS, LlamaForCausalLM, ModelConfig, count_parameters, weight_bytes,
)
from reference_server.sampling import SamplingParams
from reference_server.server import build_engine, resolve_device
from reference_server.tokenizer import ByteTokenizer

BOS = 256
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}

# Peak HBM bandwidth (vendor datasheets), matched against torch.cuda.get_device_name().
# Word boundaries keep L40 from matching L4 and GH200 from matching H200.
PEAK_HBM_GBS: tuple[tuple[str, str, float], ...] = (
    (r"\bH200\b", "H200", 4800.0),
    (r"\bH100\b.*\bPCIe\b", "H100 PCIe", 2000.0),
    (r"\bH100\b.*(SXM|HBM3)", "H100 SXM", 3350.0),
    (r"\bA100\b.*80\s*GB", "A100 80GB", 2039.0),
    (r"\bA100\b", "A100 40GB", 1555.0),
    (r"\bL4\b", "L4", 300.0),
)


# --------------------------------------------------------------------------------------------
# Device and bandwidth
# --------------------------------------------------------------------------------------------

def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            model = next((line.split(":", 1)[1].strip() for line in f
                          if line.startswith("model name")), model)
    except OSError:
        pass
    return f"{model} ({len(os.sched_getaffinity(0))} cores, {torch.get_num_threads()} threads)"


def table_bandwidth_gbs(name: str) -> tuple[float, str] | None:
    """(peak GB/s, table entry) for a known GPU name, else None."""
    for pattern, label, gbs in PEAK_HBM_GBS:
        if re.search(pattern, name, flags=re.IGNORECASE):
            return gbs, label
    return None


def copy_bandwidth_gbs(device: torch.device, mib: int, repeats: int = 5) -> float:
    """STREAM-like copy: best of `repeats` copies of a `mib` MiB float32 tensor; counts the
    bytes read and the bytes written (STREAM's convention)."""
    numel = mib * 2**20 // 4
    src = torch.ones(numel, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)  # fault in the pages before timing
    best = math.inf
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        dst.copy_(src)
        synchronize(device)
        best = min(best, time.perf_counter() - start)
    del src, dst
    return 2 * numel * 4 / best / 1e9


def resolve_bandwidth(device: torch.device, name: str, flag_gbs: float | None,
                      stream_mib: int) -> tuple[float, str]:
    """(GB/s, where it came from)."""
    if flag_gbs is not None:
        return flag_gbs, "--bandwidth-gbs"
    if device.type == "cuda":
        found = table_bandwidth_gbs(name)
        if found is None:
            raise SystemExit(f"no peak HBM bandwidth on file for {name!r}: pass "
                             "--bandwidth-gbs (the datasheet figure)")
        gbs, label = found
        return gbs, f"peak HBM from the table entry {label!r} (device name {name!r})"
    gbs = copy_bandwidth_gbs(device, stream_mib)
    return gbs, (f"measured here: STREAM-like copy of a {stream_mib} MiB float32 tensor, "
                 "(read + written bytes) / best time; no --bandwidth-gbs given")


# --------------------------------------------------------------------------------------------
# Decode
# --------------------------------------------------------------------------------------------

@dataclass(slots=True)
class DecodeTiming:
    num_tokens: int            # tokens produced by the timed decode steps
    seconds: float
    step_seconds: list[float]
    other_cpu_cores: float | None   # host cores other processes kept busy meanwhile

    @property
    def tokens_per_s(self) -> float:
        return self.num_tokens / self.seconds


def _shape(hidden: int, intermediate: int, layers: int, heads: int, kv_heads: int,
           ) -> ModelConfig:
    base = BUILTIN_MODELS["small"]  # the byte-level vocabulary and its special tokens
    return ModelConfig(vocab_size=base.vocab_size, hidden_size=hidden,
                       intermediate_size=intermediate, num_hidden_layers=layers,
                       num_attention_heads=heads, num_key_value_heads=kv_heads,
                       max_position_embeddings=8192, rope_theta=500000.0,
                       bos_token_id=base.bos_token_id, eos_token_ids=base.eos_token_ids)


# Layer shapes of real models (their config.json), for a decode step that reads as many bytes.
SHAPES: dict[str, ModelConfig] = {
    "llama-1b-shape": _shape(hidden=2048, intermediate=8192, layers=16, heads=32, kv_heads=8),
    "llama-8b-shape": _shape(hidden=4096, intermediate=14336, layers=32, heads=32, kv_heads=8),
}


def random_model_on_device(config: ModelConfig, device: str, dtype: torch.dtype, seed: int,
                           ) -> LlamaForCausalLM:
    """N(0, 0.02) weights and unit norms drawn on the device (not the host's generator, so
    not the same numbers as a built-in model of that seed: only the timing matters here)."""
    with torch.device(resolve_device(device)):
        model = LlamaForCausalLM(config)
    generator = torch.Generator(device=resolve_device(device)).manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.fill_(1.0)
            else:
                param.normal_(0.0, 0.02, generator=generator)
    return model.to(dtype=dtype).eval()


def build(model: str, device: str, dtype: DTypeName, seed: int, num_kv_blocks: int,
          ) -> LLMEngine:
    config = EngineConfig(model=model, device=device, dtype=dtype, seed=seed, max_num_seqs=1,
                          num_kv_blocks=num_kv_blocks, enable_prefix_caching=False)
    if model not in SHAPES:
        engine, _ = build_engine(config)
        return engine
    built = random_model_on_device(SHAPES[model], device, _DTYPES[dtype], seed)
    return LLMEngine(config, built, ByteTokenizer(), NullEngineMetrics())


def make_prompt(length: int, seed: int) -> list[int]:
    gen = torch.Generator().manual_seed(seed)
    return [BOS, *torch.randint(0, 256, (length - 1,), generator=gen).tolist()]


def time_decode(engine: LLMEngine, prompt: list[int], num_tokens: int, tag: str) -> DecodeTiming:
    """One request at batch 1: the prefill step (untimed), then num_tokens timed decode
    steps. Sampling calls .tolist(), which syncs every step; we sync at both ends anyway."""
    engine.add_request(tag, prompt, SamplingParams(max_tokens=num_tokens + 1, temperature=0.0,
                                                   ignore_eos=True))
    produced = sum(len(out.token_ids) for out in engine.step())
    if produced != 1:
        raise RuntimeError(f"the prefill step produced {produced} tokens, expected 1 (does the "
                           "prompt fit in one step?)")
    device = engine.runner.device
    steps: list[float] = []
    produced = 0
    synchronize(device)
    meter = OtherCpuMeter()
    start = time.perf_counter()
    while engine.has_unfinished_requests():
        t0 = time.perf_counter()
        outputs = engine.step()
        steps.append(time.perf_counter() - t0)
        for out in outputs:
            if out.finished and out.finish_reason != "length":
                raise RuntimeError(f"request finished with {out.finish_reason}: "
                                   f"{out.error_message}")
            produced += len(out.token_ids)
    synchronize(device)
    seconds = time.perf_counter() - start
    if produced != num_tokens:
        raise RuntimeError(f"{produced} decode tokens, expected {num_tokens}")
    return DecodeTiming(produced, seconds, steps, meter.cores())


def profile_decode(engine: LLMEngine, prompt: list[int], num_tokens: int) -> None:
    """Where a decode step's time goes: the operators by host time, then by device time."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if engine.runner.device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        time_decode(engine, prompt, num_tokens, "profiled")
    averages = prof.key_averages()
    print(f"profile of {num_tokens} decode steps, by host time (self):")
    print(averages.table(sort_by="self_cpu_time_total", row_limit=15, max_name_column_width=50))
    if engine.runner.device.type == "cuda":
        print("by device time (self):")
        print(averages.table(sort_by="self_cuda_time_total", row_limit=12,
                             max_name_column_width=50))


def kv_bytes_per_token(config: ModelConfig, dtype: torch.dtype) -> int:
    """K and V of one token across all layers."""
    element = torch.empty((), dtype=dtype).element_size()
    return (2 * config.num_hidden_layers * config.num_key_value_heads
            * config.resolved_head_dim * element)


def mean_context(prompt_len: int, num_tokens: int) -> float:
    """Decode step k (1..n) attends over prompt_len + k tokens; their mean."""
    return prompt_len + (num_tokens + 1) / 2


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------

def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default=default_device(), help="cuda if available, else cpu")
    p.add_argument("--model", default="small", help="built-in name, HF checkpoint dir, or "
                   + " | ".join(SHAPES))
    p.add_argument("--dtype", default=None, choices=sorted(_DTYPES),
                   help="default: bfloat16 on cuda, float32 on cpu")
    p.add_argument("--num-tokens", type=int, default=256, help="timed decode steps")
    p.add_argument("--prompt-len", type=int, default=16)
    p.add_argument("--warmup-tokens", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3,
                   help="timed requests, one after another; the median one is reported")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--bandwidth-gbs", type=float, default=None,
                   help="memory bandwidth in GB/s (1e9 B/s); overrides the table/measurement")
    p.add_argument("--stream-mib", type=int, default=256,
                   help="size of each tensor of the copy-bandwidth measurement")
    p.add_argument("--json", type=Path, default=None, help="also write the results here")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="then profile N decode steps (torch.profiler) and print where the "
                   "host and the device spend a step")
    args = p.parse_args()
    if args.dtype is None:
        args.dtype = "bfloat16" if torch.device(args.device).type == "cuda" else "float32"
    if min(args.num_tokens, args.prompt_len, args.warmup_tokens, args.repeats) < 1:
        p.error("--num-tokens, --prompt-len, --warmup-tokens and --repeats must be >= 1")
    return args


def main() -> None:
    args = parse_args()
    block_size = EngineConfig().block_size
    # Room for one request at a time, plus the scheduler's watermark block.
    needed = -(-(args.prompt_len + max(args.num_tokens, args.warmup_tokens) + 1) // block_size)
    engine = build(args.model, args.device, cast(DTypeName, args.dtype), args.seed, needed + 2)
    model = engine.runner.model
    device, dtype = engine.runner.device, engine.runner.dtype
    name = device_name(device)
    print(f"device: {name} [{device}], dtype {args.dtype}, torch {torch.__version__}")

    weights = weight_bytes(model)
    kv_token = kv_bytes_per_token(model.config, dtype)
    context = mean_context(args.prompt_len, args.num_tokens)
    bytes_per_step = weights + kv_token * context
    print(f"model {args.model}: {count_parameters(model) / 1e6:.1f}M params, weight bytes "
          f"{weights / 1e6:.2f} MB; KV {kv_token} B/token x mean context {context:.1f} tokens "
          f"= {kv_token * context / 1e6:.3f} MB; bytes read per decode step ~ "
          f"{bytes_per_step / 1e6:.2f} MB")

    gbs, source = resolve_bandwidth(device, name, args.bandwidth_gbs, args.stream_mib)
    print(f"bandwidth: {gbs:.1f} GB/s ({source})")
    copy_gbs = copy_bandwidth_gbs(device, 1024) if device.type == "cuda" else None
    if copy_gbs is not None:
        print(f"  for reference, a device-to-device copy here reaches {copy_gbs:.0f} GB/s "
              f"({copy_gbs / gbs:.0%} of that peak)")

    time_decode(engine, make_prompt(args.prompt_len, args.seed + 1000), args.warmup_tokens,
                "warmup")
    runs = [time_decode(engine, make_prompt(args.prompt_len, args.seed + i), args.num_tokens,
                        f"measured-{i}") for i in range(args.repeats)]
    timing = sorted(runs, key=lambda r: r.tokens_per_s)[(len(runs) - 1) // 2]  # the median run
    bound = gbs * 1e9 / bytes_per_step
    fraction = timing.tokens_per_s / bound
    median_ms = statistics.median(timing.step_seconds) * 1e3
    print(f"decode at batch 1 (median of {len(runs)} requests, all: "
          + ", ".join(f"{r.tokens_per_s:.1f}" for r in runs) + " tokens/s)")
    print(f"  {timing.num_tokens} tokens in {timing.seconds:.3f} s = "
          f"{timing.tokens_per_s:.1f} tokens/s (median step {median_ms:.3f} ms, bound step "
          f"{1e3 / bound:.3f} ms); effective {bytes_per_step * timing.tokens_per_s / 1e9:.1f} "
          "GB/s")
    if timing.other_cpu_cores is not None:
        busy = timing.other_cpu_cores
        print(f"  other processes kept {busy:.2f} host cores busy meanwhile"
              + (": the timing is not clean" if busy > 0.2 else ""))
    print(f"bandwidth bound: {gbs:.1f} GB/s / {bytes_per_step / 1e6:.2f} MB per token = "
          f"{bound:.1f} tokens/s")
    print(f"fraction of bound: {fraction:.4f} ({fraction:.1%})")
    if fraction > 1 and device.type == "cpu":
        print("  (above 1: the weights fit in a CPU cache, so decode is not reading them from "
              "DRAM; the DRAM bound does not apply)")

    if args.profile:
        profile_decode(engine, make_prompt(args.prompt_len, args.seed + 2000), args.profile)

    if args.json:
        payload: dict[str, Any] = {
            "device": name, "device_type": device.type, "dtype": args.dtype,
            "model": args.model, "params": count_parameters(model), "weight_bytes": weights,
            "kv_bytes_per_token": kv_token, "prompt_len": args.prompt_len,
            "mean_context": context, "bytes_per_step": bytes_per_step,
            "bandwidth_gbs": gbs, "bandwidth_source": source, "copy_bandwidth_gbs": copy_gbs,
            "decode": {**asdict(timing), "tokens_per_s": timing.tokens_per_s,
                       "median_step_ms": median_ms},
            "all_tokens_per_s": [r.tokens_per_s for r in runs],
            "bound_tokens_per_s": bound, "fraction_of_bound": fraction,
            "torch": torch.__version__,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
