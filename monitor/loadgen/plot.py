"""The sweep's throughput-latency curve as a PNG: latency against achieved throughput with
the SLO lines, the knee and the SLO-bounded capacity; attainment against offered rate below."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display: files only

import matplotlib.pyplot as plt  # noqa: E402

from monitor.loadgen.sweep import SweepResult  # noqa: E402


def plot_sweep(result: SweepResult, path: str | Path, title: str = "") -> None:
    points = result.sorted_points()
    slo = result.options.slo
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 8), height_ratios=(3, 2))
    throughput = [p.summary.request_throughput for p in points]
    for metric, limit, colour in (("ttft", slo.ttft, "tab:blue"), ("tpot", slo.tpot, "tab:green"),
                                  ("e2e", slo.e2e, "tab:purple")):
        if limit is None and metric != "ttft":
            continue
        for q, style in (("p50", ":"), ("p99", "-")):
            ys = [p.latency(f"{metric}_{q}") * 1000 for p in points]
            top.plot(throughput, ys, style, marker="o", color=colour, label=f"{metric} {q}")
        if limit is not None:
            top.axhline(limit * 1000, color=colour, linestyle="--", linewidth=1,
                        label=f"SLO {metric} {limit * 1000:g} ms")
    for p, x in zip(points, throughput):
        if p.saturated:
            top.annotate("saturated", (x, p.latency("ttft_p99") * 1000), color="tab:red",
                         textcoords="offset points", xytext=(4, 4), fontsize=8)
    if result.knee is not None:
        k = result.knee
        top.plot([k.summary.request_throughput], [k.latency(result.options.knee_metric) * 1000],
                 marker="*", markersize=16, color="tab:orange", linestyle="none",
                 label=f"knee ({k.rate:.3g} req/s offered)")
    top.set_yscale("log")
    top.set_xlabel("achieved throughput (requests/s)")
    top.set_ylabel("latency (ms)")
    top.set_title(title or "throughput-latency curve")
    top.grid(True, which="both", alpha=0.3)
    top.legend(fontsize=8, loc="upper left")

    rates = [p.rate for p in points]
    bottom.plot(rates, [p.attainment * 100 for p in points], marker="o", color="tab:blue",
                label="requests within SLO")
    bottom.axhline(result.options.attainment_target * 100, color="tab:red", linestyle="--",
                   linewidth=1, label=f"target {result.options.attainment_target:.1%}")
    if result.max_rate_under_slo is not None:
        bottom.axvline(result.max_rate_under_slo, color="tab:orange", linewidth=1,
                       label=f"max {result.max_rate_under_slo:.3g} req/s under SLO")
    bottom.set_xlabel("offered rate (requests/s)")
    bottom.set_ylabel("SLO attainment (%)")
    bottom.set_ylim(0, 101)
    bottom.grid(True, alpha=0.3)
    bottom.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
