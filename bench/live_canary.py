"""`inferwatch canary live` on live vLLM engines (issue 21): how often an A/A of two identical
engines passes and a `--max-num-seqs 1` canary fails, with vLLM's CPU Worker process and
without it, side by side in one run.

    python -m bench.live_canary --repetitions 3 --rates 3,4          # about 12 minutes

Each layout starts three eager `vllm serve` of the tiny model as the live tests do
(tests/live/vllm_server.py): a baseline, its twin and a one-sequence canary. Then, per
repetition and rate, it runs the test's load (tests/live/test_vllm_canary.py: 32 prompt and 64
output tokens, 30 s judged in 3-s intervals) for the A/A (baseline | twin) and the slow canary
(baseline | slow), one layout at a time, so the two layouts never share the machine.

The layouts: "worker" is vLLM's own (VLLM_ENABLE_V1_MULTIPROCESSING=1: the model in a Worker
process that busy-polls its shared-memory queue for 1 s after each step), "in-core" the tests'
(=0: the model inside the EngineCore process, nothing polls). Needs `make live-engines`.

Writes bench/out/live_canary.json (or --out) and prints one row per comparison and a summary
per layout: A/As passed, slow canaries failed, and the medians of the per-request TPOT ratio
twin/baseline (1 when the pair is equal).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, redirect_stdout
from io import StringIO
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
LAYOUTS = {"worker": "1", "in-core": "0"}


def judge_once(baseline_url: str, canary_url: str, rate: float, workdir: Path) -> dict[str, Any]:
    from monitor.cli import main
    from tests.live.test_vllm_canary import LOAD

    load = list(LOAD)
    load[load.index("--rate") + 1] = f"{rate:g}"
    with redirect_stdout(StringIO()):
        code = main(["canary", "live", "--baseline-url", baseline_url, "--canary-url",
                     canary_url, *load, "--output-dir", str(workdir)])
    judged = json.loads((workdir / "judgement.json").read_text())["judgement"]
    results = {m["name"]: m for m in judged["results"]}
    return {"exit": code, "outcome": judged["outcome"], "score": judged["score"],
            "flagged": sorted(n for n, m in results.items() if m["verdict"] != "pass"),
            **{f"{name}_{side}": results[name][f"median_{side}"]
               for name in ("ttft", "tpot", "ttft_p99") for side in ("baseline", "canary")}}


def run_layout(layout: str, rates: list[float], repetitions: int,
               workdir: Path) -> list[dict[str, Any]]:
    sys.path.insert(0, str(REPO))
    from tests.live.vllm_server import running_vllm

    env = {"VLLM_ENABLE_V1_MULTIPROCESSING": LAYOUTS[layout]}
    rows: list[dict[str, Any]] = []
    with ExitStack() as stack:
        print(f"[{layout}] starting three vllm serve...", file=sys.stderr)
        with ThreadPoolExecutor(3) as pool:
            futures = [pool.submit(stack.enter_context, running_vllm(*args, env=env))
                       for args in ((), (), ("--max-num-seqs", "1"))]
        baseline, twin, slow = (f.result() for f in futures)
        for repetition in range(repetitions):
            for rate in rates:
                for kind, canary in (("A/A", twin), ("slow", slow)):
                    out = workdir / f"{layout}-{repetition}-{rate:g}-{kind.replace('/', '')}"
                    row = {"layout": layout, "repetition": repetition, "rate": rate,
                           "kind": kind, **judge_once(baseline.url, canary.url, rate, out)}
                    rows.append(row)
                    print(f"[{layout}] {kind:4} {rate:g}/s: {row['outcome']:8} "
                          f"TPOT {row['tpot_baseline'] * 1e3:.2f} vs "
                          f"{row['tpot_canary'] * 1e3:.2f} ms, p99 TTFT "
                          f"{row['ttft_p99_baseline'] * 1e3:.0f} vs "
                          f"{row['ttft_p99_canary'] * 1e3:.0f} ms, flagged {row['flagged']}",
                          file=sys.stderr)
    return rows


def summary(rows: list[dict[str, Any]]) -> str:
    lines = ["| layout | A/A passed | slow canary failed | A/A TPOT twin/baseline, median "
             "[min, max] |", "| --- | --- | --- | --- |"]
    for layout in LAYOUTS:
        mine = [r for r in rows if r["layout"] == layout]
        if not mine:
            continue
        aa = [r for r in mine if r["kind"] == "A/A"]
        slow = [r for r in mine if r["kind"] == "slow"]
        ratio = [r["tpot_canary"] / r["tpot_baseline"] for r in aa]
        lines.append(f"| {layout} | {sum(r['outcome'] == 'pass' for r in aa)} of {len(aa)} "
                     f"| {sum(r['outcome'] == 'fail' for r in slow)} of {len(slow)} "
                     f"| {statistics.median(ratio):.2f} [{min(ratio):.2f}, {max(ratio):.2f}] |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--rates", default="3,4", help="req/s, comma-separated")
    parser.add_argument("--layouts", default="worker,in-core",
                        help=f"comma-separated, of {', '.join(LAYOUTS)}")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "live_canary.json")
    args = parser.parse_args(argv)
    layouts = args.layouts.split(",")
    if unknown := [name for name in layouts if name not in LAYOUTS]:
        parser.error(f"--layouts: unknown {unknown}; known: {list(LAYOUTS)}")
    rates = [float(x) for x in args.rates.split(",")]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="live-canary-") as tmp:
        for layout in layouts:
            rows += run_layout(layout, rates, args.repetitions, Path(tmp))
    text = summary(rows)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"unix_time": time.time(), "rates": rates,
                                    "repetitions": args.repetitions, "rows": rows,
                                    "summary": text}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
