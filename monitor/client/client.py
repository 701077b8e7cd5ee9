"""``Client``: the monitor's read routes as DataFrames (see ``frames`` for the columns).

Every request has an explicit timeout; an API error body, a refused connection or a timeout
becomes a ``ClientError`` naming the route. Lists are read page by page until ``total``.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Final

import httpx
import pandas as pd

from monitor.client import frames
from monitor.client.errors import ClientError

Time = float | int | str | datetime  # unix seconds, ISO 8601, or a datetime (naive: UTC)
RUN_KINDS: Final = {"sweep": "sweeps", "canary": "canaries"}
MAX_PAGE_LIMIT: Final = 1000  # the API's largest page


def _time(value: Time | None) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return repr(aware.timestamp())
    return str(value)


def _params(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


class Client:
    """A client of ``inferwatch serve`` at ``base_url``; use it as a context manager (or call
    ``close()``). ``token`` is sent as a bearer token; ``page_limit`` is the page size of lists
    (1 to 1000)."""

    def __init__(self, base_url: str, token: str | None = None, timeout: float = 10.0,
                 page_limit: int = MAX_PAGE_LIMIT) -> None:
        if not 1 <= page_limit <= MAX_PAGE_LIMIT:
            raise ValueError(f"page_limit must be in 1..{MAX_PAGE_LIMIT}, not {page_limit}")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.base_url = base_url.rstrip("/")
        self.page_limit = page_limit
        self._http = httpx.Client(base_url=self.base_url, headers=headers,
                                  timeout=httpx.Timeout(timeout))

    def __enter__(self) -> Client:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def get(self, route: str, params: dict[str, Any] | None = None) -> Any:
        """The JSON body of GET ``route``; any failure is a ``ClientError``."""
        try:
            response = self._http.get(route, params=params)
        except httpx.HTTPError as exc:
            raise ClientError(route, None, f"no answer from {self.base_url}: {exc!r}") from None
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.is_success and body is not None:
            return body
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict) and "message" in error:
            raise ClientError(route, response.status_code, str(error["message"]),
                              error.get("code"))
        raise ClientError(route, response.status_code,
                          f"not a JSON answer: {response.text[:200]!r}")

    def pages(self, route: str, params: dict[str, Any] | None = None) -> Iterator[Any]:
        """Every item of a paged list, page by page (``limit``, ``offset``, ``total``)."""
        offset = 0
        while True:
            page = self.get(route, {**(params or {}), "limit": self.page_limit,
                                    "offset": offset})
            yield from page["items"]
            offset += len(page["items"])
            if offset >= page["total"] or not page["items"]:
                return

    def slos(self) -> pd.DataFrame:
        """Every SLO now: SLI, budget, burn rate per window, state, budget outlook."""
        return frames.slos(list(self.pages("/api/v1/slos")))

    def slo_history(self, name: str, start: Time | None = None, end: Time | None = None,
                    step: float | None = None) -> pd.DataFrame:
        """The SLO's compliance report per step over [start, end] (defaults: the API's, the
        SLO's period up to now): good, total, SLI, budget remaining, burn rates."""
        report = self.get(f"/api/v1/slos/{name}/report", _params(
            start=_time(start), end=_time(end), step=step, format="json"))
        return frames.slo_history(report)

    def targets(self) -> pd.DataFrame:
        """Every target and its last scrape."""
        return frames.targets(list(self.pages("/api/v1/targets")))

    def series(self, target: str, metric: str, start: Time | None = None,
               end: Time | None = None, step: float | None = None) -> pd.DataFrame:
        """A derived metric of ``target`` per step (``tokens_per_second``, ``error_ratio``,
        ...; see the API's /docs)."""
        body = self.get(f"/api/v1/targets/{target}/series", _params(
            metric=metric, start=_time(start), end=_time(end), step=step))
        return frames.series(body)

    def alerts(self, state: str | None = None) -> pd.DataFrame:
        """The alert book, or its alerts in ``state`` (pending, firing, resolved)."""
        return frames.alerts(list(self.pages("/api/v1/alerts", _params(state=state))))

    def alert_history(self, slo: str | None = None, alertname: str | None = None,
                      start: Time | None = None, end: Time | None = None) -> pd.DataFrame:
        """Every change of an alert's state in [start, end) (default: all stored), newest
        first, of the SLO's alerts (``slo``) or those named ``alertname`` when given."""
        return frames.alert_history(list(self.pages("/api/v1/alerts/history", _params(
            slo=slo, alertname=alertname, start=_time(start), end=_time(end)))))

    def runs(self, kind: str) -> pd.DataFrame:
        """The bench runs of ``kind`` (``sweep`` or ``canary``), newest first."""
        return frames.runs(list(self.pages(self._runs_route(kind))))

    def sweep(self, run_id: str) -> pd.DataFrame:
        """A finished sweep's steps, one row per rate."""
        return frames.sweep(self._result("sweep", run_id))

    def canary(self, run_id: str) -> pd.DataFrame:
        """A finished canary's judgement, one row per metric."""
        return frames.canary(self._result("canary", run_id))

    def _runs_route(self, kind: str) -> str:
        if kind not in RUN_KINDS:
            raise ValueError(f"run kind must be one of {', '.join(RUN_KINDS)}, not {kind!r}")
        return f"/api/v1/{RUN_KINDS[kind]}"

    def _result(self, kind: str, run_id: str) -> dict[str, Any]:
        route = f"{self._runs_route(kind)}/{run_id}"
        run = self.get(route)
        if run["status"] != "done" or run["result"] is None:
            why = f": {run['error']}" if run.get("error") else ""
            raise ClientError(route, None, f"{kind} {run_id} has no result ({run['status']}"
                                           f"{why})")
        result: dict[str, Any] = run["result"]
        return result
