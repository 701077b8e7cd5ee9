"""A typed client for the Alertmanager v2 API (alerts, silences, status) over httpx.

The monitor posts its alerts here and the `inferwatch silence` command manages maintenance
windows. Failures are one exception family that names the Alertmanager and what happened,
split by what a caller should do: ``AlertmanagerUnavailable`` (cannot connect, timeout, 5xx,
408/429) is worth retrying later, ``AlertmanagerRejected`` (another 4xx) is not, since the
same request would be refused again. ``AlertmanagerClient`` is async (the monitor's event
loop); ``SyncAlertmanagerClient`` is the same API for the CLI and tests.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import cached_property
from types import TracebackType
from typing import Any, Final, Generic, Self, TypeVar

import httpx

DEFAULT_TIMEOUT: Final = 5.0
_LABEL_NAME_RE: Final = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_MATCHER_RE: Final = re.compile(r"^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*(.*?)\s*$",
                                re.DOTALL)
_RFC3339_RE: Final = re.compile(
    r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$", re.IGNORECASE)
_EXCERPT_CHARS: Final = 300
_RETRYABLE_4XX: Final = frozenset({408, 425, 429})  # "later", not "never"

T = TypeVar("T")


# --- errors ------------------------------------------------------------------------------

class AlertmanagerError(Exception):
    """A request to Alertmanager failed; the message names its URL and what happened.

    ``status`` is the HTTP status when there was a response. ``retryable`` says whether the
    same request may succeed later (the base class is used for answers that make no sense,
    such as a 200 that is not the JSON the API documents: not retryable).
    """

    retryable: bool = False

    def __init__(self, message: str, *, url: str, status: int | None = None,
                 body: str = "") -> None:
        super().__init__(message)
        self.url = url
        self.status = status
        self.body = body


class AlertmanagerUnavailable(AlertmanagerError):
    """Cannot connect, timed out, 5xx, 408 or 429: try again later."""

    retryable = True


class AlertmanagerRejected(AlertmanagerError):
    """A 4xx: Alertmanager refused this request (bad payload, unknown silence...)."""

    retryable = False


class MatcherError(ValueError):
    """A matcher string that cannot be parsed; the message quotes it."""


# --- times -------------------------------------------------------------------------------

def _utc_ms(value: datetime, what: str) -> datetime:
    """``value`` in UTC at millisecond precision, the precision Alertmanager answers with, so
    that an alert read back equals the one sent. Naive datetimes are refused: ambiguous."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{what} {value.isoformat()} has no time zone; use an aware datetime")
    utc = value.astimezone(UTC)
    return utc.replace(microsecond=utc.microsecond // 1000 * 1000)


def format_time(value: datetime) -> str:
    """RFC 3339 in UTC with milliseconds: 2024-05-01T12:00:00.000Z."""
    utc = _utc_ms(value, "time")
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def parse_time(text: str) -> datetime | None:
    """An RFC 3339 time from Alertmanager (nanoseconds allowed) in UTC; Go's zero time, year 1,
    means "not set" and is None."""
    match = _RFC3339_RE.match(text.strip())
    if not match:
        raise ValueError(f"{text!r} is not an RFC 3339 time")
    whole, fraction, zone = match.groups()
    micro = (fraction or "").ljust(6, "0")[:6]
    offset = "+00:00" if zone.upper() == "Z" else zone
    parsed = datetime.fromisoformat(f"{whole}.{micro}{offset}").astimezone(UTC)
    return None if parsed.year <= 1 else parsed


def _now() -> datetime:
    return datetime.now(UTC)


# --- matchers ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Matcher:
    """One label matcher of a silence or a filter: ``name`` op ``value``."""

    name: str
    value: str
    is_regex: bool = False
    is_equal: bool = True

    def __post_init__(self) -> None:
        if not _LABEL_NAME_RE.match(self.name):
            raise MatcherError(f"bad matcher label name {self.name!r}: must match "
                               "[a-zA-Z_][a-zA-Z0-9_]*")

    @property
    def operator(self) -> str:
        return {(False, True): "=", (False, False): "!=", (True, True): "=~",
                (True, False): "!~"}[(self.is_regex, self.is_equal)]

    def __str__(self) -> str:
        """The form Alertmanager's filter parameter and amtool take: name=~"value"."""
        escaped = self.value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'{self.name}{self.operator}"{escaped}"'

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "isRegex": self.is_regex,
                "isEqual": self.is_equal}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Matcher:
        return cls(str(data["name"]), str(data["value"]), bool(data.get("isRegex", False)),
                   bool(data.get("isEqual", True)))


