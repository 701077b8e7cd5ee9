"""Every link of every UI page that points into the monitor answers 200: the pages, each SLO's
page, the reports, the assets, the API docs."""

from __future__ import annotations

import html
import re

import httpx

from tests.monitor.api.conftest import DASHBOARD_URL, Api

PAGES = ["/", "/ui/slos", "/ui/alerts", "/ui/silences"]


def internal_links(api: Api, text: str) -> set[str]:
    """The page's href and src values that lead into the monitor, as paths."""
    found = set()
    for value in re.findall(r'(?:href|src)="([^"]*)"', text):
        link = html.unescape(value)
        if link.startswith(api.url):
            link = link[len(api.url):] or "/"
        # The alerts' dashboard annotation is the user's Grafana (relative in the fixture).
        if link.startswith("/") and not link.startswith("//") and link != DASHBOARD_URL:
            found.add(link.split("#")[0])
    return found


def test_every_link_into_the_monitor_answers(ui: Api) -> None:
    names = [s["name"] for s in httpx.get(ui.url + "/api/v1/slos").json()["items"]]
    pages = PAGES + [f"/ui/slos/{name}" for name in names]
    links: dict[str, str] = {}
    with httpx.Client(base_url=ui.url, timeout=60) as client:
        for path in pages:
            response = client.get(path)
            assert response.status_code == 200, path
            links.update(dict.fromkeys(internal_links(ui, response.text), path))
        assert {f"/ui/slos/{name}" for name in names} <= links.keys()
        assert "/ui/silences" in links and "/ui/static/ui.js" in links
        broken = {link: (client.get(link).status_code, on) for link, on in links.items()}
    assert {link: found for link, found in broken.items() if found[0] != 200} == {}


def test_the_served_report_links_the_slos_ui_page(ui: Api) -> None:
    report = httpx.get(ui.url + "/api/v1/slos/ttft/report", params={"format": "html"},
                       timeout=60)
    assert report.status_code == 200
    link = re.search(r'<a id="ui-link" href="([^"]+)">', report.text)
    assert link and link.group(1) == "/ui/slos/ttft"  # relative: the monitor that served it
    page = httpx.get(ui.url + link.group(1), timeout=30)
    assert page.status_code == 200 and "<title>SLO ttft · inferwatch</title>" in page.text
