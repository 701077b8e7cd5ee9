"""The run pages' SVG charts: round ticks, log ticks, markers placed at their values, labels
escaped, and a sentence instead of an empty plot."""

from __future__ import annotations

import re

import pytest

from monitor.ui import svg


def test_ticks_are_round_and_cover_the_range() -> None:
    assert svg.nice_ticks(0, 16) == [0, 5, 10, 15, 20]
    assert svg.nice_ticks(0, 0.93) == pytest.approx([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    assert svg.log_ticks(38.6, 7978.7) == [10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000]
    assert svg.log_ticks(15, 19) == [10, 20, 50, 100]


@pytest.mark.parametrize("log_y", [False, True])
def test_a_marker_sits_at_its_value_on_the_x_axis(log_y: bool) -> None:
    chart = svg.chart([svg.Series("p99", [(1, 10), (2, 20), (16, 900)])], "latency",
                      "rate (req/s)", "ms", markers=[svg.Rule(8.23, "max 8.23", "capacity")],
                      thresholds=[svg.Rule(200, "SLO", "slo")], log_y=log_y, width=400)
    assert 'data-x-min="0" data-x-max="20" data-width="400"' in chart
    found = re.search(r'<g class="marker capacity" data-value="8.23"><line x1="([\d.]+)"', chart)
    assert found and float(found.group(1)) == pytest.approx(8.23 / 20 * 400, abs=0.05)
    assert '<g class="threshold slo" data-value="200">' in chart


def test_labels_are_escaped_and_an_empty_chart_is_a_sentence() -> None:
    chart = svg.chart([svg.Series("a<b", [(0, 1), (1, 2)])], "TTFT <= 200 ms", "x", "y")
    assert "a&lt;b" in chart and 'aria-label="TTFT &lt;= 200 ms"' in chart
    assert svg.chart([svg.Series("s", [(0, None)])], "<x>", "x", "y") == \
        '<p class="empty">&lt;x&gt;: no data</p>'
    assert svg.bars([("median", [None, None])], ["b", "c"], "m", "ms") == \
        '<p class="empty">m: no data</p>'


def test_bars_carry_their_values_and_all_zero_bars_get_a_unit_axis() -> None:
    bars = svg.bars([("median", [0.0, 0.1]), ("mean", [0.0, 0.1])], ["baseline", "canary"],
                    "error rate", "%")
    assert bars.count('<rect class="bar"') == 4
    assert 'data-series="canary" data-value="0.1"' in bars
    zero = svg.bars([("median", [0.0, 0.0])], ["baseline", "canary"], "zero", "%")
    assert ">1</text>" in zero and "e-12" not in zero


def test_a_line_plot_over_a_range_places_points_on_it_and_writes_its_ends() -> None:
    """The SLO page's charts span from the first event to now (issue 30): a point half way
    through the range sits half way across, and the range's ends are written under the axis."""
    plot = svg.line_plot([(1_800_000_300.0, 0.5), (1_800_000_600.0, 1.0)], "SLI", width=600,
                         x_range=(1_800_000_000.0, 1_800_000_600.0))
    assert 'data-start="1800000000.0" data-end="1800000600.0"' in plot
    assert re.search(r'<path d="M300\.0,[\d.]+ L600\.0,', plot)
    assert ">2027-01-15 08:00 UTC</text>" in plot and ">2027-01-15 08:10 UTC</text>" in plot
