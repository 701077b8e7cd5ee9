"""Tenant identity never in clear, and the top-N cardinality budget."""

from __future__ import annotations

from monitor.gateway.tenants import ANONYMOUS, OTHER, TenantBudget, TenantIdentifier


def test_an_api_key_becomes_a_salted_hash_never_the_key():
    salted = TenantIdentifier(b"salt-one-0123")
    tenant = salted.identify({"authorization": "Bearer sk-secret-key"})
    assert tenant.startswith("key-") and "secret" not in tenant and len(tenant) == 16
    assert salted.identify({"authorization": "Bearer sk-secret-key"}) == tenant
    assert TenantIdentifier(b"salt-two-0123").identify(
        {"authorization": "Bearer sk-secret-key"}) != tenant


def test_a_configured_header_wins_and_no_identity_is_anonymous():
    by_header = TenantIdentifier(b"salt-one-0123", header="X-Team")
    assert by_header.identify({"x-team": "search", "authorization": "Bearer k"}) == "search"
    assert by_header.identify({}) == ANONYMOUS
    assert by_header.identify({"authorization": "Basic abc"}) == ANONYMOUS


def test_the_top_n_tenants_by_requests_keep_their_label_and_the_rest_are_other():
    budget = TenantBudget(max_tenants=2)
    # c ties a and b at 1 request (a tie does not displace), its second overtakes one.
    assert [budget.label(t) for t in ["a", "b", "c", "c"]] == ["a", "b", OTHER, "c"]
    assert len(budget.top) == 2 and "c" in budget.top


def test_a_budget_of_zero_labels_everyone_other():
    budget = TenantBudget(max_tenants=0)
    assert {budget.label(t) for t in "abc"} == {OTHER}


def test_one_off_tenants_do_not_grow_the_counts_without_bound():
    budget = TenantBudget(max_tenants=1, max_tracked=10)
    assert [budget.label("big") for _ in range(5)] == ["big"] * 5
    for i in range(100):
        assert budget.label(f"once-{i}") == OTHER
    assert len(budget._counts) <= 10 and budget._counts["big"] == 5