def parse_matcher(text: str) -> Matcher:
    """``name=value``, ``name!=value``, ``name=~regex`` or ``name!~regex``; the value may be
    double-quoted (JSON escapes). The regex is checked by Alertmanager, not here: its RE2
    syntax is not Python's, and a local check would refuse valid patterns."""
    match = _MATCHER_RE.match(text)
    if not match:
        raise MatcherError(f"bad matcher {text!r}: expected name=value, name!=value, "
                           "name=~regex or name!~regex")
    name, operator, value = match.groups()
    if value.startswith('"'):
        try:
            decoded = json.loads(value)
        except json.JSONDecodeError:
            decoded = None
        if not isinstance(decoded, str):
            raise MatcherError(f"bad matcher {text!r}: unterminated or invalid quoted value")
        value = decoded
    return Matcher(name, value, is_regex="~" in operator, is_equal=not operator.startswith("!"))


def _matchers(matchers: Sequence[Matcher | str]) -> list[Matcher]:
    return [m if isinstance(m, Matcher) else parse_matcher(m) for m in matchers]


# --- alerts ------------------------------------------------------------------------------

def fingerprint(labels: Mapping[str, str]) -> str:
    """Alertmanager's fingerprint of a label set (Prometheus' FNV-1a 64 over the sorted
    name/value pairs), so that alerts are keyed here exactly as Alertmanager keys them."""
    h = 0xCBF29CE484222325
    for name in sorted(labels):
        for part in (name.encode(), b"\xff", labels[name].encode(), b"\xff"):
            for byte in part:
                h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


@dataclass(frozen=True)
class AmAlert:
    """An alert as Alertmanager takes it. Checked on construction the way Alertmanager checks
    it (valid label and annotation names, at least one non-empty label, start not after end),
    so that one malformed alert fails where it is made instead of in a batch of good ones.

    Labels with an empty value are dropped (Alertmanager does the same: empty means absent).
    Times are UTC at millisecond precision. ``ends_at`` None means firing until Alertmanager's
    resolve_timeout; an ``ends_at`` in the past resolves the alert.
    """

    labels: Mapping[str, str]
    annotations: Mapping[str, str] = field(default_factory=dict)
    starts_at: datetime | None = None
    ends_at: datetime | None = None
    generator_url: str = ""

    def __post_init__(self) -> None:
        labels = {str(k): str(v) for k, v in self.labels.items() if v != ""}
        annotations = {str(k): str(v) for k, v in self.annotations.items()}
        for kind, names in (("label", labels), ("annotation", annotations)):
            bad = [n for n in names if not _LABEL_NAME_RE.match(n)]
            if bad:
                raise ValueError(f"invalid {kind} name {bad[0]!r} in alert {labels}: "
                                 "must match [a-zA-Z_][a-zA-Z0-9_]*")
        if not labels:
            raise ValueError("an alert needs at least one label with a non-empty value")
        starts = _utc_ms(self.starts_at, "starts_at") if self.starts_at else None
        ends = _utc_ms(self.ends_at, "ends_at") if self.ends_at else None
        if starts and ends and ends < starts:
            raise ValueError(f"alert {labels}: ends_at {ends.isoformat()} is before "
                             f"starts_at {starts.isoformat()}")
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "annotations", annotations)
        object.__setattr__(self, "starts_at", starts)
        object.__setattr__(self, "ends_at", ends)

    @cached_property
    def fingerprint(self) -> str:
        """Alertmanager's identity of this alert: the fingerprint of its labels."""
        return fingerprint(self.labels)

    def is_resolved(self, at: datetime | None = None) -> bool:
        """True when ``ends_at`` is set and not after ``at`` (default: now)."""
        return self.ends_at is not None and self.ends_at <= (at or _now())

    def resolved(self, at: datetime | None = None) -> AmAlert:
        """This alert ending at ``at`` (default: now): what to send when it stops firing."""
        return replace(self, ends_at=at or _now())

    def to_json(self) -> dict[str, Any]:
        """The v2 PostableAlert: unset times and an empty generatorURL are left out."""
        data: dict[str, Any] = {"labels": dict(self.labels),
                                "annotations": dict(self.annotations)}
        if self.starts_at:
            data["startsAt"] = format_time(self.starts_at)
        if self.ends_at:
            data["endsAt"] = format_time(self.ends_at)
        if self.generator_url:
            data["generatorURL"] = self.generator_url
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AmAlert:
        return cls(labels=dict(data["labels"]), annotations=dict(data.get("annotations") or {}),
                   starts_at=_optional_time(data.get("startsAt")),
                   ends_at=_optional_time(data.get("endsAt")),
                   generator_url=str(data.get("generatorURL") or ""))


