"""Cost attribution per tenant: engine device-seconds split by each request's work (output +
prefill_weight x prompt tokens) and priced per device-hour; the tenants sum to the total
(tokens exactly, cost within 1%), with the small tenants folded into "other" too."""

from __future__ import annotations

import random

import pytest

from monitor.store.request_cost import CostModel, attribute_cost
from monitor.store.request_events import RequestEventRow


def row(tenant: str, prompt: int | None, output: int | None) -> RequestEventRow:
    return RequestEventRow(at=0.0, model="tiny", tenant=tenant, slo_class="interactive",
                           outcome="ok" if output is not None else "error", status=200,
                           good=True, prompt_tokens=prompt, output_tokens=output)


def test_shares_follow_the_weighted_tokens_worked_by_hand() -> None:
    # a: 1000 prompt + 100 output = work 200; b: 0 + 600 = 600; c failed without usage
    rows = [row("a", 1000, 100), row("b", 0, 600), row("c", None, None)]
    model = CostModel.from_wall_time(0, 3600, num_devices=2, device_hour_price=3.0,
                                     prefill_weight=0.1)
    found = attribute_cost(rows, "tenant", model)
    assert found.total.device_seconds == 7200 and found.total.cost == pytest.approx(6.0)
    assert found.groups["a"].device_seconds == pytest.approx(1800)   # 200 / 800
    assert found.groups["b"].cost == pytest.approx(4.5)              # 600 / 800 of 6.0
    assert (found.groups["c"].num_requests, found.groups["c"].cost) == (1, 0.0)


@pytest.mark.parametrize("max_groups", [None, 3], ids=["every-tenant", "top-3-and-other"])
def test_the_tenants_sum_to_the_total(max_groups: int | None) -> None:
    draw = random.Random(20)
    rows = [row(f"t{draw.randrange(12)}", draw.randrange(1, 4000), draw.randrange(0, 900))
            for _ in range(3000)] + [row("t0", None, None)]
    found = attribute_cost(rows, "tenant", CostModel(5123.4, 2.5), max_groups)
    groups = found.groups.values()
    assert len(found.groups) == (12 if max_groups is None else 4)  # top 3 + "other"
    assert sum(g.prompt_tokens for g in groups) == sum(r.prompt_tokens or 0 for r in rows)
    assert sum(g.output_tokens for g in groups) == sum(r.output_tokens or 0 for r in rows)
    assert sum(g.num_requests for g in groups) == len(rows)
    assert found.total.cost is not None
    assert sum(g.cost or 0 for g in groups) == pytest.approx(found.total.cost, rel=0.01)
    assert sum(g.device_seconds for g in groups) == pytest.approx(5123.4, rel=1e-9)
    if max_groups is not None:
        assert "other" in found.groups and found.groups["other"].num_requests > 0


def test_without_work_or_with_bad_input() -> None:
    found = attribute_cost([row("a", None, None)], "tenant", CostModel(60.0))
    assert found.unattributed_device_seconds == 60 and found.total.cost is None
    with pytest.raises(ValueError, match="devices > 0"):
        CostModel.from_wall_time(0, 10, num_devices=0)
    with pytest.raises(ValueError, match="prefill weight"):
        CostModel(1.0, prefill_weight=-1)
    with pytest.raises(ValueError, match="attribute cost by one of"):
        attribute_cost([], "status", CostModel(1.0))
