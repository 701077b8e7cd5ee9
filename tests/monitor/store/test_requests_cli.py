"""`inferwatch requests` over a store (both databases): the same counts and exact percentiles
as the functions it prints, per group, against any threshold; bad input exits 2."""

from __future__ import annotations

import pytest

from monitor.cli import main
from monitor.store import Store
from monitor.store.request_events import RequestEventRow, write_request_events
from tests.monitor.store.builders import T0
from tests.monitor.store.databases import Database


def _row(i: int, tenant: str) -> RequestEventRow:
    return RequestEventRow(at=T0 + i, model="tiny", tenant=tenant, slo_class="interactive",
                           outcome="ok", status=200, good=i < 3, ttft_seconds=(i + 1) / 10,
                           tpot_seconds=0.02, e2e_seconds=1.0)


def test_summary_per_tenant_against_a_threshold_between_edges(
        database: Database, store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    write_request_events(store.engine, [_row(i, "a" if i < 2 else "b") for i in range(4)])
    assert main(["requests", "--store", database.url, "--start", str(T0),
                 "--end", str(T0 + 10), "--group-by", "tenant", "--ttft-ms", "333"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # TTFT 0.1 .. 0.4 s: three at most 333 ms; the median of four is 0.25 s
    assert lines[0].startswith("all: 4 requests, 3 good (0.7500)  ttft p50=250.0ms")
    assert lines[1].startswith("tenant=a: 2 requests, 2 good (1.0000)")
    assert lines[2].startswith("tenant=b: 2 requests, 1 good (0.5000)")


def test_cost_per_tenant_sums_to_the_total(
        database: Database, store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [RequestEventRow(at=T0 + i, model="tiny", tenant=tenant, slo_class="interactive",
                            outcome="ok", status=200, good=True, prompt_tokens=prompt,
                            output_tokens=output)
            for i, (tenant, prompt, output) in enumerate(
                [("a", 1000, 100), ("b", 0, 300), ("b", 0, 300), ("c", 10, 1)])]
    write_request_events(store.engine, rows)
    assert main(["requests", "--store", database.url, "--start", str(T0), "--end",
                 str(T0 + 3600), "--devices", "2", "--gpu-hour-price", "3",
                 "--max-groups", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # work: a 100 + 0.1 x 1000 = 200, b 600, c 2 -> "other"; 7200 device-s, 6.0 in all
    assert lines[1] == "cost by tenant: 7200.0 device-seconds, 3 per device-hour, " \
        "prefill weight 0.1"
    assert lines[2].startswith("tenant=a: 1 requests, 1000 prompt + 100 output tokens, "
                               "1795.51 device-s (24.9%), cost 1.49626")
    assert lines[4].startswith("tenant=other: 1 requests, 10 prompt + 1 output tokens")
    summed, total = lines[5].split(": ", 1)[1], lines[6].split(": ", 1)[1]
    assert lines[5].startswith("sum over tenant") and summed == total
    assert total == "4 requests, 1010 prompt + 701 output tokens, 7200.00 device-s " \
        "(100.0%), cost 6"


@pytest.mark.parametrize("args", [["--start", "last tuesday"], ["--ttft-ms", "-5"],
                                  ["--store", "mysql://u@h/db"], ["--gpu-hour-price", "2"],
                                  ["--devices", "0"]],
                         ids=["bad-time", "negative-threshold", "unsupported-store",
                              "price-without-devices", "no-devices"])
def test_bad_input_exits_2_saying_why(args: list[str], tmp_path: object,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["requests", "--store", "sqlite:///unused.db", *args]) == 2
    assert capsys.readouterr().err.startswith("inferwatch requests: ")
