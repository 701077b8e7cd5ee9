"""CPU time of the detectors alone per target-step (no store reads): what a restart's replay
costs in Python, and the 22-day replay of one target it implies.

    python -m bench.anomaly_replay [--steps 5000]

A synthetic target (one-minute steps, a daily load cycle, latency rising with load) is fed
row by row through ``TargetDetector`` as the replay does (``warm_up=True``); process CPU time,
so other work on the machine does not count. The first ``--steps`` steps are less than a
week: the seasonal baseline is not yet in use (it costs a little more per step).
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence

import numpy as np

from monitor.anomaly.params import AnomalyParams
from monitor.anomaly.target import TargetDetector

REPLAY_DAYS = 22


def rows(steps: int, seed: int = 0) -> list[dict[str, float]]:
    rng = np.random.default_rng(seed)
    out = []
    for k in range(steps):
        load = 10 * (0.6 + 0.4 * math.sin(2 * math.pi * (k % 1440) / 1440)) * (
            1 + 0.05 * rng.standard_normal())
        out.append({
            "tokens_per_second": 300 * load * (1 + 0.03 * rng.standard_normal()),
            "offered_requests_per_second": load,
            "ttft_p99_seconds": 0.1 + 0.01 * load + 0.01 * rng.standard_normal(),
            "itl_p99_seconds": 0.02 + 0.001 * rng.standard_normal(),
            "e2e_p99_seconds": 1 + 0.05 * rng.standard_normal(),
            "kv_cache_usage_ratio": 0.03 * load, "queue_depth": 0.0, "error_ratio": 0.0,
            "gpu_memory_used_bytes": math.nan, "preemptions_per_second": 0.0,
            "batch_utilization": 0.1 * load})
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=5000)
    args = parser.parse_args(argv)
    feature_rows = rows(args.steps)
    detector = TargetDetector("target", AnomalyParams())
    started = time.process_time()
    for k, row in enumerate(feature_rows):
        detector.update(60.0 * k, row, warm_up=True)
    cpu = time.process_time() - started
    per_step = cpu / args.steps
    print(f"{args.steps} steps: {cpu:.2f} s CPU, {1e6 * per_step:.0f} us per target-step; "
          f"a {REPLAY_DAYS}-day replay of one target: {per_step * REPLAY_DAYS * 1440:.1f} s")


if __name__ == "__main__":
    main()