def _optional_time(value: object) -> datetime | None:
    return parse_time(str(value)) if value else None


@dataclass(frozen=True)
class ListedAlert:
    """An alert as Alertmanager lists it: the alert plus its fingerprint and status."""

    alert: AmAlert
    fingerprint: str
    state: str  # "active", "suppressed" (silenced or inhibited) or "unprocessed"
    silenced_by: tuple[str, ...]
    inhibited_by: tuple[str, ...]
    receivers: tuple[str, ...]
    updated_at: datetime | None

    @property
    def labels(self) -> Mapping[str, str]:
        return self.alert.labels

    @property
    def annotations(self) -> Mapping[str, str]:
        return self.alert.annotations

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ListedAlert:
        status = data["status"]
        return cls(alert=AmAlert.from_json(data), fingerprint=str(data["fingerprint"]),
                   state=str(status["state"]),
                   silenced_by=tuple(status.get("silencedBy") or ()),
                   inhibited_by=tuple(status.get("inhibitedBy") or ()),
                   receivers=tuple(str(r["name"]) for r in data.get("receivers") or ()),
                   updated_at=_optional_time(data.get("updatedAt")))


# --- silences and status -----------------------------------------------------------------

@dataclass(frozen=True)
class Silence:
    id: str
    matchers: tuple[Matcher, ...]
    starts_at: datetime
    ends_at: datetime
    created_by: str
    comment: str
    state: str  # "pending", "active" or "expired"
    updated_at: datetime | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Silence:
        starts, ends = parse_time(str(data["startsAt"])), parse_time(str(data["endsAt"]))
        if starts is None or ends is None:
            raise ValueError(f"silence without start or end: {data}")
        return cls(id=str(data["id"]),
                   matchers=tuple(Matcher.from_json(m) for m in data["matchers"]),
                   starts_at=starts, ends_at=ends, created_by=str(data.get("createdBy", "")),
                   comment=str(data.get("comment", "")), state=str(data["status"]["state"]),
                   updated_at=_optional_time(data.get("updatedAt")))


@dataclass(frozen=True)
class AmStatus:
    version: str
    uptime: datetime | None
    cluster_status: str  # "disabled" without HA, else "ready" or "settling"
    config_yaml: str  # the configuration Alertmanager runs, as it prints it

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AmStatus:
        return cls(version=str((data.get("versionInfo") or {}).get("version", "")),
                   uptime=_optional_time(data.get("uptime")),
                   cluster_status=str((data.get("cluster") or {}).get("status", "")),
                   config_yaml=str((data.get("config") or {}).get("original", "")))


# --- requests ----------------------------------------------------------------------------

@dataclass(frozen=True)
class _Call(Generic[T]):
    """One API request and how to read its answer, shared by the async and sync clients."""

    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    params: list[tuple[str, str]] = field(default_factory=list)
    body: Any = None
    not_found: str = ""  # Alertmanager 0.25 answers 500 "silence not found": a 4xx really


def _ignore(response: httpx.Response) -> None:
    return None


def _post_alerts(alerts: Sequence[AmAlert]) -> _Call[None]:
    return _Call("POST", "/api/v2/alerts", _ignore, body=[a.to_json() for a in alerts])


def _list_alerts(matchers: Sequence[Matcher | str], active: bool, silenced: bool,
                 inhibited: bool, unprocessed: bool,
                 receiver: str | None) -> _Call[list[ListedAlert]]:
    params = [("filter", str(m)) for m in _matchers(matchers)]
    params += [(name, str(flag).lower()) for name, flag in (
        ("active", active), ("silenced", silenced), ("inhibited", inhibited),
        ("unprocessed", unprocessed))]
    if receiver is not None:
        params.append(("receiver", receiver))
    return _Call("GET", "/api/v2/alerts",
                 lambda r: [ListedAlert.from_json(a) for a in r.json()], params=params)


