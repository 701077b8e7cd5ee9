"""The SLO list's query string (?service=&label=&q=&sort=&order=) applied by the server: the
rows' order, the rows a filter hides, the form's state and the link to the view."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.monitor.api.conftest import Api
from tests.monitor.ui.many_slos import served_many

CONFIG_ORDER = ["availability", "chat-ref0", "chat-ref1", "batch-none", "ttft"]


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    with served_many(tmp_path_factory.mktemp("many")) as served:
        yield served


def listing(api: Api, **params: Any) -> tuple[list[str], list[str], str]:
    """The list's SLOs in page order, those shown (not ``hidden``), and the page."""
    response = httpx.get(api.url + "/ui/slos", params=params, timeout=30)
    assert response.status_code == 200
    rows = re.findall(r'<tr data-slo="([^"]+)"[^>]*?( hidden)?>', response.text)
    return [name for name, _ in rows], [name for name, hidden in rows if not hidden], \
        response.text


def test_the_fixture_has_the_values_the_sorts_below_expect(many: Api) -> None:
    slos = {s["name"]: s for s in httpx.get(many.url + "/api/v1/slos").json()["items"]}
    assert [slos[n]["sli"] for n in CONFIG_ORDER] == pytest.approx(
        [0.95, 0.9, 1.0, None, 0.6])
    assert slos["batch-none"]["budget_remaining"] is None
    assert slos["availability"]["budget_remaining"] < slos["ttft"]["budget_remaining"] \
        < slos["chat-ref0"]["budget_remaining"] < slos["chat-ref1"]["budget_remaining"]


def test_without_a_query_the_list_is_in_the_configs_order_and_whole(many: Api) -> None:
    order, shown, page = listing(many)
    assert order == shown == CONFIG_ORDER
    assert "aria-sort" not in page and '<span id="shown" class="empty">5 of 5 SLOs</span>' in page


@pytest.mark.parametrize(("sort", "order", "expected"), [
    ("budget", "desc", ["chat-ref1", "chat-ref0", "ttft", "availability", "batch-none"]),
    ("budget", "asc", ["availability", "ttft", "chat-ref0", "chat-ref1", "batch-none"]),
    ("sli", "asc", ["ttft", "chat-ref0", "availability", "chat-ref1", "batch-none"]),
    ("burn", "desc", ["availability", "ttft", "chat-ref0", "chat-ref1", "batch-none"]),
    ("objective", "desc", ["availability", "chat-ref1", "batch-none", "chat-ref0", "ttft"]),
    ("name", "desc", ["ttft", "chat-ref1", "chat-ref0", "batch-none", "availability"]),
    # 1d, 7d, 30d by length, not as text; ties keep the config's order either way.
    ("period", "asc", ["availability", "batch-none", "chat-ref0", "chat-ref1", "ttft"]),
    ("period", "desc", ["chat-ref1", "ttft", "chat-ref0", "availability", "batch-none"]),
    ("service", "asc", ["batch-none", "chat-ref0", "chat-ref1", "availability", "ttft"]),
])
def test_sort_orders_rows_numerically_where_numeric_with_nulls_last(
        many: Api, sort: str, order: str, expected: list[str]) -> None:
    rows, shown, page = listing(many, sort=sort, order=order)
    assert rows == shown == expected
    direction = "ascending" if order == "asc" else "descending"
    assert re.search(rf'data-key="{sort}"[^>]*aria-sort="{direction}"', page)
    assert page.count("aria-sort=") == 1


@pytest.mark.parametrize(("params", "expected"), [
    ({"service": "chat"}, ["chat-ref0", "chat-ref1"]),
    ({"label": "team=blue"}, ["chat-ref0", "batch-none"]),
    ({"label": "team"}, ["chat-ref0", "chat-ref1", "batch-none"]),
    ({"service": "chat", "label": "team=blue"}, ["chat-ref0"]),
    ({"q": "REF"}, ["chat-ref0", "chat-ref1"]),
    ({"q": "team=red"}, ["chat-ref1"]),
    ({"service": "nobody"}, []),
])
def test_filters_hide_the_rows_they_leave_out(many: Api, params: dict[str, str],
                                              expected: list[str]) -> None:
    rows, shown, page = listing(many, **params)
    assert rows == CONFIG_ORDER and shown == expected
    assert f'<span id="shown" class="empty">{len(expected)} of 5 SLOs</span>' in page


def test_two_labels_must_both_hold(many: Api) -> None:
    response = httpx.get(many.url + "/ui/slos?label=team%3Dblue&label=team%3Dred")
    assert len(re.findall(r'<tr data-slo="[^"]+"[^>]*? hidden>', response.text)) == 5


def test_filter_and_sort_combine_and_the_form_and_link_carry_them(many: Api) -> None:
    rows, shown, page = listing(many, service="chat", label="team=blue", sort="budget",
                                order="desc")
    assert rows[:2] == ["chat-ref1", "chat-ref0"] and shown == ["chat-ref0"]
    assert "<option selected>chat</option>" in page
    assert "<option selected>team=blue</option>" in page
    assert '<input type="hidden" name="sort" value="budget">' in page
    assert ('id="permalink" href="/ui/slos?service=chat&amp;label=team%3Dblue&amp;sort=budget'
            '&amp;order=desc"') in page


def test_a_stale_links_unknown_column_and_order_are_ignored(many: Api) -> None:
    rows, shown, page = listing(many, sort="no-such-column", order="sideways")
    assert rows == shown == CONFIG_ORDER and "aria-sort" not in page


def test_the_selects_offer_every_service_and_label(many: Api) -> None:
    page = listing(many)[2]
    for option in ("batch", "chat", "inference", "team=blue", "team=red"):
        assert f"<option>{option}</option>" in page
