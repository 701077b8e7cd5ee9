"""The SLO report as one self-contained HTML page: header, alert windows, three plots.

Nothing is fetched: plots are SVG in ``data:`` URLs and the page's Content-Security-Policy
allows no other source, so it renders offline, saved to disk or mailed. All text from the SLO
(name, description, service, SLI) is escaped. A small inline script (allowed by its hash,
nothing else may run) counts the plots that rendered into ``data-plots-rendered`` on
``<body>``, for a browser test to read.
"""

from __future__ import annotations

import base64
import hashlib
import math
from datetime import UTC, datetime
from html import escape
from typing import Final
from urllib.parse import quote

from monitor.slo.durations import format_duration
from monitor.slo.report_model import SloReport, WindowBurnSeries
from monitor.slo.report_plots import SLI_FLOOR_BUDGETS, render_plots

__all__ = ["render_html"]

_SCRIPT: Final = """
window.addEventListener("load", () => {
  let rendered = 0;
  for (const figure of document.querySelectorAll("figure[data-plot]")) {
    const svg = figure.querySelector("svg");
    const img = figure.querySelector("img");
    const box = svg ? svg.getBBox() : null;
    if (box ? box.width > 0 && box.height > 0
            : img !== null && img.complete && img.naturalWidth > 0) {
      rendered += 1;
    }
  }
  document.body.dataset.plotsRendered = String(rendered);
});
"""

_STYLE: Final = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1040px;
       color: #222; padding: 0 1rem; }
