"""The SLO list's sort and filter in headless Chromium: ui.js applies the state of the URL's
hash (which the server never sees) or query on load, puts it in the query (a link to the
view) and hides the rows the filter leaves out."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.browser import dump_dom
from tests.monitor.api.conftest import Api
from tests.monitor.ui.many_slos import served_many


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    with served_many(tmp_path_factory.mktemp("many-browser")) as served:
        yield served


def rows(dom: str) -> tuple[list[str], list[str]]:
    """The SLOs in DOM order, and those not ``hidden``."""
    found = re.findall(r'<tr data-slo="([^"]+)"[^>]*?( hidden(?:="")?)?>', dom)
    return [name for name, _ in found], [name for name, hidden in found if not hidden]


def permalink(dom: str) -> str:
    found = re.search(r'id="permalink" href="([^"]*)"', dom)
    assert found
    return found.group(1).replace("&amp;", "&")


@pytest.mark.integration
def test_the_hash_sorts_by_budget_left_descending_with_no_data_last(many: Api) -> None:
    dom = dump_dom(many.url + "/ui/slos#sort=budget&order=desc")
    assert 'data-ready="1"' in dom
    order, shown = rows(dom)
    assert order == shown == ["chat-ref1", "chat-ref0", "ttft", "availability", "batch-none"]
    assert re.search(r'data-key="budget"[^>]*aria-sort="descending"', dom)
    assert permalink(dom) == "/ui/slos?sort=budget&order=desc"


@pytest.mark.integration
def test_the_hash_filters_by_service_and_sorts_burn_rates_as_numbers(many: Api) -> None:
    dom = dump_dom(many.url + "/ui/slos#service=chat&sort=burn&order=asc")
    order, shown = rows(dom)
    # 0 < 0.5 < 0.8 < 50 (as text "50" would come before "8"); no data last.
    assert order == ["chat-ref1", "chat-ref0", "ttft", "availability", "batch-none"]
    assert shown == ["chat-ref1", "chat-ref0"]
    assert '<option value="" selected' not in dom.split('id="service"')[1].split("</select>")[0]
    assert "2 of 5 SLOs" in dom
    assert permalink(dom) == "/ui/slos?service=chat&sort=burn&order=asc"


@pytest.mark.integration
def test_the_hash_filters_by_label_and_sorts_the_sli_ascending(many: Api) -> None:
    dom = dump_dom(many.url + "/ui/slos#label=team%3Dblue&sort=sli")
    order, shown = rows(dom)
    assert order == ["ttft", "chat-ref0", "availability", "chat-ref1", "batch-none"]
    assert shown == ["chat-ref0", "batch-none"]
    assert permalink(dom) == "/ui/slos?label=team%3Dblue&sort=sli&order=asc"


@pytest.mark.integration
def test_the_query_form_renders_and_stays_the_same_in_the_browser(many: Api) -> None:
    query = "service=chat&q=ref&sort=period&order=desc"
    dom = dump_dom(f"{many.url}/ui/slos?{query}")
    order, shown = rows(dom)
    assert order == ["chat-ref1", "ttft", "chat-ref0", "availability", "batch-none"]
    assert shown == ["chat-ref1", "chat-ref0"]
    assert permalink(dom) == f"/ui/slos?{query}"


@pytest.mark.integration
@pytest.mark.parametrize("column", ["gone", 'x"]'])
def test_a_stale_or_hostile_column_leaves_the_configs_order(many: Api, column: str) -> None:
    dom = dump_dom(f"{many.url}/ui/slos#sort={column}&order=desc&service=chat")
    order, shown = rows(dom)
    assert order == ["availability", "chat-ref0", "chat-ref1", "batch-none", "ttft"]
    assert shown == ["chat-ref0", "chat-ref1"] and 'data-ready="1"' in dom
    assert permalink(dom) == "/ui/slos?service=chat"
