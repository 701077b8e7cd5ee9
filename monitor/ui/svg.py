"""Plain inline SVG, computed on the server: a sparkline, a line plot with its axis range, and
a timeline of intervals (alert firings) per lane, the run pages' charts (several series,
thresholds and markers) and grouped bars."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime
from dataclasses import dataclass
from html import escape

Point = tuple[float, float | None]


def _finite(points: Sequence[Point]) -> list[tuple[float, float]]:
    return [(t, v) for t, v in points if v is not None and math.isfinite(v)]


def _path(points: list[tuple[float, float]], width: float, height: float,
          low: float, high: float, x_range: tuple[float, float] | None = None) -> str:
    t0, t1 = x_range or (points[0][0], points[-1][0])
    span_t = (t1 - t0) or 1.0
    span_v = (high - low) or 1.0
    return " ".join(f"{'M' if k == 0 else 'L'}{(t - t0) / span_t * width:.1f},"
                    f"{height - (v - low) / span_v * height:.1f}"
                    for k, (t, v) in enumerate(points))


def sparkline(points: Sequence[Point], width: int = 120, height: int = 24,
              title: str = "") -> str:
    """A small line over the finite values (``title`` shown on hover); an empty string when
    there are fewer than two."""
    kept = _finite(points)
    if len(kept) < 2:
        return ""
    values = [v for _, v in kept]
    low, high = min(min(values), 0.0), max(max(values), 1.0)
    hover = f"<title>{escape(title)}</title>" if title else ""
    return (f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} '
            f'{height}" role="img" aria-label="sparkline">{hover}<path d="'
            f'{_path(kept, width, height, low, high)}"/></svg>')


def line_plot(points: Sequence[Point], label: str, width: int = 720,
              height: int = 200, x_range: tuple[float, float] | None = None) -> str:
    """A line plot with a zero line and its low/high values written at the left; over
    ``x_range`` (Unix seconds: its start and end written under the axis, and the root's
    ``data-start``/``data-end``) when given, else from the first value to the last."""
    kept = _finite(points)
    if len(kept) < 2:
        return f'<p class="empty">{label}: no data in the range</p>'
    values = [v for _, v in kept]
    low, high = min(min(values), 0.0), max(max(values), 1.0)
    zero = height - (0.0 - low) / ((high - low) or 1.0) * height
    below = 18 if x_range else 0
    axis = ""
    if x_range:
        axis = (f'<text class="axis" x="0" y="{height + 15}">{_utc(x_range[0])}</text>'
                f'<text class="axis" x="{width}" y="{height + 15}" text-anchor="end">'
                f'{_utc(x_range[1])}</text>')
    span = f' data-start="{x_range[0]!r}" data-end="{x_range[1]!r}"' if x_range else ""
    return (f'<svg class="plot" width="{width + 60}" height="{height + 10 + below}" '
            f'viewBox="-60 -5 {width + 60} {height + 10 + below}" role="img" '
            f'aria-label="{label}"{span}>'
            f'<text x="-5" y="5" text-anchor="end">{high:.3g}</text>'
            f'<text x="-5" y="{height}" text-anchor="end">{low:.3g}</text>'
            f'<line class="zero" x1="0" x2="{width}" y1="{zero:.1f}" y2="{zero:.1f}"/>'
            f'<path d="{_path(kept, width, height, low, high, x_range)}"/>{axis}</svg>')


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
# Charts of the run pages: several series on shared axes with ticks and units, threshold
# lines across and labelled vertical markers; grouped bars. Colours are presentation
# attributes (not the stylesheet's .plot rules), one per series in this order.
COLOURS = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2")
MARKER_COLOURS = {"capacity": "#ea580c", "knee": "#9333ea", "saturation": "#dc2626"}
_MARGIN_LEFT, _MARGIN_TOP, _MARGIN_BOTTOM = 64, 14, 58


@dataclass(frozen=True, slots=True)
class Series:
    label: str
    points: Sequence[Point]
    dashed: bool = False


@dataclass(frozen=True, slots=True)
class Rule:
    """A labelled line across the plot: a threshold at y, or a marker at x; ``kind`` names it
    (its class and, for markers, its colour)."""

    value: float
    label: str
    kind: str


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2 or 5 times a power of ten apart) covering [low, high]."""
    span = high - low
    if not math.isfinite(span) or span <= 0:
        return [low]
    raw = span / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(low / step + 1e-9) * step
    last = math.ceil(high / step - 1e-9) * step
    return [first + k * step for k in range(round((last - first) / step) + 1)]


def _tick(value: float) -> str:
    return f"{value:.6g}"