h1 { margin-bottom: 0.2rem; }
.description { color: #555; margin-top: 0; }
dl.summary { display: grid; grid-template-columns: max-content 1fr; gap: 0.25rem 1.5rem; }
dl.summary dt { font-weight: 600; }
dl.summary dd { margin: 0; }
.met { color: #1a7f37; font-weight: 700; }
.not-met { color: #c62828; font-weight: 700; }
.no-data { color: #757575; font-weight: 700; }
table { border-collapse: collapse; margin: 1rem 0; }
th, td { border: 1px solid #ddd; padding: 0.3rem 0.7rem; text-align: right; }
th:first-child, td:first-child { text-align: left; }
figure { margin: 1.5rem 0; }
figure img { width: 100%; height: auto; }
figcaption { color: #555; font-size: 0.9rem; }
"""

_PLOT_CAPTIONS: Final = {
    "sli": "SLI per step (good events over all events in the step) against the objective; "
           f"grey: no data. The axis stops {SLI_FLOOR_BUDGETS} error budgets below the "
           "objective: deeper steps leave the plot.",
    "budget": "Error budget remaining, cumulated from the start of the range: 1 - bad / "
              "(error budget x events) so far. Below 0 the range overspent its budget.",
    "burn": "Burn rate over each alert window's long window (1 = spending the budget exactly "
            "at the pace that lasts the period); dashed: the alert factors; shaded: where a "
            "condition held (long and short window above the factor).",
}


def render_html(report: SloReport, ui_url: str | None = None) -> str:
    """The report page; a report without events renders too (its plots say "no data").

    ``ui_url`` links the SLO's page in the monitor's web UI: "" for a link relative to the
    server (the monitor serving the report), a base URL for a page written elsewhere, None
    for no link. A link fetches nothing, so the CSP stays as it is."""
    plots = render_plots(report)
    figures = "\n".join(_figure(name, svg, _PLOT_CAPTIONS[name], _alt(name, report))
                        for name, svg in plots.items())
    script_hash = base64.b64encode(hashlib.sha256(_SCRIPT.encode()).digest()).decode()
    policy = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
              f"script-src 'sha256-{script_hash}'; base-uri 'none'; form-action 'none'")
    title = escape(f"SLO {report.slo.name}: {_text_verdict(report)}")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{policy}\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>{title}</title>\n<style>{_STYLE}</style>\n<script>{_SCRIPT}</script>\n"
        f"</head>\n<body>\n{_header(report)}\n{_warnings(report)}{_ui_link(report, ui_url)}"
        f"{_windows_table(report)}\n{figures}\n"
        "</body>\n</html>\n")


def _header(report: SloReport) -> str:
    slo, totals = report.slo, report.totals
    rows = [
        ("Service", escape(slo.service)),
        ("SLI", escape(slo.sli)),
        ("Objective", escape(f"{_percent(slo.objective)} over {slo.period} "
                             f"({slo.budgeting})")),
        ("Range", escape(f"{_time(report.start)} to {_time(report.end)} "
                         f"({format_duration(report.end - report.start)}, "
                         f"steps of {format_duration(report.step_seconds)})")),
        ("Verdict", _verdict(report)),
        ("SLI over the range", escape(_percent(totals.sli))),
        ("Budget remaining", escape(f"{_percent(totals.budget_remaining, 1)} (consumed "
                                    f"{_percent(totals.budget_consumed, 1)})")),
        ("Budget outlook", _outlook(report)),
        (f"{slo.event_unit.capitalize()}", escape(
            f"{_count(totals.events)} ({_count(totals.bad)} bad, "
            f"{_count(totals.allowed_bad)} allowed)")),
    ]
    items = "\n".join(f"<dt>{name}</dt><dd>{value}</dd>" for name, value in rows)
    description = (f"<p class=\"description\">{escape(slo.description)}</p>\n"
                   if slo.description else "")
    return (f"<header>\n<h1>SLO report: {escape(slo.name)}</h1>\n{description}"
            f"<dl class=\"summary\">\n{items}\n</dl>\n</header>")


def _warnings(report: SloReport) -> str:
    """Why the SLI is only a bound (issue 21): said before any number is read."""
    if not report.warnings:
        return ""
    items = "\n".join(f"<li>{escape(w)}</li>" for w in report.warnings)
    return f"<ul class=\"warnings\" id=\"warnings\">\n{items}\n</ul>\n"


def _ui_link(report: SloReport, ui_url: str | None) -> str:
    if ui_url is None:
        return ""
    href = f"{ui_url.rstrip('/')}/ui/slos/{quote(report.slo.name, safe='')}"
    return (f"<p class=\"ui-link\"><a id=\"ui-link\" href=\"{escape(href)}\">This SLO in the "
            "monitor's web UI</a>: its state now, alerts and alert conditions</p>\n")


def _outlook(report: SloReport) -> str:
    f = report.forecast
    tte = f.time_to_exhaustion_seconds
    exhaustion = ("unknown" if math.isnan(tte) else "never at this rate" if math.isinf(tte)
                  else "now" if tte == 0 else f"in {format_duration(max(round(tte), 1))}")
    text = (f"{f.state.value.replace('_', ' ')}: exhausted {exhaustion} at the current burn; "
            f"{_percent(f.budget_at_period_end, 1)} left at the period's end "
            f"({_time(f.period_end)}) at the sustained burn")
    return f"<span data-budget-state=\"{f.state.value}\">{escape(text)}</span>"


def _verdict(report: SloReport) -> str:
    css = {"met": "met", "not met": "not-met", "no data": "no-data"}
    text = _text_verdict(report)
    return f"<span class=\"{css[text]}\" data-verdict=\"{css[text]}\">{text}</span>"


def _text_verdict(report: SloReport) -> str:
    met = report.totals.objective_met
    return "no data" if met is None else "met" if met else "not met"


def _windows_table(report: SloReport) -> str:
    if not report.burn_rates:
        return "<p>This SLO has no burn-rate alert windows.</p>"
    head = ("<tr><th>Window (long/short)</th><th>Severity</th><th>Factor</th>"
            "<th>Highest long-window burn rate</th><th>Condition held</th>"
            "<th>Periods</th></tr>")
    rows = "\n".join(_window_row(report, w) for w in report.burn_rates)
    return (f"<section>\n<h2>Alert windows</h2>\n<table>\n<thead>{head}</thead>\n"
            f"<tbody>\n{rows}\n</tbody>\n</table>\n</section>")


def _window_row(report: SloReport, window: WindowBurnSeries) -> str:
    intervals = [i for i in report.burn_intervals if i.window == window.window]
    held = sum(i.end - i.start for i in intervals)
    finite = [v for v in window.long if not math.isnan(v)]
    peak = f"{max(finite):.3g}" if finite else "no data"
    cells = (window.window, window.severity, f"{window.factor:.3g}", peak,
             format_duration(held) if held else "never", str(len(intervals)))
    return "<tr>" + "".join(f"<td>{escape(c)}</td>" for c in cells) + "</tr>"


def _figure(name: str, svg: str, caption: str, alt: str) -> str:
    data = base64.b64encode(svg.encode()).decode()
    return (f"<figure data-plot=\"{name}\">\n"
            f"<img src=\"data:image/svg+xml;base64,{data}\" alt=\"{escape(alt)}\">\n"
            f"<figcaption>{escape(caption)}</figcaption>\n</figure>")


def _alt(name: str, report: SloReport) -> str:
    span = (f"from {_time(report.start)} to {_time(report.end)} in steps of "
            f"{format_duration(report.step_seconds)}")
    if not report.totals.events:
        return f"Plot of {name}: no data {span}."
    if name == "sli":
        finite = [v for v in report.series.sli if not math.isnan(v)]
        lowest = _percent(min(finite)) if finite else "none"
        return (f"SLI per step {span} against the {_percent(report.slo.objective)} "
                f"objective; lowest step {lowest}.")
    if name == "budget":
        return (f"Error budget remaining {span}, ending at "
                f"{_percent(report.totals.budget_remaining, 1)}.")
    windows = ", ".join(f"{w.window} (factor {w.factor:.3g})" for w in report.burn_rates)
    return (f"Burn rates {span} over the long windows of {windows or 'no alert windows'}; "
            f"{len(report.burn_intervals)} periods where a condition held.")


def _percent(value: float, digits: int = 4) -> str:
    if math.isnan(value):
        return "n/a"
    return f"{value * 100:.{digits}f}".rstrip("0").rstrip(".") + "%"


def _count(value: float) -> str:
    # Allowed bad events are a product of floats: 144.00000000000014 reads as 144.
    return f"{value:,.0f}" if abs(value - round(value)) < 1e-6 else f"{value:,.2f}"


def _time(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M UTC")
