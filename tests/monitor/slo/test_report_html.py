"""The SLO report page: three plots, escaped SLO text, nothing fetched; and, in a real headless
Chromium over HTTP, the plots render and the page is not blank."""

from __future__ import annotations

import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from matplotlib import image

from monitor.slo.report import SloReport, build_report
from monitor.slo.report_html import render_html
from monitor.slo.source import MinuteArraySource
from monitor.slo.spec import Slo
from tests.asgi_thread import serving
from tests.browser import dump_dom, screenshot

T0 = 1_767_225_600  # 2026-01-01T00:00:00Z
DAY = 1440
HOSTILE = '<script>alert("owned")</script><img src=x onerror=alert(1)> & "quotes"'


def make(**fields: Any) -> Slo:
    spec: dict[str, Any] = {"name": "chat-availability", "objective": 0.999,
                            "sli": {"kind": "availability"}, "description": HOSTILE}
    spec.update(fields)
    return Slo.model_validate(spec)


def sample_report(slo: Slo, per_minute: float = 200.0) -> SloReport:
    """Four days (one of them the lead-in) with a 45-minute partial outage and a 90-minute gap."""
    rng = np.random.default_rng(5)
    num_minutes = 4 * DAY
    total = rng.poisson(per_minute, num_minutes).astype(float) if per_minute else np.zeros(
        num_minutes)
    good = total - rng.binomial(total.astype(int), 0.0004)
    good[3 * DAY + 600:3 * DAY + 645] *= 0.7
    has = np.ones(num_minutes, dtype=np.bool_) if per_minute else np.zeros(num_minutes, bool)
    has[2 * DAY:2 * DAY + 90] = False
    total[~has] = good[~has] = 0.0
    source = MinuteArraySource(T0, {slo.name: (good, total, has)})
    end = T0 + num_minutes * 60
    return build_report(slo, source, end - 3 * 86400, end, now=end)


class _Figures(HTMLParser):
    """The page's figures: data-plot name, img alt and caption of each."""

    def __init__(self) -> None:
        super().__init__()
        self.figures: list[dict[str, str]] = []
        self._in_caption = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if tag == "figure":
            self.figures.append({"plot": values.get("data-plot", ""), "caption": ""})
        elif tag == "img" and self.figures:
            self.figures[-1].update(alt=values.get("alt", ""), src=values.get("src", ""))
        self._in_caption = tag == "figcaption"

    def handle_data(self, data: str) -> None:
        if self._in_caption:
            self.figures[-1]["caption"] += data


def figures(page: str) -> list[dict[str, str]]:
    parser = _Figures()
    parser.feed(page)
    return parser.figures


@pytest.fixture(scope="module")
def page() -> str:
    return render_html(sample_report(make(service='<b>"svc"</b>')))


def test_the_page_has_the_three_plots_with_alt_text_and_captions(page: str) -> None:
    found = figures(page)
    assert [f["plot"] for f in found] == ["sli", "budget", "burn"]
    for figure in found:
        assert figure["src"].startswith("data:image/svg+xml;base64,")
        assert len(figure["alt"]) > 40 and len(figure["caption"]) > 40
    assert "against the 99.9% objective" in found[0]["alt"]
    assert "<th>Window (long/short)</th>" in page and "<td>1h/5m</td>" in page


def test_hostile_slo_text_is_escaped(page: str) -> None:
    assert "<script>alert" not in page and "<img src=x" not in page and "<b>" not in page
    assert ("&lt;script&gt;alert(&quot;owned&quot;)&lt;/script&gt;&lt;img src=x "
            "onerror=alert(1)&gt; &amp; &quot;quotes&quot;") in page
    assert "&lt;b&gt;&quot;svc&quot;&lt;/b&gt;" in page


def test_the_page_fetches_nothing(page: str) -> None:
    assert "http://" not in page and "https://" not in page
    assert not re.search(r"""(src|href)=["'](?!data:)""", page)
    assert "default-src 'none'" in page  # its CSP: only data: images and its own script


def test_a_report_without_events_still_renders() -> None:
    empty = render_html(sample_report(make(), per_minute=0.0))
    assert [f["plot"] for f in figures(empty)] == ["sli", "budget", "burn"]
    assert 'data-verdict="no-data"' in empty
    assert "Plot of sli: no data" in empty


@pytest.fixture(scope="module")
def served(page: str) -> Iterator[str]:
    app = FastAPI()

    @app.get("/report", response_class=HTMLResponse)
    def report() -> str:
        return page

    with serving(app) as url:
        yield f"{url}/report"


@pytest.mark.integration
def test_chromium_runs_the_pages_check_and_finds_three_rendered_plots(served: str) -> None:
    dom = dump_dom(served)
    body = re.search(r"<body[^>]*>", dom)
    assert body is not None and 'data-plots-rendered="3"' in body.group(0), body
    assert "<script>alert" not in dom  # the hostile description stayed text


@pytest.mark.integration
def test_chromium_screenshot_of_the_page_is_not_blank(served: str, tmp_path: Path) -> None:
    png = screenshot(served, tmp_path / "report.png", width=1280, height=2000)
    pixels = image.imread(str(png))[..., :3]
    assert pixels.shape[:2] == (2000, 1280)
    inked = (pixels.min(axis=2) < 0.8).mean()  # text, lines and fills against white
    assert 0.01 < inked < 0.6, inked
    assert pixels.std() > 0.05


def test_a_ui_url_links_the_slos_ui_page_and_keeps_the_csp() -> None:
    report = sample_report(make())
    name = report.slo.name
    linked = render_html(report, ui_url="https://monitor.example:8080/")
    assert f'<a id="ui-link" href="https://monitor.example:8080/ui/slos/{name}">' in linked
    relative = render_html(report, ui_url="")
    assert f'<a id="ui-link" href="/ui/slos/{name}">' in relative
    assert 'id="ui-link"' not in render_html(report)
    policies = [re.findall(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page)
                for page in (linked, relative, render_html(report))]
    assert policies[0] == policies[1] == policies[2] and len(policies[0]) == 1
