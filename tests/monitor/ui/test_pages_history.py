"""The alert history on the pages: the SLO page's episodes (timeline and table) and the alerts
page's recent changes are the history route's events, formatted as the UI formats them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import unquote

from monitor.api.schemas import AlertEventOut, AlertOut
from monitor.ui import fmt, history, svg
from tests.monitor.api.conftest import DASHBOARD_URL, Api
from tests.monitor.ui.test_pages import get, row

AM_URL = "http://alertmanager.example:9093"


def section(page: str) -> str:
    found = re.search(r'<section id="alert-history".*?</section>', page, re.S)
    assert found, "no alert history section"
    return found.group(0)


def api_episodes(ui: Api, name: str, start: str) -> list[tuple[str, float, float | None,
                                                               dict[str, Any]]]:
    """(fingerprint, fired at, resolved at, the latest event) per firing, worked out from
    the history route's events of the SLO since ``start``."""
    events = get(ui, "/api/v1/alerts/history", slo=name, start=start).json()["items"]
    found: dict[tuple[str, float], tuple[float | None, dict[str, Any]]] = {}
    for e in reversed(events):
        if e["state"] == "firing":
            found[(e["fingerprint"], e["fired_at"])] = (None, e)
        elif e["state"] == "resolved":
            found[(e["fingerprint"], e["fired_at"])] = (e["at"], e)
    return [(fp, fired, resolved, e) for (fp, fired), (resolved, e) in found.items()]


@contextmanager
def alertmanager(ui: Api) -> Iterator[None]:
    config = ui.state.config()
    configured = config.model_copy(update={"alerting": config.alerting.model_copy(
        update={"alertmanager_urls": (AM_URL,)})})
    original = ui.state.config
    ui.state.config = lambda: configured
    try:
        yield
    finally:
        ui.state.config = original


def test_the_slo_page_shows_each_firing_of_the_history_route(ui: Api) -> None:
    page = section(get(ui, "/ui/slos/availability").text)
    start = re.search(r'data-start="([\d.]+)"', page)
    assert start
    episodes = api_episodes(ui, "availability", start.group(1))
    assert len(episodes) == 4  # three windows firing now, one fired and resolved before
    assert len(re.findall(r"<tr data-episode=", page)) == len(episodes)
    for fingerprint, fired, resolved, event in episodes:
        html = row(page, "data-episode", f"{fingerprint}@{fired!r}")
        assert f'<td>{event["labels"]["window"]}</td>' in html
        assert f'<td>{event["labels"]["severity"]}</td>' in html
        assert fmt.when(fired) in html
        if resolved is None:
            assert '<span class="state firing">firing</span>' in html
            assert "dashboard" not in html
        else:
            assert fmt.when(resolved) in html
            assert f'<td class="num">{fmt.duration(resolved - fired)}</td>' in html
            assert f'<a class="dashboard" href="{DASHBOARD_URL}">' in html
    assert sum(e[2] is not None for e in episodes) == 1
    assert page.count('<rect class="episode ') == len(episodes)
    assert page.count('<rect class="lane"') == 3
    assert "Alertmanager" not in page  # none configured


def test_each_firing_links_to_its_alerts_in_alertmanager_when_one_is_configured(
        ui: Api) -> None:
    with alertmanager(ui):
        page = section(get(ui, "/ui/slos/availability").text)
    links = re.findall(rf'href="{re.escape(AM_URL)}/#/alerts\?filter=([^"]+)"', page)
    assert len(links) == 4
    windows = re.findall(r'<td>(\d+[mhd][\dmh]*/\d+[mh])</td>', page)
    assert [unquote(link) for link in links] == [
        f'{{alertname="InferwatchSLOBurnRate",slo="availability",window="{w}"}}'
        for w in windows]


def test_an_slo_that_never_fired_says_so(ui: Api) -> None:
    page = section(get(ui, "/ui/slos/ttft").text)
    assert "No alert of this SLO fired over its period." in page
    assert "<svg" not in page


def test_the_alerts_page_lists_the_latest_changes_of_the_history_route(ui: Api) -> None:
    page = get(ui, "/ui/alerts").text
    events = get(ui, "/api/v1/alerts/history", limit=history.RECENT_EVENTS).json()["items"]
    assert len(events) == 7
    table = page.split('<table id="history">')[1].split("</table>")[0]
    assert re.findall(r'<tr data-event="(\d+)"', table) == [str(e["id"]) for e in events]
    for e in events:
        html = row(table, "data-event", str(e["id"]))
        assert f'<td>{fmt.when(e["at"])}</td>' in html
        assert (f'{e["previous_state"] or "new"} → <span class="state {e["state"]}">'
                f'{e["state"]}</span>') in html
        assert f'<td>{fmt.when(e["fired_at"])}</td>' in html
        assert f'<td class="num">{fmt.number(e["value"], 2)}</td>' in html
        assert f'window={e["labels"]["window"]}' in html


def test_durations_read_at_a_glance() -> None:
    assert [fmt.duration(s) for s in (None, 0, 45.4, 750, 3 * 3600 + 300, 2 * 86400 + 4 * 3600)
            ] == ["—", "0s", "45s", "12m 30s", "3h 05m", "2d 04h"]


def test_the_timeline_clips_each_firing_to_the_range_and_keeps_short_ones_visible() -> None:
    drawn = svg.timeline([("12m/2m page", "page", [(-50.0, 25.0), (50.0, 50.1), (90.0, None),
                                                   (100.0, None)])],
                         0.0, 100.0, "history", width=200)
    bars = re.findall(r'<rect class="episode page" x="([\d.]+)" y="\d+" width="([\d.]+)"', drawn)
    assert bars == [("0.0", "50.0"), ("100.0", "2.0"), ("180.0", "20.0"), ("198.0", "2.0")]
    assert "to now</title>" in drawn and 'aria-label="history"' in drawn
    assert svg.timeline([], 0.0, 100.0, "history") == ""


def test_an_episode_is_made_of_a_lone_resolve_or_of_a_firing_alert_without_events() -> None:
    labels = {"alertname": "A", "slo": "s", "severity": "page", "window": "1h/5m"}
    resolve = AlertEventOut(id=1, at=500.0, fingerprint="f1", alertname="A", labels=labels,
                            annotations={}, state="resolved", previous_state="firing",
                            fired_at=100.0, value=None)
    firing = AlertOut(fingerprint="f2", alertname="A", labels=labels, annotations={},
                      state="firing", active_at=0.0, fired_at=50.0, resolved_at=None,
                      value=2.0)
    found = history.episodes([resolve], [firing], now=1000.0)
    assert [(e.fingerprint, e.fired_at, e.resolved_at, e.duration_seconds) for e in found] == [
        ("f1", 100.0, 500.0, 400.0), ("f2", 50.0, None, 950.0)]
