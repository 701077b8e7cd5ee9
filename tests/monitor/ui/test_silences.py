"""The silences page: a real Alertmanager's silences, each with its matchers, times, author,
comment, the book's alerts it matches and its link in Alertmanager's UI; expired ones behind
?expired=1; no Alertmanager, or one that is down, is a message on a 200 page."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from monitor.alerting.alertmanager import Matcher, Silence, parse_matcher
from monitor.alerting.book import Alert, AlertState
from monitor.ui.silences import matches, remaining, silenced
from tests.monitor.api.conftest import Api, served_api
from tests.monitor.ui.silences_fixture import SilencedUi, config_with, silenced_ui
from tests.monitor.alertmanager_fixture import webhook_receiver
from tests.processes import free_port


@pytest.fixture(scope="module")
def silences(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SilencedUi]:
    with silenced_ui(tmp_path_factory.mktemp("silences")) as found:
        yield found


def page(api: Api, query: str = "") -> str:
    response = httpx.get(f"{api.url}/ui/silences{query}", timeout=30)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    return response.text


def row(text: str, silence_id: str) -> str:
    found = re.search(rf'<tr data-silence="{silence_id}".*?</tr>', text, re.S)
    assert found, f"no row for silence {silence_id}"
    return found.group(0)


def live_alerts(api: Api) -> list[dict[str, Any]]:
    items = httpx.get(api.url + "/api/v1/alerts").json()["items"]
    return [a for a in items if a["state"] in ("firing", "pending")]


@pytest.mark.integration
def test_each_silence_shows_its_id_matchers_author_comment_and_link(
        silences: SilencedUi) -> None:
    text = page(silences.ui)
    assert f'href="{silences.am.url}/#/silences"' in text
    assert "GPU swap on ref-0 &lt;b&gt;tonight&lt;/b&gt;" in row(text, silences.active)
    active = html.unescape(row(text, silences.active))
    for shown in (silences.active, 'slo="availability" alertname=~"InferwatchSLO.*"', "ops",
                  "GPU swap on ref-0 <b>tonight</b>", "ends in 2h",
                  f'href="{silences.am.url}/#/silences/{silences.active}"',
                  '<span class="state active">active</span>'):
        assert shown in active, shown
    pending = html.unescape(row(text, silences.pending))
    for shown in (silences.pending, 'slo!="availability"', "alice",
                  "planned upgrade", "starts in 1h", '<span class="state pending">pending</span>'):
        assert shown in pending, shown
    assert text.index(silences.active) < text.index(silences.pending)  # active first


@pytest.mark.integration
def test_the_matched_count_is_the_books_live_alerts_the_matchers_select(
        silences: SilencedUi) -> None:
    text = page(silences.ui)
    alerts = live_alerts(silences.ui)
    mine = [a for a in alerts if a["labels"]["slo"] == "availability"]
    assert mine, "the fixture's availability SLO burns: its alerts fire"
    for silence_id, expected in ((silences.active, len(mine)),
                                 (silences.pending, len(alerts) - len(mine))):
        count = re.search(r'data-field="matched"[^>]*>(\d+)</td>', row(text, silence_id))
        assert count and int(count.group(1)) == expected


@pytest.mark.integration
def test_expired_silences_are_hidden_until_asked_for(silences: SilencedUi) -> None:
    text = page(silences.ui)
    assert silences.expired not in text
    assert 'href="/ui/silences?expired=1">show expired (1)</a>' in text
    with_expired = page(silences.ui, "?expired=1")
    expired = row(with_expired, silences.expired)
    assert "done early" in expired and "bob" in expired and "ago" in expired
    assert '<span class="state expired">expired</span>' in expired
    assert 'href="/ui/silences">hide expired</a>' in with_expired
    assert with_expired.index(silences.pending) < with_expired.index(silences.expired)


def test_without_an_alertmanager_the_page_says_so(ui: Api) -> None:
    text = page(ui)
    assert 'id="no-alertmanager"' in text and "alerting.alertmanager_urls" in text


def test_an_unreachable_alertmanager_is_a_message_naming_it(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with served_api(tmp_path, config_yaml=config_with(url)) as ui:
        text = page(ui)
    [error] = re.findall(r"<p class=\"error\" data-error>(.*?)</p>", text, re.S)
    assert url in error and "cannot connect" in html.unescape(error)
    assert 'id="silences"' not in text and 'id="no-answer"' in text


def test_an_alertmanager_that_errs_is_a_message_with_its_answer(tmp_path: Path) -> None:
    with webhook_receiver() as receiver:  # answers GET with 501 Unsupported method
        url = receiver.url.removesuffix("/notify")
        with served_api(tmp_path, config_yaml=config_with(url)) as ui:
            text = html.unescape(page(ui))
    assert f"Alertmanager at {url} failed GET /api/v2/silences: HTTP 501" in text
    assert 'id="no-answer"' in text


@pytest.mark.integration
def test_the_second_alertmanager_of_a_pair_answers_when_the_first_is_down(
        silences: SilencedUi, tmp_path: Path) -> None:
    down = f"http://127.0.0.1:{free_port()}"
    with served_api(tmp_path, config_yaml=config_with(down, silences.am.url)) as ui:
        text = page(ui)
    assert down in text and silences.active in row(text, silences.active)


def _alert(labels: dict[str, str], state: AlertState = AlertState.FIRING) -> Alert:
    return Alert("f", labels, {}, state, 0.0, None, None, None, 1.0)


@pytest.mark.parametrize(("matcher", "labels", "expected"), [
    ("slo=a", {"slo": "a"}, True),
    ("slo=a", {"slo": "ab"}, False),
    ("slo!=a", {}, True),                    # a missing label is the empty value
    ('slo=""', {}, True),
    ("slo=~a.*", {"slo": "abc"}, True),
    ("slo=~b", {"slo": "abc"}, False),       # anchored, as in Alertmanager
    ("slo!~a|b", {"slo": "c"}, True),
    ("slo=~(?P<x", {"slo": "c"}, None),      # not a regex Python reads
])
def test_a_matcher_matches_as_alertmanager_does(matcher: str, labels: dict[str, str],
                                                expected: bool | None) -> None:
    assert matches(parse_matcher(matcher), labels) is expected


def test_only_live_alerts_that_every_matcher_selects_count() -> None:
    now = datetime.now(UTC)
    silence = Silence("id", (Matcher("slo", "a"), Matcher("severity", "page")), now,
                      now + timedelta(hours=1), "ops", "c", "active")
    alerts = [_alert({"alertname": "X", "slo": "a", "severity": "page"}),
              _alert({"alertname": "Y", "slo": "a", "severity": "ticket"}),
              _alert({"alertname": "Z", "slo": "a", "severity": "page"}, AlertState.RESOLVED)]
    assert silenced(silence, alerts) == ["X severity=page slo=a"]
    assert remaining(silence, now.timestamp() + 600) == "ends in 50m"