def _create_silence(matchers: Sequence[Matcher | str], starts_at: datetime | None,
                    ends_at: datetime, created_by: str, comment: str) -> _Call[str]:
    parsed = _matchers(matchers)
    if not parsed:
        raise ValueError("a silence needs at least one matcher")
    if not created_by.strip() or not comment.strip():
        raise ValueError("a silence needs an author (created_by) and a comment")
    starts = starts_at or _now()
    if _utc_ms(ends_at, "ends_at") <= _utc_ms(starts, "starts_at"):
        raise ValueError(f"silence ends ({ends_at.isoformat()}) before it starts "
                         f"({starts.isoformat()})")
    body = {"matchers": [m.to_json() for m in parsed], "startsAt": format_time(starts),
            "endsAt": format_time(ends_at), "createdBy": created_by, "comment": comment}
    return _Call("POST", "/api/v2/silences", lambda r: str(r.json()["silenceID"]), body=body)


def _list_silences(matchers: Sequence[Matcher | str]) -> _Call[list[Silence]]:
    return _Call("GET", "/api/v2/silences", lambda r: [Silence.from_json(s) for s in r.json()],
                 params=[("filter", str(m)) for m in _matchers(matchers)])


def _expire_silence(silence_id: str) -> _Call[None]:
    if not re.fullmatch(r"[0-9a-fA-F-]{36}", silence_id):
        raise ValueError(f"{silence_id!r} is not a silence ID (a UUID)")
    return _Call("DELETE", f"/api/v2/silence/{silence_id}", _ignore,
                 not_found=f"no silence {silence_id}")


def _status() -> _Call[AmStatus]:
    return _Call("GET", "/api/v2/status", lambda r: AmStatus.from_json(r.json()))


def _excerpt(response: httpx.Response) -> str:
    """The error text of a response: Alertmanager answers a JSON string or {"message": ...}."""
    text = response.text.strip()
    try:
        decoded = json.loads(text)
    except ValueError:
        decoded = None
    if isinstance(decoded, str):
        text = decoded
    elif isinstance(decoded, dict) and isinstance(decoded.get("message"), str):
        text = decoded["message"]
    text = " ".join(text.split())
    return text if len(text) <= _EXCERPT_CHARS else text[:_EXCERPT_CHARS] + "..."


def _os_reason(exc: BaseException) -> str:
    """The system error under an httpx error ("Connection refused"), whose own message may
    be a generic "All connection attempts failed"."""
    cause: BaseException | None = exc
    for _ in range(10):
        if cause is None:
            break
        if isinstance(cause, OSError) and cause.errno:
            return os.strerror(cause.errno)
        cause = cause.__cause__ or cause.__context__
    return str(exc)


class _Base:
    def __init__(self, url: str, timeout: float) -> None:
        parsed = httpx.URL(url)
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ValueError(f"Alertmanager URL {url!r} is not an http(s) URL")
        self.url = url.rstrip("/")
        self.timeout = timeout

    def _request(self, call: _Call[Any]) -> dict[str, Any]:
        return {"method": call.method, "url": self.url + call.path, "params": call.params,
                **({"json": call.body} if call.body is not None else {})}

    def _transport_error(self, call: _Call[Any], exc: httpx.HTTPError) -> AlertmanagerError:
        where = f"Alertmanager at {self.url} unavailable: {call.method} {call.path}"
        if isinstance(exc, httpx.TimeoutException):
            return AlertmanagerUnavailable(f"{where}: timed out after {self.timeout:g} s "
                                           f"({type(exc).__name__})", url=self.url)
        if isinstance(exc, httpx.ConnectError):
            return AlertmanagerUnavailable(f"{where}: cannot connect ({_os_reason(exc)})",
                                           url=self.url)
        return AlertmanagerUnavailable(f"{where}: {type(exc).__name__}: {exc}", url=self.url)

    def _result(self, call: _Call[T], response: httpx.Response) -> T:
        status = response.status_code
        if status < 300:
            try:
                return call.parse(response)
            except (ValueError, KeyError, TypeError) as exc:
                raise AlertmanagerError(
                    f"Alertmanager at {self.url}: {call.method} {call.path}: unexpected "
                    f"answer ({exc}): {_excerpt(response)!r}", url=self.url, status=status,
                    body=response.text) from exc
        excerpt = _excerpt(response)
        kind: type[AlertmanagerError]
        if call.not_found and status == 500 and "not found" in excerpt:
            kind, excerpt = AlertmanagerRejected, call.not_found
        elif status >= 500 or status in _RETRYABLE_4XX:
            kind = AlertmanagerUnavailable
        elif status >= 400:
            kind = AlertmanagerRejected
        else:
            kind = AlertmanagerError
        verb = "rejected" if kind is AlertmanagerRejected else "failed"
        raise kind(f"Alertmanager at {self.url} {verb} {call.method} {call.path}: "
                   f"HTTP {status}: {excerpt}", url=self.url, status=status, body=response.text)


