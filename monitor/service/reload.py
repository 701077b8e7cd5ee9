"""Reloading the configuration without a restart, as Prometheus does: on SIGHUP or
``POST /-/reload``, re-read inferwatch.yaml and every SLO file it lists, validate all of it,
and only then swap.

- Everything is read and checked first (in a worker thread: parsing a thousand SLOs must not
  stall the event loop); a bad file changes nothing, and the failure (file, field path,
  message) is logged, returned to the API and shown as
  ``inferwatch_config_last_reload_successful 0`` until a reload succeeds.
- The SLO evaluator keeps the state of every SLO whose parsed spec is unchanged, builds it
  afresh for new and changed ones, and drops removed ones (``SloEvaluator.plan_slos``).
- The alert book is not touched: an alert whose condition still holds goes on with the same
  startsAt (nothing re-sent as new); the alerts of a removed SLO stop being evaluated and
  resolve through the book at the next round, as Prometheus resolves the alerts of a rule
  that disappears (Alertmanager is sent the resolve, nothing is lost). An edit that changes an
  SLO's alert labels (its service, its labels, its windows) is, for Alertmanager, the old
  alerts resolving and new ones firing.
- Targets go through ``Collector.apply_config`` (unchanged ones keep their baseline); the
  evaluation interval, resend interval, settle time and external URL apply at once.
  ``store``, ``alerting.alertmanager_urls`` and ``anomaly`` are read at start only: an edit of
  them is reported as needing a restart.

A ``Reloader`` serializes reloads and remembers the last one; ``LiveConfig`` is what it
prepares (in the thread, where anything may fail) and applies (on the event loop, where nothing
can) in a running ``inferwatch serve`` or ``inferwatch collect``.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from monitor.alerting.loop import AlertingLoop
from monitor.collect.collector import Collector
from monitor.collect.config import ConfigError, ConfigVersion, ConfigWatcher, MonitorConfig
from monitor.collect.recorder import StoreRecorder
from monitor.slo.evaluator import SloEvaluator, SloPlan
from monitor.slo.bind import EngineBindError, bind_to_targets
from monitor.slo.loaders import SloFileError, load_slos
from monitor.slo.spec import Slo
from monitor.slo.windows import check_short_windows

logger = logging.getLogger(__name__)

P = TypeVar("P")


@dataclass(frozen=True, slots=True)
class Loaded:
    """inferwatch.yaml and its SLOs, read and validated, not yet in force."""

    config: MonitorConfig
    version: ConfigVersion
    slos: tuple[Slo, ...]


class SloFiles:
    """The SLOs of each entry of ``slos:`` (a file or a directory), remembered by the digest of
    what the entry holds: every reload reads every file, but parses only those that changed
    (YAML parsing is most of a reload's time with a thousand SLOs)."""

    def __init__(self) -> None:
        self._parsed: dict[Path, tuple[bytes, list[Slo]]] = {}

    def load(self, config: MonitorConfig, base: Path) -> list[Slo]:
        """The SLOs of every file or directory ``config`` lists (relative to ``base``, its
        folder); SloFileError naming the file and fields, or the names used twice."""
        slos: list[Slo] = []
        parsed: dict[Path, tuple[bytes, list[Slo]]] = {}
        for entry in config.slos:
            path = Path(entry) if Path(entry).is_absolute() else base / entry
            digest = _digest_of(path)
            cached = self._parsed.get(path)
            found = cached[1] if cached and digest and cached[0] == digest else load_slos(path)
            if digest is not None:
                parsed[path] = (digest, found)
            slos.extend(found)
        self._parsed = parsed
        names = [s.name for s in slos]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise SloFileError(", ".join(config.slos), [f"SLO names used twice: {duplicates}"])
        try:  # latency SLOs counted at the edges of the engines their targets declare
            slos = bind_to_targets(slos, [(t.name, t.labels, t.engine) for t in config.targets])
        except EngineBindError as exc:
            raise SloFileError(", ".join(config.slos), [str(exc)]) from None
        interval = max([config.alerting.evaluation_interval_seconds,
                        *(t.scrape_interval_seconds for t in config.targets)])
        try:
            check_short_windows(slos, interval, "longest scrape or evaluation interval")
        except ValueError as exc:
            raise SloFileError(", ".join(config.slos), [str(exc)]) from None
        return slos


def _digest_of(path: Path) -> bytes | None:
    """A digest of a spec file, or of a directory's spec files (names and contents); None if
    unreadable (then ``load_slos`` says why)."""
    digest = hashlib.sha256()
    try:
        files = sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml")
                       and p.is_file()) if path.is_dir() else [path]
        for file in files:
            digest.update(file.name.encode() + b"\0" + file.read_bytes() + b"\0")
    except OSError:
        return None
    return digest.digest()


