"""Plain inline SVG, computed on the server: a sparkline, a line plot with its axis range, and
a timeline of intervals (alert firings) per lane."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime
from html import escape

Point = tuple[float, float | None]


def _finite(points: Sequence[Point]) -> list[tuple[float, float]]:
    return [(t, v) for t, v in points if v is not None and math.isfinite(v)]


def _path(points: list[tuple[float, float]], width: float, height: float,
          low: float, high: float) -> str:
    t0, t1 = points[0][0], points[-1][0]
    span_t = (t1 - t0) or 1.0
    span_v = (high - low) or 1.0
    return " ".join(f"{'M' if k == 0 else 'L'}{(t - t0) / span_t * width:.1f},"
                    f"{height - (v - low) / span_v * height:.1f}"
                    for k, (t, v) in enumerate(points))


def sparkline(points: Sequence[Point], width: int = 120, height: int = 24) -> str:
    """A small line over the finite values; an empty string when there are fewer than two."""
    kept = _finite(points)
    if len(kept) < 2:
        return ""
    values = [v for _, v in kept]
    low, high = min(min(values), 0.0), max(max(values), 1.0)
    return (f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} '
            f'{height}" role="img" aria-label="sparkline"><path d="'
            f'{_path(kept, width, height, low, high)}"/></svg>')


def line_plot(points: Sequence[Point], label: str, width: int = 720,
              height: int = 200) -> str:
    """A line plot with a zero line and its low/high values written at the left."""
    kept = _finite(points)
    if len(kept) < 2:
        return f'<p class="empty">{label}: no data in the range</p>'
    values = [v for _, v in kept]
    low, high = min(min(values), 0.0), max(max(values), 1.0)
    zero = height - (0.0 - low) / ((high - low) or 1.0) * height
    return (f'<svg class="plot" width="{width + 60}" height="{height + 10}" viewBox="-60 -5 '
            f'{width + 60} {height + 10}" role="img" aria-label="{label}">'
            f'<text x="-5" y="5" text-anchor="end">{high:.3g}</text>'
            f'<text x="-5" y="{height}" text-anchor="end">{low:.3g}</text>'
            f'<line class="zero" x1="0" x2="{width}" y1="{zero:.1f}" y2="{zero:.1f}"/>'
            f'<path d="{_path(kept, width, height, low, high)}"/></svg>')


Lane = tuple[str, str, Sequence[tuple[float, float | None]]]  # label, class, (from, to|None)
LANE_HEIGHT = 18
LANE_LABEL_WIDTH = 110


def timeline(lanes: Sequence[Lane], start: float, end: float, label: str,
             width: int = 720) -> str:
    """A strip per lane over [start, end] with a bar per interval (an open one runs to the
    end), clipped to the range and at least 2 px wide so a short firing stays visible."""
    if not lanes:
        return ""
    span = (end - start) or 1.0
    height = LANE_HEIGHT * len(lanes)
    parts = [f'<svg class="timeline" width="{width + LANE_LABEL_WIDTH}" height="{height + 16}"'
             f' viewBox="-{LANE_LABEL_WIDTH} 0 {width + LANE_LABEL_WIDTH} {height + 16}"'
             f' role="img" aria-label="{escape(label)}">']
    for k, (name, kind, intervals) in enumerate(lanes):
        y = k * LANE_HEIGHT
        parts.append(f'<text x="-6" y="{y + 13}" text-anchor="end">{escape(name)}</text>'
                     f'<rect class="lane" x="0" y="{y + 2}" width="{width}" '
                     f'height="{LANE_HEIGHT - 4}"/>')
        for begin, finish in intervals:
            left = (min(max(begin, start), end) - start) / span * width
            right = (min(max(end if finish is None else finish, start), end) - start) \
                / span * width
            left = min(left, width - 2.0)  # one just begun still shows, inside the lane
            parts.append(f'<rect class="episode {escape(kind)}" x="{left:.1f}" y="{y + 2}" '
                         f'width="{max(right - left, 2.0):.1f}" height="{LANE_HEIGHT - 4}">'
                         f'<title>{escape(name)}: {_utc(begin)} to '
                         f'{"now" if finish is None else _utc(finish)}</title></rect>')
    parts.append(f'<text class="axis" x="0" y="{height + 13}">{_utc(start)}</text>'
                 f'<text class="axis" x="{width}" y="{height + 13}" text-anchor="end">'
                 f'{_utc(end)}</text></svg>')
    return "".join(parts)


def _utc(unix_seconds: float) -> str:
    return datetime.fromtimestamp(unix_seconds, UTC).strftime("%Y-%m-%d %H:%M UTC")