class AlertmanagerClient(_Base):
    """Async Alertmanager v2 client; one connection pool, closed by ``aclose()``/``async with``.

    Every method raises ``AlertmanagerError`` (see the module docstring for the subclasses)
    and ``ValueError`` for arguments that cannot make a valid request (sent nowhere).
    """

    def __init__(self, url: str, *, timeout: float = DEFAULT_TIMEOUT,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        super().__init__(url, timeout)
        self._http = httpx.AsyncClient(timeout=timeout, transport=transport)

    async def _send(self, call: _Call[T]) -> T:
        try:
            response = await self._http.request(**self._request(call))
        except httpx.HTTPError as exc:
            raise self._transport_error(call, exc) from exc
        return self._result(call, response)

    async def post_alerts(self, alerts: Sequence[AmAlert]) -> None:
        """POST /api/v2/alerts. Alertmanager keeps the valid alerts of a batch even when it
        answers 400 for the others."""
        await self._send(_post_alerts(alerts))

    async def list_alerts(self, matchers: Sequence[Matcher | str] = (), *, active: bool = True,
                          silenced: bool = True, inhibited: bool = True,
                          unprocessed: bool = True,
                          receiver: str | None = None) -> list[ListedAlert]:
        """GET /api/v2/alerts: the alerts that are not resolved, filtered by all matchers."""
        return await self._send(_list_alerts(matchers, active, silenced, inhibited,
                                             unprocessed, receiver))

    async def create_silence(self, matchers: Sequence[Matcher | str],
                             starts_at: datetime | None, ends_at: datetime, created_by: str,
                             comment: str) -> str:
        """POST /api/v2/silences; returns the new silence's ID. ``starts_at`` None: now."""
        return await self._send(_create_silence(matchers, starts_at, ends_at, created_by,
                                                comment))

    async def list_silences(self, matchers: Sequence[Matcher | str] = ()) -> list[Silence]:
        """GET /api/v2/silences, expired ones included (Alertmanager keeps them a while)."""
        return await self._send(_list_silences(matchers))

    async def expire_silence(self, silence_id: str) -> None:
        """DELETE /api/v2/silence/{id}; an unknown ID is ``AlertmanagerRejected``."""
        await self._send(_expire_silence(silence_id))

    async def status(self) -> AmStatus:
        return await self._send(_status())

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()


class SyncAlertmanagerClient(_Base):
    """The same API, blocking: for the CLI and tests."""

    def __init__(self, url: str, *, timeout: float = DEFAULT_TIMEOUT,
                 transport: httpx.BaseTransport | None = None) -> None:
        super().__init__(url, timeout)
        self._http = httpx.Client(timeout=timeout, transport=transport)

    def _send(self, call: _Call[T]) -> T:
        try:
            response = self._http.request(**self._request(call))
        except httpx.HTTPError as exc:
            raise self._transport_error(call, exc) from exc
        return self._result(call, response)

    def post_alerts(self, alerts: Sequence[AmAlert]) -> None:
        self._send(_post_alerts(alerts))

    def list_alerts(self, matchers: Sequence[Matcher | str] = (), *, active: bool = True,
                    silenced: bool = True, inhibited: bool = True, unprocessed: bool = True,
                    receiver: str | None = None) -> list[ListedAlert]:
        return self._send(_list_alerts(matchers, active, silenced, inhibited, unprocessed,
                                       receiver))

    def create_silence(self, matchers: Sequence[Matcher | str], starts_at: datetime | None,
                       ends_at: datetime, created_by: str, comment: str) -> str:
        return self._send(_create_silence(matchers, starts_at, ends_at, created_by, comment))

    def list_silences(self, matchers: Sequence[Matcher | str] = ()) -> list[Silence]:
        return self._send(_list_silences(matchers))

    def expire_silence(self, silence_id: str) -> None:
        self._send(_expire_silence(silence_id))

    def status(self) -> AmStatus:
        return self._send(_status())

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
