"""inferwatch.yaml: which targets the monitor scrapes, how often, and where it stores results.

    defaults:                      # optional; every target inherits these unless it says otherwise
      scrape_interval_seconds: 15
      scrape_timeout_seconds: 5    # must stay below the interval
      labels: {deployment: local}
    max_concurrent_scrapes: 64     # scrapes in flight at once, over all targets
    max_body_bytes: 10485760       # a larger /metrics page fails the scrape (Prometheus'
                                   # body_size_limit), it is not read half
    store: {url: "sqlite:///inferwatch.db"}
    targets:
      - name: reference-0          # unique; the store keys its series by it
        url: http://127.0.0.1:8000/metrics
        engine: auto               # or a mapping table: vllm, tgi, sglang, triton, llamacpp, ...
        labels: {model: tiny, role: baseline}
        capacity: {sweep: nightly} # optional: live headroom against a stored sweep (or numbers)
        max_num_seqs: 256          # optional: the engine's batch limits (vLLM's names), for
        max_num_batched_tokens: 8192  # batch utilization where the engine does not export them
    headroom: {warn_below_ratio: 0.2, for_seconds: 300}   # optional (monitor/headroom/config.py)
    alerting: {target_down: {for_seconds: 300}}  # optional (monitor/collect/target_down_config.py)
    ha: {poll_seconds: 1}          # optional: replicas on PostgreSQL (monitor/service/leader.py)

``load_config`` validates the whole file when it is read; a bad file raises ``ConfigError``
naming the file and every bad field by its path (``targets[2].scrape_timeout_seconds``).
``ConfigWatcher`` polls the file for edits and keeps the config in force when an edit is bad.
"""

from __future__ import annotations

import difflib
import hashlib
import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import httpx
import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from exporters.adapters import check_extra_labels, load_tables
from exporters.exposition import DEFAULT_MAX_BYTES
from exporters.fetch import AUTO
from monitor.collect.target_down_config import TargetDownConfig
from monitor.headroom.config import CapacityConfig, HeadroomConfig

logger = logging.getLogger(__name__)

DEFAULT_SCRAPE_INTERVAL_SECONDS: Final = 15.0
DEFAULT_SCRAPE_TIMEOUT_SECONDS: Final = 5.0
DEFAULT_MAX_CONCURRENT_SCRAPES: Final = 64
DEFAULT_STORE_URL: Final = "sqlite:///inferwatch.db"
_TARGET_NAME_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}")


class ConfigError(Exception):
    """An inferwatch.yaml that cannot be used; the message names the file and the fields."""

    def __init__(self, source: str, problems: Sequence[str]) -> None:
        self.source = source
        self.problems = tuple(problems)
        lines = "\n".join(f"  {problem}" for problem in self.problems)
        super().__init__(f"{source}: invalid inferwatch config:\n{lines}")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _check_labels(labels: dict[str, str]) -> dict[str, str]:
    for name in labels:
        try:
            check_extra_labels({name: ""})  # the rule the exporters apply to added labels
        except ValueError:
            raise ValueError(f"{name!r} cannot be a label: not a Prometheus label name, or one "
                             "reserved (le, quantile, __*)") from None
    return labels


class DefaultsConfig(_Section):
    scrape_interval_seconds: float = Field(default=DEFAULT_SCRAPE_INTERVAL_SECONDS, gt=0)
    scrape_timeout_seconds: float = Field(default=DEFAULT_SCRAPE_TIMEOUT_SECONDS, gt=0)
    labels: dict[str, str] = Field(default_factory=dict)

    _labels_ok = field_validator("labels")(_check_labels)

    @field_validator("scrape_timeout_seconds")
    @classmethod
    def _timeout_below_interval(cls, timeout: float, info: ValidationInfo) -> float:
        return _timeout_checked(timeout, info)