def log_ticks(low: float, high: float) -> list[float]:
    """Ticks at 1, 2 and 5 times the powers of ten, from the decade at or below ``low`` to
    the one at or above ``high`` (both > 0)."""
    first = math.floor(math.log10(low))
    last = max(math.ceil(math.log10(high)), first + 1)
    return [m * 10.0 ** e for e in range(first, last + 1) for m in (1, 2, 5)
            if m == 1 or e < last]


def chart(series: Sequence[Series], label: str, x_label: str, y_label: str, *,
          markers: Sequence[Rule] = (), thresholds: Sequence[Rule] = (), log_y: bool = False,
          width: int = 480, height: int = 200) -> str:
    """A line chart over x from 0, and y from 0 (or on a log scale, from the decade below the
    least value) to round ticks past the data, thresholds and markers. The root carries its
    x domain and plot width (``data-x-min``, ``data-x-max``, ``data-width``) so a marker's
    position can be checked against its value."""
    kept = [(s, [(x, y) for x, y in _finite(s.points) if y > 0 or not log_y])
            for s in series]
    xs = [x for _, pts in kept for x, _ in pts] + [m.value for m in markers]
    ys = [y for _, pts in kept for _, y in pts] + [t.value for t in thresholds
                                                   if t.value > 0 or not log_y]
    if not any(pts for _, pts in kept):
        return f'<p class="empty">{escape(label)}: no data</p>'
    x_ticks = nice_ticks(min(0.0, *xs), max(xs))
    y_ticks = log_ticks(min(ys), max(ys)) if log_y else \
        nice_ticks(min(0.0, *ys), max(ys) if max(ys) > 0 else 1.0)
    x0, x1 = x_ticks[0], x_ticks[-1]
    scale = math.log10 if log_y else float
    y0, y1 = scale(y_ticks[0]), scale(y_ticks[-1])

    def px(x: float) -> float:
        return (x - x0) / ((x1 - x0) or 1.0) * width

    def py(y: float) -> float:
        return height - (scale(y) - y0) / ((y1 - y0) or 1.0) * height

    parts = [f'<svg class="chart" width="{width + _MARGIN_LEFT + 16}" '
             f'height="{height + _MARGIN_TOP + _MARGIN_BOTTOM + 16 * _legend_rows(series)}" '
             f'role="img" aria-label="{escape(label)}" data-x-min="{_tick(x0)}" '
             f'data-x-max="{_tick(x1)}" data-width="{width}" font-size="11" '
             f'font-family="system-ui, sans-serif">',
             f'<g transform="translate({_MARGIN_LEFT},{_MARGIN_TOP})">',
             f'<rect width="{width}" height="{height}" fill="#fff" stroke="#d1d5db"/>']
    for t in x_ticks:
        parts.append(f'<line x1="{px(t):.1f}" x2="{px(t):.1f}" y1="0" y2="{height}" '
                     f'stroke="#f3f4f6"/><text x="{px(t):.1f}" y="{height + 14}" '
                     f'text-anchor="middle" fill="#555">{_tick(t)}</text>')
    for t in y_ticks:
        parts.append(f'<line x1="0" x2="{width}" y1="{py(t):.1f}" y2="{py(t):.1f}" '
                     f'stroke="#f3f4f6"/><text x="-6" y="{py(t) + 4:.1f}" text-anchor="end" '
                     f'fill="#555">{_tick(t)}</text>')
    parts.append(f'<text x="{width / 2}" y="{height + 30}" text-anchor="middle" '
                 f'fill="#222">{escape(x_label)}</text>'
                 f'<text transform="translate(-48,{height / 2}) rotate(-90)" '
                 f'text-anchor="middle" fill="#222">{escape(y_label)}</text>')
    for rule in thresholds:
        y = py(rule.value)
        parts.append(f'<g class="threshold {escape(rule.kind)}" data-value="{rule.value!r}">'
                     f'<line x1="0" x2="{width}" y1="{y:.1f}" y2="{y:.1f}" '
                     f'stroke="#6b7280" stroke-dasharray="6 3"/><text x="{width - 4}" '
                     f'y="{y - 4:.1f}" text-anchor="end" fill="#374151">'
                     f'{escape(rule.label)}</text></g>')
    for k, m in enumerate(markers):
        colour = MARKER_COLOURS.get(m.kind, "#374151")
        parts.append(f'<g class="marker {escape(m.kind)}" data-value="{m.value!r}">'
                     f'<line x1="{px(m.value):.1f}" x2="{px(m.value):.1f}" y1="0" '
                     f'y2="{height}" stroke="{colour}" stroke-width="1.5"/><text '
                     f'{_beside(px(m.value), width)} y="{12 + 13 * k}" fill="{colour}">'
                     f'{escape(m.label)}</text></g>')
    for k, (s, pts) in enumerate(kept):
        colour = COLOURS[k % len(COLOURS)]
        dash = ' stroke-dasharray="4 3"' if s.dashed else ""
        if len(pts) >= 2:
            d = " ".join(f"{'M' if j == 0 else 'L'}{px(x):.1f},{py(y):.1f}"
                         for j, (x, y) in enumerate(pts))
            parts.append(f'<path d="{d}" fill="none" stroke="{colour}" stroke-width="1.5"'
                         f'{dash}/>')
        parts.extend(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.5" fill="{colour}">'
                     f'<title>{escape(s.label)}: {_tick(y)} at {_tick(x)}</title></circle>'
                     for x, y in pts)
    parts.append(_legend([s.label for s in series], [s.dashed for s in series],
                         height + 46, width))
    parts.append("</g></svg>")
    return "".join(parts)