def load(watcher: ConfigWatcher, slo_files: SloFiles | None = None) -> Loaded:
    """The watched file and every SLO file it lists (relative to its folder), as they are now;
    ConfigError or SloFileError naming the file and fields."""
    config, version = watcher.read()
    slos = (slo_files or SloFiles()).load(config, watcher.path.parent)
    return Loaded(config, version, tuple(slos))


@dataclass(frozen=True, slots=True)
class Changes:
    """Names by what one reload did to them."""

    slos_added: tuple[str, ...] = ()
    slos_changed: tuple[str, ...] = ()
    slos_removed: tuple[str, ...] = ()
    targets_added: tuple[str, ...] = ()
    targets_changed: tuple[str, ...] = ()
    targets_removed: tuple[str, ...] = ()
    restart_required: tuple[str, ...] = ()  # sections edited that apply at the next start

    def brief(self) -> str:
        parts = [f"{what} {kind} {list(names)}" for what, kind, names in (
            ("SLOs", "added", self.slos_added), ("SLOs", "changed", self.slos_changed),
            ("SLOs", "removed", self.slos_removed), ("targets", "added", self.targets_added),
            ("targets", "changed", self.targets_changed),
            ("targets", "removed", self.targets_removed)) if names]
        return "; ".join(parts) or "nothing changed"


