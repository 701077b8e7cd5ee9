"""A goodput SLO judged per tenant by the monitor's evaluator over the stored request events:
a busy tenant burning its budget pages with its tenant label, a quiet one below the
min_events gate is not judged and stays quiet, a healthy one is fine. The same per tenant
from the gateway's good/total counters as the collector stores them (a ratio SLO split by
the tenant label)."""

from __future__ import annotations

import pytest

from monitor.collect.snapshot import Snapshot, TargetState, series_key
from monitor.slo.breakdown import slo_by_group, split_slo
from monitor.slo.evaluator import SloEvaluator
from monitor.slo.source import StoreSliSource
from monitor.slo.spec import Slo
from monitor.store import Store
from monitor.store.request_events import RequestEventRow, write_request_events

NOW = 1_800_000_000.0


def goodput_slo(**sli: object) -> Slo:
    # 30 days: the workbook's windows, paging at 14.4x over 1h and 5m
    return Slo.model_validate({"name": "chat-goodput", "objective": 0.99, "window": "30d",
                               "sli": {"kind": "goodput", **sli},
                               "alerting": {"min_events": 20}})


def events(tenant: str, count: int, num_bad: int) -> list[RequestEventRow]:
    """``count`` requests over the last 4 minutes, the first ``num_bad`` of them bad."""
    return [RequestEventRow(at=NOW - 240 + i * 200 / count, model="tiny", tenant=tenant,
                            slo_class="interactive", outcome="ok", status=200,
                            good=i >= num_bad, ttft_seconds=0.1)
            for i in range(count)]


def test_each_tenant_is_judged_alone_with_the_gate(store: Store) -> None:
    write_request_events(store.engine, events("busy", 200, 100) + events("quiet", 5, 5)
                         + events("fine", 100, 0))
    found = {g.value: g for g in slo_by_group(store, goodput_slo(), "tenant", NOW)}
    assert sorted(found) == ["busy", "fine", "quiet"]
    busy, quiet, fine = found["busy"], found["quiet"], found["fine"]
    # busy: half bad, burn 0.5 / 0.01 = 50x > 14.4x over 1h and 5m: pages, with its label
    assert busy.judged and busy.paging
    assert busy.status.events == 200 and busy.status.sli == pytest.approx(0.5)
    assert busy.status.budget_remaining == pytest.approx(1 - 50)
    one_hour = next(b for b in busy.status.burn_rates if b.window == "1h")
    assert one_hour.burn_rate == pytest.approx(50)
    page = next(c for c in busy.status.conditions if c.active)
    assert page.labels["tenant"] == "busy" and page.labels["severity"] == "page"
    # quiet: every request bad (100x), but 5 events < min_events 20: not judged, no page
    assert quiet.status.sli == 0 and not quiet.judged and not quiet.paging
    assert not any(c.active for c in quiet.status.conditions if "window" in c.labels
                   and c.labels["severity"] == "page")
    assert fine.judged and not fine.paging and fine.status.budget_remaining == 1.0


def test_only_goodput_slos_split() -> None:
    latency = Slo.model_validate({"name": "ttft", "objective": 0.99, "window": "30d",
                                  "sli": {"kind": "availability"}})
    with pytest.raises(ValueError, match="only a goodput SLI"):
        split_slo(latency, "tenant", ["a"])
    with pytest.raises(ValueError, match="already selects one tenant"):
        split_slo(goodput_slo(tenant="a"), "tenant", ["a"])
    names = [s.name for s in split_slo(goodput_slo(), "model", ["tiny", "tiny-lora"])]
    assert names == ["chat-goodput/model=tiny", "chat-goodput/model=tiny-lora"]


def gateway_scrape(end: float, per_tenant: dict[str, tuple[float, float]]) -> Snapshot:
    """15 s of the gateway's /metrics as the collector stores them: per tenant (requests,
    good) on its good/total counters, labelled by model, tenant and class."""
    counters = {}
    for tenant, (requests, good) in per_tenant.items():
        labels = {"model": "tiny", "tenant": tenant, "slo_class": "interactive"}
        counters[series_key("inferwatch_gateway_requests_total",
                            {**labels, "outcome": "ok"})] = requests
        counters[series_key("inferwatch_gateway_good_requests_total", labels)] = good
    return Snapshot("gateway", end - 15, end, TargetState.UP, counters=counters)