class TargetConfig(_Section):
    """One scrape target, with the defaults already filled in."""

    name: str
    url: str
    engine: str = AUTO
    labels: dict[str, str] = Field(default_factory=dict)  # model, deployment, role, ...
    scrape_interval_seconds: float = Field(default=DEFAULT_SCRAPE_INTERVAL_SECONDS, gt=0)
    scrape_timeout_seconds: float = Field(default=DEFAULT_SCRAPE_TIMEOUT_SECONDS, gt=0)
    # Set for a target whose metrics already live in Prometheus (or Thanos, Mimir,
    # VictoriaMetrics): `url` is then the PromQL API's base URL and this selects the target's
    # series in our schema, e.g. 'job="llm",instance="10.0.0.7:8000"'.
    promql_selector: str | None = None
    # Windows end this far behind now, so samples Prometheus has not ingested yet are not lost.
    promql_delay_seconds: float = Field(default=30.0, ge=0)
    # What the target sustains within its SLO (a stored sweep or numbers): its live headroom.
    capacity: CapacityConfig | None = None
    # The engine's batch limits as it was started with them (vLLM's --max-num-seqs and
    # --max-num-batched-tokens): batch utilization for engines that do not export their limits
    # (monitor/collect/limits.py). An exported limit wins over these.
    max_num_seqs: int | None = Field(default=None, ge=1)
    max_num_batched_tokens: int | None = Field(default=None, ge=1)

    _labels_ok = field_validator("labels")(_check_labels)

    @field_validator("name")
    @classmethod
    def _name_ok(cls, name: str) -> str:
        if not _TARGET_NAME_RE.fullmatch(name):
            raise ValueError(f"{name!r}: use 1-200 letters, digits and _ . : - "
                             "(starting with a letter or digit)")
        return name

    @field_validator("url")
    @classmethod
    def _url_ok(cls, url: str) -> str:
        try:
            parsed = httpx.URL(url)
        except httpx.InvalidURL as exc:
            raise ValueError(f"{url!r} is not a URL ({exc})") from None
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ValueError(f"{url!r}: give an http:// or https:// URL with a host")
        return url

    @field_validator("engine")
    @classmethod
    def _engine_ok(cls, engine: str) -> str:
        known = (AUTO, *sorted(load_tables()))
        if engine not in known:
            raise ValueError(f"unknown engine {engine!r}; expected one of {list(known)}")
        return engine

    @field_validator("scrape_timeout_seconds")
    @classmethod
    def _timeout_below_interval(cls, timeout: float, info: ValidationInfo) -> float:
        return _timeout_checked(timeout, info)


def _timeout_checked(timeout: float, info: ValidationInfo) -> float:
    # The interval is declared first, so it is in info.data when it was valid itself.
    interval = info.data.get("scrape_interval_seconds")
    if interval is not None and timeout >= interval:
        raise ValueError(f"{timeout:g} s must be less than scrape_interval_seconds "
                         f"({interval:g} s), or scrapes would overlap")
    return timeout


class StoreConfig(_Section):
    url: str = DEFAULT_STORE_URL  # SQLAlchemy URL: sqlite:///file.db, postgresql://...

    @field_validator("url")
    @classmethod
    def _url_ok(cls, url: str) -> str:
        if "://" not in url:
            raise ValueError(f"{url!r} is not a database URL (e.g. {DEFAULT_STORE_URL})")
        return url


class AlertingConfig(_Section):
    """Where alerts go and how the SLOs are evaluated."""

    # Alertmanager v2 base URLs (an HA pair gets every alert); none: alerts are only logged.
    alertmanager_urls: tuple[str, ...] = ()
    evaluation_interval_seconds: float = Field(default=15.0, gt=0)
    resend_seconds: float = Field(default=60.0, gt=0)
    # A minute is evaluated as closed this long after it ends (its scrapes are stored by then).
    settle_seconds: float = Field(default=30.0, ge=0)
    # Base of each alert's generatorURL: where people find the monitor's API.
    external_url: str = "http://127.0.0.1:8080"
    # A target whose scrapes all fail (monitor/collect/target_down_config.py).
    target_down: TargetDownConfig = TargetDownConfig()

    @field_validator("alertmanager_urls")
    @classmethod
    def _urls(cls, urls: tuple[str, ...]) -> tuple[str, ...]:
        for url in urls:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"{url!r} is not an http(s) URL of an Alertmanager")
        return urls