def target_changes(old: MonitorConfig, new: MonitorConfig
                   ) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(added, changed, removed) target names, in the new file's order (removed: the old's)."""
    before = {t.name: t for t in old.targets}
    after = {t.name: t for t in new.targets}
    added = tuple(n for n in after if n not in before)
    changed = tuple(n for n, t in after.items() if n in before and before[n] != t)
    removed = tuple(n for n in before if n not in after)
    return added, changed, removed


def restart_required(old: MonitorConfig, new: MonitorConfig) -> tuple[str, ...]:
    """The sections read at start only that the edit changed."""
    edited = []
    if old.store != new.store:
        edited.append("store")
    if old.alerting.alertmanager_urls != new.alerting.alertmanager_urls:
        edited.append("alerting.alertmanager_urls")
    if old.anomaly != new.anomaly:
        edited.append("anomaly")
    if old.ha != new.ha:
        edited.append("ha")
    return tuple(edited)


@dataclass(frozen=True, slots=True)
class ReloadResult:
    """One reload attempt (or the start, the first configuration in force)."""

    at: float                       # unix seconds when it finished
    trigger: str                    # "start", "SIGHUP", "api"
    successful: bool
    seconds: float = 0.0            # time to read, validate and apply
    changes: Changes = field(default_factory=Changes)
    error: str | None = None        # the whole message, as logged
    file: str | None = None         # the bad file (or directory)
    problems: tuple[str, ...] = ()  # one per bad field: "targets[0].url: ..."


class ReloadFailed(Exception):
    def __init__(self, result: ReloadResult) -> None:
        super().__init__(result.error)
        self.result = result


class Reloader(Generic[P]):
    """Runs reloads one at a time and remembers the last one and the last success."""

    def __init__(self, watcher: ConfigWatcher, prepare: Callable[[Loaded], P],
                 apply: Callable[[P], Changes],
                 on_result: Callable[[ReloadResult], None] | None = None,
                 clock: Callable[[], float] = time.time,
                 slo_files: SloFiles | None = None) -> None:
        self.watcher = watcher
        self.slo_files = slo_files or SloFiles()
        self._prepare = prepare
        self._apply = apply
        self._on_result = on_result
        self._clock = clock
        self._lock = asyncio.Lock()
        self.last = ReloadResult(clock(), "start", True)
        self.last_success_at = self.last.at
        if on_result is not None:
            on_result(self.last)

    async def reload(self, trigger: str) -> ReloadResult:
        """Read, validate and apply; ReloadFailed (running configuration kept) if anything is
        bad. Concurrent calls queue: each reads the files as they are when its turn comes."""
        async with self._lock:
            began = time.perf_counter()
            try:
                prepared = await asyncio.to_thread(self._load_and_prepare)
                changes = self._apply(prepared)
            except (ConfigError, SloFileError) as exc:
                failed = self._failure(trigger, began, str(exc), exc.source, exc.problems)
            except ValueError as exc:  # an SLO the evaluator cannot track
                failed = self._failure(trigger, began, str(exc),
                                       ", ".join(self.watcher.config.slos) or None,
                                       (str(exc),))
            else:
                result = ReloadResult(self._clock(), trigger, True,
                                      time.perf_counter() - began, changes)
                self.last_success_at = result.at
                self._finish(result)
                return result
            self._finish(failed)
            raise ReloadFailed(failed)

    def _load_and_prepare(self) -> P:
        return self._prepare(load(self.watcher, self.slo_files))

    def _failure(self, trigger: str, began: float, error: str, file: str | None,
                 problems: tuple[str, ...]) -> ReloadResult:
        return ReloadResult(self._clock(), trigger, False, time.perf_counter() - began,
                            error=error, file=file, problems=problems)

    def _finish(self, result: ReloadResult) -> None:
        self.last = result
        if self._on_result is not None:
            self._on_result(result)
        if not result.successful:
            logger.error("configuration reload (%s) failed; keeping the running "
                         "configuration: %s", result.trigger, result.error)
            return
        changes = result.changes
        logger.info("configuration reloaded (%s) in %.3f s: %s", result.trigger, result.seconds,
                    changes.brief())
        if changes.restart_required:
            logger.warning("configuration reload (%s): %s changed; that applies at the next "
                           "start", result.trigger, ", ".join(changes.restart_required))


@dataclass(frozen=True, slots=True)
class _Prepared:
    loaded: Loaded
    plan: SloPlan


class LiveConfig:
    """What a reload swaps in a running monitor (``inferwatch serve`` or ``collect``): the
    evaluator's SLOs, the collector's targets (``collector`` is set while it runs), the
    alerting settings, the config the watcher follows; ``on_slos`` is told the new SLOs."""

    def __init__(self, watcher: ConfigWatcher, alerting: AlertingLoop, recorder: StoreRecorder,
                 *, slo_files: SloFiles | None = None,
                 on_result: Callable[[ReloadResult], None] | None = None,
                 on_slos: Callable[[list[Slo]], None] | None = None) -> None:
        if alerting.evaluator is None:
            raise ValueError("a reloadable monitor needs an SLO evaluator (even of no SLOs)")
        self.watcher = watcher
        self.alerting = alerting
        self.evaluator: SloEvaluator = alerting.evaluator
        self.recorder = recorder
        self.collector: Collector | None = None
        self.on_slos = on_slos
        self.reloader: Reloader[_Prepared] = Reloader(watcher, self._prepare, self._apply,
                                                      on_result, slo_files=slo_files)
        self._tasks: set[asyncio.Task[None]] = set()

    def reload_in_background(self, trigger: str) -> None:
        """Start a reload (a signal handler's); its outcome is logged (and kept in
        ``reloader.last``)."""
        task = asyncio.create_task(self._reload_logged(trigger))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _reload_logged(self, trigger: str) -> None:
        try:
            await self.reloader.reload(trigger)
        except ReloadFailed:
            pass  # logged by the reloader; the running configuration is kept
        except Exception:
            logger.exception("configuration reload (%s) failed unexpectedly", trigger)

    def _prepare(self, loaded: Loaded) -> _Prepared:
        """In a worker thread: everything that can fail, before anything is swapped."""
        plan = self.evaluator.plan_slos(loaded.slos)
        self.recorder.register_targets(loaded.config)  # metadata only: harmless ahead
        return _Prepared(loaded, plan)

    def _apply(self, prepared: _Prepared) -> Changes:
        """On the event loop, nothing left to fail: the new SLOs, targets and settings."""
        old, new = self.watcher.config, prepared.loaded.config
        slos = self.evaluator.apply_slos(prepared.plan)
        if self.on_slos is not None:
            self.on_slos(list(prepared.loaded.slos))
        self.watcher.adopt(new, prepared.loaded.version)
        if self.collector is not None:
            self.collector.apply_config(new)
        settings = new.alerting
        self.alerting.interval_seconds = settings.evaluation_interval_seconds
        self.alerting.external_url = settings.external_url.rstrip("/")
        self.alerting.book.resend_seconds = settings.resend_seconds
        self.evaluator.settle_seconds = new.settle_seconds  # PromQL targets' delays included
        if self.alerting.anomalies is not None:
            self.alerting.anomalies.settle_seconds = new.settle_seconds
        added, changed, removed = target_changes(old, new)
        return Changes(slos.added, slos.changed, slos.removed, added, changed, removed,
                       restart_required(old, new))
