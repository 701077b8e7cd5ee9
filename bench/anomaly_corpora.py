"""Public labelled corpora of operations series for evaluating streaming anomaly detectors.

- ``nab``: numenta/NAB's realTraffic, realAdExchange, realTweets and artificial groups
  (bench/data/nab/, via :mod:`bench.anomaly_nab`); series ``group/file.csv``.
- ``smd``: the Server Machine Dataset (NetManAIOps/OmniAnomaly, MIT), univariate per machine
  and metric, train followed by test, synthetic 1-minute timestamps: 19 of the 28 machines
  (the values of the other nine were in no copy small enough to fetch; see bench/data/smd/
  README.md), two labelled metrics each plus six incident-free series; series
  ``smd/<machine>/<d>``.
- ``cloudmon``: microsoft/cloud-monitoring-dataset, 60 production telemetry series
  (bench/data/cloudmon/); series ``cloudmon/<domain>/<file>``.

Windows of smd and cloudmon are NAB-style around the labelled segments (see the folders'
README); their anomaly row is the first row of the earliest segment inside the window.
:func:`splits` gives a deterministic 2-fold split of each corpus for tune-on-one-half,
report-on-the-other use.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import numpy.typing as npt

from bench import anomaly_nab
from bench.anomaly_nab import Series
from monitor.anomaly import nab

DATA = Path(__file__).parent / "data"
CORPORA = ("nab", "smd", "cloudmon")
NAB_GROUPS = ("realTraffic", "realAdExchange", "realTweets", "artificialNoAnomaly",
              "artificialWithAnomaly")


def available(name: str, root: Path = DATA) -> bool:
    """Whether the corpus' data is vendored here (smd needs building from a full source)."""
    _check(name)
    folder = root / name
    return (folder / "combined_windows.json").exists() if name == "nab" else (
        folder / "windows.json").exists()


def _check(name: str) -> None:
    if name not in CORPORA:
        raise ValueError(f"unknown corpus {name!r}; one of {', '.join(CORPORA)}")


def _times(stamps: list[str]) -> npt.NDArray[np.float64]:
    """Unix seconds of ISO-8601 UTC stamps (``2020-01-01T00:00:00Z`` or NAB's form)."""
    moments = np.array([s.rstrip("Z").replace(" ", "T") for s in stamps],
                       dtype="datetime64[us]")
    return (moments - np.datetime64(0, "us")).astype(np.int64).astype(np.float64) / 1e6


def _series(name: str, folder: Path, bounds: list[list[str]],
            segments: list[dict[str, object]]) -> Series:
    path = folder / f"{name.split('/', 1)[1]}.csv.gz"
    with gzip.open(path, "rt") as f:
        lines = f.read().splitlines()[1:]
    stamps, values = zip(*(line.split(",") for line in lines))
    times = _times(list(stamps))
    starts = sorted(int(rows[0]) for s in segments
                    if isinstance(rows := s["rows"], list))
    windows = []
    for start_text, end_text in bounds:
        first = int(np.searchsorted(times, _times([start_text])[0]))
        last = int(np.searchsorted(times, _times([end_text])[0], side="right")) - 1
        inside = [a for a in starts if first <= a <= last]
        windows.append(nab.Window(first, last, inside[0] if inside else (first + last) // 2))
    return Series(name, times, np.array(values, dtype=np.float64), windows)


def load_corpus(name: str, root: Path = DATA) -> list[Series]:
    """Every series of corpus ``name`` (one of :data:`CORPORA`), sorted by name; ``root``
    holds the corpus folders (nab is always read from bench/data/nab)."""
    _check(name)
    if name == "nab":
        return anomaly_nab.corpus(NAB_GROUPS)
    folder = root / name
    if not available(name, root):
        raise FileNotFoundError(
            f"{folder / 'windows.json'} is missing: build it with "
            f"python bench/data/build_corpora.py --{name} <source snapshot> (see its README)")
    windows: dict[str, list[list[str]]] = json.loads((folder / "windows.json").read_text())
    segments: dict[str, list[dict[str, object]]] = json.loads(
        (folder / "segments.json").read_text())
    return [_series(series, folder, bounds, segments.get(series, []))
            for series, bounds in sorted(windows.items())]


def series_names(name: str, root: Path = DATA) -> list[str]:
    """The series names of a corpus, sorted, without loading the data ([] if not built)."""
    _check(name)
    if name == "nab":
        labels: dict[str, object] = json.loads(
            (DATA / "nab" / "combined_windows.json").read_text())
        return sorted(s for s in labels if s.split("/")[0] in NAB_GROUPS)
    if not available(name, root):
        return []
    windows: dict[str, object] = json.loads((root / name / "windows.json").read_text())
    return sorted(windows)


def _group(name: str, corpus: str) -> str:
    """The unit kept whole by the split: the machine for smd, else the series itself."""
    return name.split("/")[1] if corpus == "smd" else name


def _family(name: str, corpus: str) -> str:
    """Units alternate between halves within a family (NAB group, cloudmon domain)."""
    return "" if corpus == "smd" else name.split("/")[-2]


def splits(name: str, root: Path = DATA) -> dict[str, list[str]]:
    """A deterministic 2-fold split of a corpus' series names into halves "a" and "b".

    Units (smd: a machine, so no machine is in both halves; nab and cloudmon: a series) are
    sorted naturally within their family (smd: all machines; nab: the group; cloudmon: the
    domain) and alternate a, b, a, ... so every family is spread over both halves."""
    names = series_names(name, root)
    units: dict[str, list[str]] = {}
    for s in names:
        units.setdefault(_family(s, name), [])
        if _group(s, name) not in units[_family(s, name)]:
            units[_family(s, name)].append(_group(s, name))
    half: dict[str, str] = {}
    for family in sorted(units):
        for k, unit in enumerate(sorted(units[family], key=_natural)):
            half[unit] = "ab"[k % 2]
    out: dict[str, list[str]] = {"a": [], "b": []}
    for s in names:
        out[half[_group(s, name)]].append(s)
    return out


def _natural(text: str) -> tuple[tuple[int, int | str], ...]:
    parts: list[tuple[int, int | str]] = []
    for chunk in text.replace("-", " ").replace("/", " ").replace(".", " ").split():
        parts.append((0, int(chunk)) if chunk.isdigit() else (1, chunk))
    return tuple(parts)
