"""bench/tenant_accounting.py: a short real run (reference server, gateway with a store,
several tenants): the stored tokens equal the clients' per tenant, the tenants sum to the
total, and the cost sums to the engine's busy time priced, with "other" folding too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.tenant_accounting import main, plan


def test_the_plan_is_seeded_and_has_every_tenant() -> None:
    assert plan(50, 1) == plan(50, 1) and plan(50, 1) != plan(50, 2)
    assert {tenant for tenant, *_ in plan(200, 1)} == {"search", "chat", "batch", "trial-1",
                                                        "trial-2"}


@pytest.mark.slow  # ~10 s: two processes and 24 real requests
def test_a_short_run_sums_per_tenant_to_the_total(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "tenants.json"
    assert main(["--requests", "24", "--concurrency", "4", "--json", str(out)]) == 0
    assert "tokens exact: True" in capsys.readouterr().out
    result = json.loads(out.read_text())
    assert result["busy_device_seconds"] > 0 and result["cost_error"] <= 0.01
    assert sum(t["requests"] for t in result["tenants"].values()) == 24
    assert "other" in result["folded"] and len(result["folded"]) <= 4