COUNTERS_SLO = {"name": "gateway-goodput", "objective": 0.99, "window": "30d",
                "sli": {"kind": "ratio",
                        "good": {"metric": "inferwatch_gateway_good_requests"},
                        "total": {"metric": "inferwatch_gateway_requests"}}}


@pytest.mark.parametrize(("min_events", "quiet_pages"), [(20, False), (0, True)],
                         ids=["gate-20-keeps-the-quiet-tenant-quiet", "no-gate-pages-it"])
def test_the_evaluator_pages_per_tenant_from_the_gateway_counters(
        store: Store, min_events: int, quiet_pages: bool) -> None:
    # 5 minutes of scrapes: busy sends 10 per scrape, half good (50x burn); quiet 1 request
    # a minute, every one bad (100x); fine 10 per scrape, all good.
    store.write([gateway_scrape(NOW - 300 + 15 * k, {
        "busy": (10, 5), "quiet": (1, 0) if k % 4 == 0 else (0, 0), "fine": (10, 10)})
        for k in range(1, 21)])
    slo = Slo.model_validate({**COUNTERS_SLO, "alerting": {"min_events": min_events}})
    copies = split_slo(slo, "tenant", ["busy", "quiet", "fine"])
    assert copies[0].sli.total.labels == {"tenant": "busy"}  # type: ignore[union-attr]
    statuses = SloEvaluator(copies, StoreSliSource(store), settle_seconds=0).tick(NOW)
    paging = {s.name.split("=")[1]: sorted(c.labels["window"] for c in s.conditions
                                           if c.active and c.labels["severity"] == "page")
              for s in statuses}
    assert paging["busy"] == ["1h/5m", "6h/30m"] and paging["fine"] == []  # 50x > 14.4x, 6x
    assert (paging["quiet"] != []) is quiet_pages
    events = {s.name.split("=")[1]: s.events for s in statuses}
    assert events == {"busy": 200, "quiet": 5, "fine": 200}


def test_a_split_counter_slo_per_tenant_as_found_in_the_stored_series(store: Store) -> None:
    """The checked-in per-tenant SLO (a ratio SLI over the gateway's counters, grouping:
    [tenant], the default gate of 100 events) is accepted by the evaluator as a whole, and
    judged per tenant from the tenants of the stored series: busy pages with its label, quiet
    (below the gate) is not judged, fine is fine; a tenant with no events in the period is not
    listed."""
    from monitor.slo.loaders import load_slos
    from tests.monitor.slo.test_rules import ROOT

    (slo,) = load_slos(ROOT / "alerts" / "slos" / "gateway-tenants.yaml")
    old = NOW - 40 * 86400  # a tenant seen before this 30-day period only
    store.write([gateway_scrape(old - 15 * k, {"gone": (10, 10)}) for k in range(2)])
    store.write([gateway_scrape(NOW - 300 + 15 * k, {
        "busy": (10, 5), "quiet": (1, 0) if k % 4 == 0 else (0, 0), "fine": (10, 10)})
        for k in range(1, 21)])
    (whole,) = SloEvaluator([slo], StoreSliSource(store), settle_seconds=0).tick(NOW)
    assert whole.events == 405 and whole.error is None  # the SLO as a whole: every tenant
    found = {g.value: g for g in slo_by_group(store, slo, "tenant", NOW)}
    assert sorted(found) == ["busy", "fine", "quiet"]
    busy, quiet, fine = found["busy"], found["quiet"], found["fine"]
    assert busy.judged and busy.paging and busy.status.events == 200
    page = next(c for c in busy.status.conditions if c.active)
    assert page.labels["tenant"] == "busy"
    assert page.labels["slo"] == "gateway-goodput-per-tenant/tenant=busy"
    assert quiet.status.events == 5 and not quiet.judged and not quiet.paging  # 5 < 100
    assert fine.judged and not fine.paging
