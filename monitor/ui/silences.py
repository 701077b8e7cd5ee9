"""The silences page, /ui/silences: the configured Alertmanager's silences (the service's
``alerting.alertmanager_urls``), each with the alerts of the book it matches and a link to it
in Alertmanager's own UI. An Alertmanager that is missing, down or erring is a message on a
200 page, never a 500: the page is read when something is wrong."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from monitor.alerting.alertmanager import AlertmanagerClient, AlertmanagerError, Matcher, Silence
from monitor.alerting.book import Alert, AlertState
from monitor.api.deps import StateDep
from monitor.slo.durations import format_duration

# The page waits at most this long per Alertmanager (an HA pair: the next is asked after).
TIMEOUT_SECONDS: Final = 2.0
_STATE_ORDER: Final = {"active": 0, "pending": 1, "expired": 2}


@dataclass
class SilenceRow:
    silence: Silence
    matchers: str
    remaining: str                 # "ends in 1h59m", "starts in 10m", "ended 5m ago"
    matched: list[str]             # the book's firing or pending alerts it silences
    link: str                      # the silence in Alertmanager's UI


@dataclass
class SilencesView:
    url: str | None                # the Alertmanager that answered (or the first one tried)
    rows: list[SilenceRow]
    expired_hidden: int            # expired silences left out (without ?expired=1)
    errors: list[str]              # one per Alertmanager that failed
    answered: bool = True          # False: none answered, there is nothing to list


def matches(matcher: Matcher, labels: Mapping[str, str]) -> bool | None:
    """Alertmanager's test of one matcher: a missing label is the empty value, a regex must
    match the whole value. None when the regex is not one Python can read (RE2 differs)."""
    value = labels.get(matcher.name, "")
    if matcher.is_regex:
        try:
            hit = re.fullmatch(matcher.value, value) is not None
        except re.error:
            return None
    else:
        hit = value == matcher.value
    return hit == matcher.is_equal


def silenced(silence: Silence, alerts: Sequence[Alert]) -> list[str]:
    """The firing or pending alerts (alertname and labels) that all the matchers select; an
    unreadable regex selects nothing here."""
    live = [a for a in alerts if a.state is not AlertState.RESOLVED]
    return [" ".join([a.name, *(f"{k}={v}" for k, v in sorted(a.labels.items())
                                if k != "alertname")])
            for a in live if all(matches(m, a.labels) for m in silence.matchers)]


def remaining(silence: Silence, now: float) -> str:
    starts, ends = silence.starts_at.timestamp(), silence.ends_at.timestamp()
    if silence.state == "pending" or now < starts:
        return f"starts in {_span(starts - now)}"
    if silence.state == "expired" or ends <= now:
        return f"ended {_span(now - ends)} ago"
    return f"ends in {_span(ends - now)}"


def _span(seconds: float) -> str:
    """To the second under 10 minutes, else to the minute: "2h", not "1h59m58s"."""
    whole = round(seconds) if seconds < 600 else round(seconds / 60) * 60
    return format_duration(max(whole, 1))


def rows(silences: Sequence[Silence], url: str, alerts: Sequence[Alert], now: float
         ) -> list[SilenceRow]:
    ordered = sorted(silences, key=lambda s: (_STATE_ORDER.get(s.state, 3), s.ends_at, s.id))
    return [SilenceRow(s, " ".join(map(str, s.matchers)), remaining(s, now),
                       silenced(s, alerts), f"{url}/#/silences/{s.id}") for s in ordered]


async def fetch(urls: Sequence[str], timeout: float = TIMEOUT_SECONDS
                ) -> tuple[str | None, list[Silence] | None, list[str]]:
    """The silences of the first Alertmanager that answers (an HA pair shares them), the URL
    that answered and an error message for each that did not."""
    errors: list[str] = []
    for url in urls:
        try:
            async with AlertmanagerClient(url, timeout=timeout) as client:
                return url, await client.list_silences(), errors
        except (AlertmanagerError, ValueError) as exc:
            message = str(exc)
            errors.append(message if url.rstrip("/") in message
                          else f"Alertmanager at {url}: {message}")
    return (urls[0] if urls else None), None, errors


async def silences_view(urls: Sequence[str], alerts: Sequence[Alert], show_expired: bool,
                        now: float | None = None) -> SilencesView:
    url, found, errors = await fetch(urls)
    if url is None or found is None:
        return SilencesView(url, [], 0, errors, answered=False)
    shown = [s for s in found if show_expired or s.state != "expired"]
    return SilencesView(url, rows(shown, url.rstrip("/"), alerts,
                                  time.time() if now is None else now),
                        len(found) - len(shown), errors)


def add_routes(router: APIRouter, page: Callable[..., HTMLResponse]) -> None:
    """GET /ui/silences on the UI's router; ``page`` renders a template of the UI."""

    @router.get("/ui/silences", response_class=HTMLResponse)
    async def silence_list(state: StateDep, expired: bool = False) -> HTMLResponse:
        book = state.alerting.book.alerts() if state.alerting is not None else []
        view = await silences_view(state.config().alerting.alertmanager_urls, book, expired)
        context: dict[str, Any] = {"view": view, "show_expired": expired}
        return page("silences.html", title="Silences", **context)
