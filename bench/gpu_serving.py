"""On a GPU: the reference server on CUDA under load; its /metrics GPU series (NVML through
exporters.gpu) read side by side with nvidia-smi; its token counter against the load generator.

    python -m bench.gpu_serving --model small --rate 16 --duration 30 --out bench/out/gpu_serving

Steps: start `inferwatch reference-server --device cuda` on a free port; read /metrics and
`nvidia-smi --query-gpu` once a second, idle and under a `inferwatch bench run` load; then
compare each pair of readings taken together (memory, utilization, power, temperature, SM
clock) and the engine's generation-token counter with the tokens the client received.

NVML and nvidia-smi sample at different moments, so utilization and power differ by what
changed between the two reads; memory, temperature and clock should agree to their rounding
(nvidia-smi prints MiB, whole degrees and MHz).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from exporters import schema
from exporters.sockets import free_port

# nvidia-smi field -> (our series, factor from nvidia-smi's unit to the series' base unit)
SMI_FIELDS: dict[str, tuple[str, float]] = {
    "memory.used": (schema.GPU_MEMORY_USED_BYTES, 2.0**20),
    "memory.total": (schema.GPU_MEMORY_TOTAL_BYTES, 2.0**20),
    "utilization.gpu": (schema.GPU_UTILIZATION_RATIO, 0.01),
    "utilization.memory": (schema.GPU_MEMORY_BANDWIDTH_UTILIZATION_RATIO, 0.01),
    "power.draw": (schema.GPU_POWER_WATTS, 1.0),
    "temperature.gpu": (schema.GPU_TEMPERATURE_CELSIUS, 1.0),
    "clocks.sm": (schema.GPU_SM_CLOCK_HERTZ, 1e6),
}


PROBE_TOKENS = 1


@dataclass
class Reading:
    at: float
    phase: str
    ours: dict[str, float]                      # series -> value, GPU 0
    smi: dict[str, float]                       # series -> nvidia-smi's value in base units
    generation_tokens: float | None = None
    kv_cache_bytes: float | None = None


@dataclass
class Sampler:
    url: str
    interval: float
    readings: list[Reading] = field(default_factory=list)
    phase: str = "idle"
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        with httpx.Client(timeout=5.0) as client:
            while not self._stop.is_set():
                try:
                    self.readings.append(read_pair(client, self.url, self.phase))
                except (httpx.HTTPError, subprocess.SubprocessError, ValueError) as exc:
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()


def parse_page(text: str) -> tuple[dict[str, float], float | None, float | None]:
    ours: dict[str, float] = {}
    tokens = kv = None
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels.get("gpu") == "0" and sample.name.startswith("gpu_"):
                if sample.name == schema.GPU_MEMORY_KV_CACHE_BYTES:
                    kv = sample.value
                else:
                    ours[sample.name] = sample.value
            elif sample.name == schema.GENERATION_TOKENS + "_total":
                tokens = (tokens or 0.0) + sample.value
    return ours, tokens, kv


def nvidia_smi() -> dict[str, float]:
    """GPU 0's fields in base units; empty where there is no nvidia-smi (a CPU dry run)."""
    if shutil.which("nvidia-smi") is None:
        return {}
    out = subprocess.run(
        ["nvidia-smi", "--id=0", "--query-gpu=" + ",".join(SMI_FIELDS),
         "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=10,
        check=True).stdout.strip()
    values = [v.strip() for v in out.split(",")]
    if len(values) != len(SMI_FIELDS):
        raise ValueError(f"nvidia-smi printed {out!r}, expected {len(SMI_FIELDS)} fields")
    return {series: float(v) * factor for (series, factor), v in zip(SMI_FIELDS.values(), values)
            if v not in ("[N/A]", "[Not Supported]")}


def read_pair(client: httpx.Client, url: str, phase: str) -> Reading:
    at = time.time()
    page = client.get(url + "/metrics")
    page.raise_for_status()
    smi = nvidia_smi()
    ours, tokens, kv = parse_page(page.text)
    return Reading(at, phase, ours, smi, tokens, kv)


def wait_ready(url: str, process: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the reference server exited with {process.returncode}")
        try:
            if httpx.get(url + "/health", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"the reference server was not ready within {timeout:.0f} s")


def compare(readings: list[Reading]) -> dict[str, dict[str, float]]:
    """Per series: the mean of each side, and the mean and largest |ours - nvidia-smi|."""
    out: dict[str, dict[str, float]] = {}
    for series, _ in SMI_FIELDS.values():
        pairs = [(r.ours[series], r.smi[series]) for r in readings
                 if series in r.ours and series in r.smi]
        if not pairs:
            out[series] = {"pairs": 0}
            continue
        diffs = [abs(a - b) for a, b in pairs]
        out[series] = {"pairs": len(pairs), "ours_mean": statistics.fmean(a for a, _ in pairs),
                       "smi_mean": statistics.fmean(b for _, b in pairs),
                       "abs_diff_mean": statistics.fmean(diffs), "abs_diff_max": max(diffs)}
    return out


def client_tokens(records: Path) -> int:
    total = 0
    for line in records.read_text(encoding="utf-8").splitlines():
        total += int(json.loads(line).get("output_tokens") or 0)
    return total


def run(args: argparse.Namespace) -> dict[str, Any]:
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (out / "server.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "monitor.cli", "reference-server", "--device", args.device,
         "--dtype", args.dtype, "--model", args.model, "--port", str(port),
         "--max-num-seqs", str(args.max_num_seqs)], stdout=log, stderr=subprocess.STDOUT)
    sampler = Sampler(url, args.interval)
    thread = threading.Thread(target=sampler.run, daemon=True)
    try:
        wait_ready(url, server, args.ready_timeout)
        thread.start()
        time.sleep(args.idle)
        sampler.phase = "load"
        load_dir = out / "load"
        load = subprocess.run(
            [sys.executable, "-m", "monitor.cli", "bench", "run", "--url", url, "--model",
             args.model, "--rate", str(args.rate), "--duration", str(args.duration),
             "--input-len", args.input_len, "--output-len", args.output_len,
             "--output-dir", str(load_dir), "--no-progress"],
            capture_output=True, text=True, timeout=args.duration + 300)
        sampler.phase = "after"
        time.sleep(max(2 * args.interval, 1.0))
    finally:
        sampler.stop()
        if thread.is_alive():
            thread.join(10)
        server.terminate()
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
    print(load.stdout[-3000:], load.stderr[-2000:], sep="\n")
    if load.returncode != 0:
        raise RuntimeError(f"the load generator exited with {load.returncode}")
    summary = json.loads((load_dir / "summary.json").read_text(encoding="utf-8"))
    counted = [r.generation_tokens for r in sampler.readings if r.generation_tokens is not None]
    engine_tokens = (counted[-1] - counted[0]) if counted else None
    readings = sampler.readings
    result = {
        "model": args.model, "dtype": args.dtype, "rate": args.rate,
        "duration": args.duration, "load_summary": summary,
        "engine_generation_tokens": engine_tokens,
        # `bench run` first checks the endpoint with one one-token request, not in its records.
        "client_output_tokens": client_tokens(load_dir / "requests.jsonl") + PROBE_TOKENS,
        "kv_cache_bytes": next((r.kv_cache_bytes for r in readings if r.kv_cache_bytes), None),
        "compare_idle": compare([r for r in readings if r.phase == "idle"]),
        "compare_load": compare([r for r in readings if r.phase == "load"]),
        "samples": len(readings), "sampler_errors": sampler.errors[:10],
    }
    (out / "gpu_serving.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


def report(result: dict[str, Any]) -> None:
    print(f"model {result['model']} {result['dtype']}, {result['rate']} req/s for "
          f"{result['duration']} s; {result['samples']} paired readings; "
          f"sampler errors: {result['sampler_errors'] or 'none'}")
    print(f"tokens: engine counter +{result['engine_generation_tokens']}, client received "
          f"{result['client_output_tokens']} (with the 1-token endpoint probe)")
    print(f"KV cache bytes on GPU 0: {result['kv_cache_bytes']}")
    for phase in ("compare_idle", "compare_load"):
        print(f"{phase}: series, ours mean, nvidia-smi mean, |diff| mean, |diff| max")
        for series, row in result[phase].items():
            if row.get("pairs"):
                print(f"  {series:42s} {row['ours_mean']:14.4g} {row['smi_mean']:14.4g} "
                      f"{row['abs_diff_mean']:12.4g} {row['abs_diff_max']:12.4g}")
            else:
                print(f"  {series:42s} no pairs")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="small")
    p.add_argument("--device", default="cuda", help="cpu for a dry run of the script")
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    p.add_argument("--rate", type=float, default=16.0)
    p.add_argument("--duration", type=float, default=30.0)
    p.add_argument("--input-len", default="lognormal:256,0.6")
    p.add_argument("--output-len", default="lognormal:128,0.6")
    p.add_argument("--max-num-seqs", type=int, default=64)
    p.add_argument("--interval", type=float, default=1.0, help="seconds between readings")
    p.add_argument("--idle", type=float, default=5.0, help="seconds read before the load")
    p.add_argument("--ready-timeout", type=float, default=180.0)
    p.add_argument("--out", type=Path, default=Path("bench/out/gpu_serving"))
    result = run(p.parse_args())
    report(result)


if __name__ == "__main__":
    main()