class AnomalyConfig(_Section):
    """Anomaly detection on every target (``monitor.anomaly``); its alerts go the SLO alerts'
    way. Pages come from SLO burn rates: an anomaly is a ticket, and pages only on the metrics
    listed in ``page_on`` (tokens_per_second pages at the critical level, under 50% of its
    load-adjusted baseline)."""

    enabled: bool = True
    page_on: tuple[str, ...] = ()
    step_seconds: float = Field(default=60.0, gt=0)    # one point per target per step
    # Stored history replayed at start: three weeks (the seasonal baseline) and a day.
    history_seconds: float = Field(default=22 * 86400.0, ge=0)


class HaConfig(_Section):
    """Running several replicas on one PostgreSQL store (monitor/service/leader.py)."""

    poll_seconds: float = Field(default=1.0, gt=0)  # a standby's retry, the active's check
    replica_id: str | None = Field(default=None, min_length=1, max_length=50)  # hostname:pid


class MonitorConfig(_Section):
    defaults: DefaultsConfig = DefaultsConfig()  # frozen: safe to share
    max_concurrent_scrapes: int = Field(default=DEFAULT_MAX_CONCURRENT_SCRAPES, ge=1)
    max_body_bytes: int = Field(default=DEFAULT_MAX_BYTES, ge=1)
    store: StoreConfig = StoreConfig()
    targets: tuple[TargetConfig, ...] = ()
    # SLO spec files or directories (native, OpenSLO v1, Sloth), relative to this file.
    slos: tuple[str, ...] = ()
    alerting: AlertingConfig = AlertingConfig()
    anomaly: AnomalyConfig = AnomalyConfig()
    headroom: HeadroomConfig = HeadroomConfig()  # when the targets' capacity headroom warns
    ha: HaConfig = HaConfig()

    @model_validator(mode="before")
    @classmethod
    def _fill_target_defaults(cls, data: Any) -> Any:
        """Copy the defaults section into each target that does not set a field itself (target
        labels win over default labels of the same name). Bad defaults are left for the
        defaults section's own validation to report."""
        if not isinstance(data, dict) or not isinstance(data.get("targets"), list):
            return data
        defaults = data.get("defaults") or {}
        if not isinstance(defaults, dict):
            return data
        filled = []
        for target in data["targets"]:
            if isinstance(target, dict):
                target = _with_defaults(target, defaults)
            filled.append(target)
        return {**data, "targets": filled}

    @model_validator(mode="after")
    def _names_unique(self) -> MonitorConfig:
        first: dict[str, int] = {}
        for i, target in enumerate(self.targets):
            if target.name in first:
                raise ValueError(f"targets[{i}].name: duplicate target name {target.name!r} "
                                 f"(first at targets[{first[target.name]}])")
            first[target.name] = i
        return self

    @property
    def settle_seconds(self) -> float:
        """How long after its end a minute's data are all in the store, so that evaluations
        (SLOs, anomalies) and reports may count it as closed: ``alerting.settle_seconds``,
        plus the longest ``promql_delay_seconds`` of the PromQL targets, whose windows are
        read (and stored) that long after they end."""
        delays = [t.promql_delay_seconds for t in self.targets if t.promql_selector is not None]
        return self.alerting.settle_seconds + max(delays, default=0.0)

    def target(self, name: str) -> TargetConfig:
        for target in self.targets:
            if target.name == name:
                return target
        raise KeyError(f"no target {name!r} in the config")

    def select(self, labels: Mapping[str, str]) -> tuple[TargetConfig, ...]:
        """The targets carrying all of ``labels`` (e.g. the canary replicas of a model)."""
        return tuple(t for t in self.targets
                     if all(t.labels.get(k) == v for k, v in labels.items()))