def _beside(x: float, width: float) -> str:
    """A marker label's position: right of its line, or left of it in the plot's right half
    (where it would run past the edge)."""
    return f'x="{x + 3:.1f}"' if x < width / 2 else f'x="{x - 3:.1f}" text-anchor="end"'


def _short(value: float) -> str:
    """A bar's value: 3 significant digits, whole numbers from 1,000 up (no exponent)."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def _legend_rows(series: Sequence[object], per_row: int = 4) -> int:
    return max(1, math.ceil(len(series) / per_row))


def _legend(labels: Sequence[str], dashed: Sequence[bool], top: float, width: float,
            per_row: int = 4) -> str:
    step = width / per_row
    parts = ['<g class="legend">']
    for k, text in enumerate(labels):
        x, y = (k % per_row) * step, top + 16 * (k // per_row)
        dash = ' stroke-dasharray="4 3"' if dashed[k] else ""
        parts.append(f'<line x1="{x:.1f}" x2="{x + 18:.1f}" y1="{y - 4}" y2="{y - 4}" '
                     f'stroke="{COLOURS[k % len(COLOURS)]}" stroke-width="2"{dash}/>'
                     f'<text x="{x + 22:.1f}" y="{y}" fill="#222">{escape(text)}</text>')
    parts.append("</g>")
    return "".join(parts)


def bars(groups: Sequence[tuple[str, Sequence[float | None]]], series: Sequence[str],
         label: str, y_label: str, *, width: int = 300, height: int = 140) -> str:
    """Grouped bars: one group per (name, values), one bar per series in each, its value
    written above it (a missing or non-finite value leaves a gap)."""
    values = [v for _, vs in groups for v in vs if v is not None and math.isfinite(v)]
    if not values:
        return f'<p class="empty">{escape(label)}: no data</p>'
    ticks = nice_ticks(min(0.0, *values), max(values) if max(values) > 0 else 1.0)
    y0, y1 = ticks[0], ticks[-1]

    def py(y: float) -> float:
        return height - (y - y0) / ((y1 - y0) or 1.0) * height

    slot = width / max(1, len(groups))
    bar = slot * 0.8 / max(1, len(series))
    parts = [f'<svg class="chart bars" width="{width + _MARGIN_LEFT + 16}" '
             f'height="{height + _MARGIN_TOP + 52}" role="img" aria-label="{escape(label)}" '
             f'font-size="11" font-family="system-ui, sans-serif">',
             f'<g transform="translate({_MARGIN_LEFT},{_MARGIN_TOP})">',
             f'<rect width="{width}" height="{height}" fill="#fff" stroke="#d1d5db"/>']
    for t in ticks:
        parts.append(f'<text x="-6" y="{py(t) + 4:.1f}" text-anchor="end" fill="#555">'
                     f'{_tick(t)}</text>')
    parts.append(f'<text transform="translate(-48,{height / 2}) rotate(-90)" '
                 f'text-anchor="middle" fill="#222">{escape(y_label)}</text>')
    for g, (name, vs) in enumerate(groups):
        left = g * slot + slot * 0.1
        parts.append(f'<text x="{g * slot + slot / 2:.1f}" y="{height + 14}" '
                     f'text-anchor="middle" fill="#222">{escape(name)}</text>')
        for k, v in enumerate(vs):
            if v is None or not math.isfinite(v):
                continue
            x, top = left + k * bar, min(py(v), py(0.0))
            parts.append(f'<rect class="bar" data-series="{escape(series[k])}" '
                         f'data-value="{v!r}" x="{x:.1f}" y="{top:.1f}" width="{bar:.1f}" '
                         f'height="{abs(py(0.0) - py(v)):.1f}" '
                         f'fill="{COLOURS[k % len(COLOURS)]}"><title>{escape(series[k])} '
                         f'{escape(name)}: {v:.4g}</title></rect><text x="{x + bar / 2:.1f}" '
                         f'y="{top - 2:.1f}" text-anchor="middle" font-size="9" fill="#374151">'
                         f'{_short(v)}</text>')
    parts.append(_legend(series, [False] * len(series), height + 34, width))
    parts.append("</g></svg>")
    return "".join(parts)