def _with_defaults(target: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    out = dict(target)
    for key in ("scrape_interval_seconds", "scrape_timeout_seconds"):
        if key not in out and key in defaults:
            out[key] = defaults[key]
    default_labels, labels = defaults.get("labels"), out.get("labels", {})
    if isinstance(default_labels, dict) and isinstance(labels, dict):
        out["labels"] = {**default_labels, **labels}
    return out


def parse_config(text: str, source: str) -> MonitorConfig:
    """A config from YAML text; ``source`` (the file) is named in every error."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(source, [f"not valid YAML: {exc}"]) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(source, [f"expected a mapping at the top, got {type(data).__name__}"])
    try:
        return MonitorConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(source, [_describe(error) for error in exc.errors()]) from None


def load_config(path: str | os.PathLike[str]) -> MonitorConfig:
    """The config in ``path``; ConfigError naming the file if it cannot be read or is bad."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), [f"cannot read the file: {exc}"]) from None
    return parse_config(text, str(path))


def _describe(error: Mapping[str, Any]) -> str:
    """One pydantic error as 'targets[2].scrape_timeout_seconds: what is wrong'."""
    path = _field_path(error["loc"])
    if error["type"] == "extra_forbidden":
        message = "unknown key" + _did_you_mean(str(error["loc"][-1]))
    elif error["type"] == "value_error":
        message = str(error["ctx"]["error"])  # our own message, without pydantic's prefix
    else:
        message = f"{error['msg']} (got {error['input']!r})"
    return f"{path}: {message}" if path else message


def _field_path(loc: Sequence[int | str]) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else part)
    return path


def _did_you_mean(key: str) -> str:
    known = {name for model in (DefaultsConfig, TargetConfig, StoreConfig, MonitorConfig,
                                CapacityConfig, HeadroomConfig, TargetDownConfig)
             for name in model.model_fields}
    close = difflib.get_close_matches(key, sorted(known), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


@dataclass(frozen=True, slots=True)
class ConfigVersion:
    """Which content of the file a config was read from."""

    stat: tuple[int, int]
    digest: bytes


class ConfigWatcher:
    """Follows an inferwatch.yaml: ``poll()`` returns the new config after a good edit.

    A poll costs one stat(); the file is read and hashed only when its mtime or size changed,
    and parsed only when its content did (a touch is no change). A bad edit is logged once and
    the config in force is kept, so a typo never stops monitoring.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        text, self._stat = self._read()
        self._digest = _digest(text)
        self._unreadable = False
        self.config = parse_config(text, str(self.path))  # a bad first file fails the start

    def poll(self) -> MonitorConfig | None:
        """The new config if the file changed to a good one since the last poll, else None."""
        try:
            if _stat_key(self.path) == self._stat:
                return None
            text, self._stat = self._read()
        except (ConfigError, OSError) as exc:  # gone or unreadable, e.g. mid-replace
            if not self._unreadable:  # once, not on every poll while the file is away
                logger.error("%s; keeping the config in force", exc)
            self._unreadable = True
            return None
        self._unreadable = False
        digest = _digest(text)
        if digest == self._digest:
            return None
        self._digest = digest  # a bad version is reported once, not on every poll
        try:
            self.config = parse_config(text, str(self.path))
        except ConfigError as exc:
            logger.error("%s\nkeeping the config in force", exc)
            return None
        logger.info("%s: config reloaded (%d targets)", self.path, len(self.config.targets))
        return self.config

    def read(self) -> tuple[MonitorConfig, ConfigVersion]:
        """The file as it is now, parsed but not adopted (a reload validates everything before
        it swaps); ConfigError naming the file and fields if it is bad. Thread-safe."""
        text, stat = self._read()
        return parse_config(text, str(self.path)), ConfigVersion(stat, _digest(text))

    def adopt(self, config: MonitorConfig, version: ConfigVersion) -> None:
        """Take a config ``read`` returned as the one in force; ``poll`` sees no edit in it."""
        self.config = config
        self._stat, self._digest = version.stat, version.digest
        self._unreadable = False

    def _read(self) -> tuple[str, tuple[int, int]]:
        try:
            stat = _stat_key(self.path)
            return self.path.read_text(encoding="utf-8"), stat
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(str(self.path), [f"cannot read the file: {exc}"]) from None


def _stat_key(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_mtime_ns, stat.st_size


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()
