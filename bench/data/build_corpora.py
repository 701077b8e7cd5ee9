"""Re-create bench/data/smd/ and bench/data/cloudmon/ from source snapshots (no downloads).

    python bench/data/build_corpora.py --cloudmon PATH [--smd PATH [--smd-values PATH]]
        [--smd-per-machine N] [--out bench/data]

PATH is a git directory of the source repository (bare, as ``fetch`` brings it, or a
checkout): ``--cloudmon`` microsoft/cloud-monitoring-dataset, ``--smd``
NetManAIOps/OmniAnomaly (labels; values too when it has the full
``ServerMachineDataset/{train,test}`` files), ``--smd-values`` a repository holding
OmniAnomaly's own preprocessed copy of the values, ``data/processed/<machine>_{train,test}.pkl``
(float32 arrays, as OmniAnomaly's ``data_preprocess.py`` writes them; tuananhphamds/MST-VAE
has 19 of the 28 machines): the values come from there, labels from OmniAnomaly, and machines
whose pickles are absent are left out.
Files are read at HEAD. Output per corpus: ``<series>.csv.gz`` (``timestamp,value``,
ISO-8601 UTC), ``windows.json`` (NAB's combined_windows.json shape), ``segments.json`` (the
raw labelled segments), ``sources.json`` (commit, sha256 of every source file read),
``README.md`` and ``LICENSE`` (copied from the source).

Windows, NAB style: a series of n rows with k labelled segments gets width
``w = int(0.1 * n / k)``; segment [a, b] gets ``[max(0, a - w//2), min(n-1, max(b, a + w//2))]``
with its anomaly at a; overlapping windows merge (the earliest anomaly is kept).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import pickle
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import numpy.typing as npt

WINDOW_FRACTION = 0.1
NAB_FORMAT = "%Y-%m-%d %H:%M:%S.%f"
ISO_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
SMD_START = datetime(2020, 1, 1, tzinfo=UTC)
SMD_STEP = timedelta(seconds=60)
SMD_PER_MACHINE = 2          # labelled metrics kept per machine
SMD_QUIET_MACHINES = 8       # machines that also give one incident-free metric
SMD_MIN_DISTINCT = 10        # a metric whose test part has fewer distinct values is constant


class Source:
    """Files of a repository at HEAD, from a bare git directory or a checkout."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.commit = self._git("rev-parse", "HEAD").decode().strip()
        self.read_files: dict[str, str] = {}

    def _git(self, *args: str) -> bytes:
        return subprocess.run(["git", f"--git-dir={self._git_dir()}", *args], check=True,
                              capture_output=True).stdout

    def _git_dir(self) -> Path:
        return self.path / ".git" if (self.path / ".git").exists() else self.path

    def list(self, prefix: str) -> list[str]:
        out = self._git("ls-tree", "-r", "--name-only", "HEAD", "--", prefix).decode()
        return sorted(line for line in out.splitlines() if line)

    def read(self, name: str) -> bytes:
        data = self._git("cat-file", "blob", f"HEAD:{name}")
        self.read_files[name] = hashlib.sha256(data).hexdigest()
        return data

    def has(self, name: str) -> bool:
        """Whether the file is at HEAD with its content (a snapshot may list absent blobs)."""
        return subprocess.run(["git", f"--git-dir={self._git_dir()}", "cat-file", "-e",
                               f"HEAD:{name}"], capture_output=True).returncode == 0


@dataclass(frozen=True, slots=True)
class Built:
    name: str                     # series name without the corpus prefix
    stamps: list[str]             # ISO-8601 UTC
    values: list[str]
    segments: list[tuple[int, int]]   # inclusive row ranges
    notes: list[dict[str, object]]    # per segment, what the source says of it


def nab_windows(n: int, segments: Sequence[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """(start, end, anomaly) rows, inclusive, sorted and disjoint."""
    if not segments:
        return []
    half = int(WINDOW_FRACTION * n / len(segments)) // 2
    raw = sorted((max(0, a - half), min(n - 1, max(b, a + half)), a) for a, b in segments)
    merged: list[tuple[int, int, int]] = []
    for start, end, anomaly in raw:
        if merged and start <= merged[-1][1]:
            s, e, first = merged[-1]
            merged[-1] = (s, max(e, end), min(first, anomaly))
        else:
            merged.append((start, end, anomaly))
    return merged


def runs(labels: npt.NDArray[np.int64]) -> list[tuple[int, int]]:
    """Inclusive (first, last) rows of each run of non-zero labels."""
    flags = np.concatenate(([0], (labels != 0).astype(np.int8), [0]))
    edges = np.flatnonzero(np.diff(flags))
    return [(int(a), int(b) - 1) for a, b in zip(edges[::2], edges[1::2])]


def _nab_stamp(iso: str) -> str:
    return datetime.strptime(iso, ISO_FORMAT).strftime(NAB_FORMAT)


def write_corpus(out: Path, corpus: str, series: Sequence[Built], source: Source,
                 license_text: bytes, readme: str,
                 values: tuple[str, Source] | None = None) -> dict[str, int]:
    """``values``: (repository, snapshot) of a second source the values came from."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    windows: dict[str, list[list[str]]] = {}
    segments: dict[str, list[dict[str, object]]] = {}
    rows = labelled = 0
    for s in series:
        path = out / f"{s.name}.csv.gz"
        path.parent.mkdir(parents=True, exist_ok=True)
        text = "timestamp,value\n" + "".join(f"{t},{v}\n" for t, v in zip(s.stamps, s.values))
        with path.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
            f.write(text.encode())
        key = f"{corpus}/{s.name}"
        wins = nab_windows(len(s.stamps), s.segments)
        windows[key] = [[_nab_stamp(s.stamps[a]), _nab_stamp(s.stamps[b])] for a, b, _ in wins]
        segments[key] = [{"rows": [a, b], "times": [s.stamps[a], s.stamps[b]], **note}
                         for (a, b), note in zip(s.segments, s.notes)]
        rows += len(s.stamps)
        labelled += len(wins)
    (out / "windows.json").write_text(json.dumps(windows, indent=4, sort_keys=True) + "\n")
    (out / "segments.json").write_text(json.dumps(segments, indent=1, sort_keys=True) + "\n")
    sources: dict[str, object] = {"commit": source.commit,
                                  "sha256": dict(sorted(source.read_files.items()))}
    if values:
        sources["values"] = {"repository": values[0], "commit": values[1].commit,
                             "sha256": dict(sorted(values[1].read_files.items()))}
    (out / "sources.json").write_text(json.dumps(sources, indent=1) + "\n")
    (out / "LICENSE").write_bytes(license_text)
    size = sum(p.stat().st_size for p in out.rglob("*.csv.gz"))
    stats = {"series": len(series), "rows": rows, "windows": labelled,
             "incident_free": sum(1 for s in series if not s.segments), "csv_gz_bytes": size}
    read = sorted(source.read_files.items())
    if values:
        read += sorted((f"{values[0]}: {name}", digest)
                       for name, digest in values[1].read_files.items())
    sha_lines = "\n".join(f"| `{name}` | `{digest}` |" for name, digest in read)
    (out / "README.md").write_text(
        readme.format(commit=source.commit, **stats)
        + "\n## sha256 of the source files read\n\n| file | sha256 |\n| --- | --- |\n"
        + sha_lines + "\n")
    return stats


# --- Microsoft Cloud Monitoring Dataset --------------------------------------------------

CLOUDMON_README = """\
# Microsoft Cloud Monitoring Dataset (public, labelled, real-world operations series)

From [microsoft/cloud-monitoring-dataset](https://github.com/microsoft/cloud-monitoring-dataset)
at commit `{commit}`
(MIT License, Copyright (c) Microsoft Corporation; the text is in `LICENSE` here).
Production telemetry series in 8 domains (purchase counts, database query rates per machine
and per application, incoming API rate, outgoing API latency, application crash rates, data
ingress rate, service unavailability), 1-minute or 1-hour steps, anomalous points labelled by
domain experts; some series have no labels (for false alerts).

Selection: all {series} series of `data/` at that commit (the source README speaks of 67),
whole ({rows} rows; the longest, hourly, spans ~260 days). Series
`cloudmon/<domain>/<file>` is `data/<domain>/<file>.csv` of the source.

Conversion (deterministic, `build_corpora.py`): timestamps are read as UTC (the source mixes
`2018-07-03 14:00:00` and `2018-07-03T14:00:00Z`) and written as ISO-8601 UTC; values are kept
as written; a timestamp repeated in the source keeps its first row's value, its label being
the largest of the repeats (240 repeated rows in the 19 `application-crash-rate-*` files, all
with the value repeated, 2 with a different label; 1 in `api-01` at the 2017-11-05 DST change,
whose second value is dropped); rows
without a value (42 in `app1-04`, `app1-05`, `app1-06`) are left out, as gaps, a label on
them (2 rows) passing to the next row with a value.
Labelled segments are the runs of `Label == 1`; windows are NAB-style around them: for k
segments in n rows, `w = int(0.1 n / k)`, segment [a, b] -> `[max(0, a - w//2),
min(n-1, max(b, a + w//2))]`, anomaly at a, overlapping windows merged (earliest anomaly kept).

Files: `<domain>/<file>.csv.gz` (`timestamp,value`), `windows.json` ({windows} windows, in the
shape of NAB's `combined_windows.json`), `segments.json` (the labelled segments: rows and
times), `sources.json`. {incident_free} series have no labelled segment. CSVs: {csv_gz_bytes}
bytes gzipped.

Reproduce: `python bench/data/build_corpora.py --cloudmon <git dir of
microsoft/cloud-monitoring-dataset at {commit}>`
"""


def _cloudmon_stamp(text: str) -> str:
    moment = datetime.fromisoformat(text.strip().strip('"').replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime(ISO_FORMAT)


def build_cloudmon(source: Source) -> list[Built]:
    series = []
    for path in source.list("data/"):
        if not path.endswith(".csv"):
            continue
        lines = source.read(path).decode().splitlines()
        if [c.strip().strip('"') for c in lines[0].split(",")] != ["TimeStamp", "Value", "Label"]:
            raise ValueError(f"{path}: unexpected header {lines[0]!r}")
        stamps: list[str] = []
        values: list[str] = []
        labels: list[int] = []
        pending = 0                          # the label of rows left out for want of a value
        for line in lines[1:]:
            if not line.strip():
                continue
            stamp_text, value, label = (c.strip().strip('"') for c in line.rsplit(",", 2))
            if not value:
                pending = max(pending, int(label))
                continue                     # a missing value: a gap in the series
            stamp = _cloudmon_stamp(stamp_text)
            if stamps and stamp <= stamps[-1]:
                if stamp != stamps[-1]:
                    raise ValueError(f"{path}: time goes back at {stamp_text}")
                labels[-1] = max(labels[-1], int(label))
                continue
            stamps.append(stamp)
            values.append(value)
            labels.append(max(int(label), pending))
            pending = 0
        name = path.removeprefix("data/").removesuffix(".csv")
        segs = runs(np.array(labels, dtype=np.int64))
        series.append(Built(name, stamps, values, segs, [{} for _ in segs]))
    return series


# --- Server Machine Dataset ----------------------------------------------------------------

SMD_README = """\
# Server Machine Dataset (SMD), univariate labelled series

From [NetManAIOps/OmniAnomaly](https://github.com/NetManAIOps/OmniAnomaly) at commit
`{commit}`, `ServerMachineDataset/` (MIT License, Copyright (c) 2021 NetManAIOps-SMD; the text
is in `LICENSE` here). 28 server machines of a large Internet company x 38 metrics, 1-minute
steps, values min-max scaled to [0, 1] by the publisher; no timestamps in the source.
<<VALUES>>
Series `smd/<machine>/<d>` is metric column d (1-based, as in `interpretation_label`) of the
machine: its `train` rows (history, unlabelled) followed by its `test` rows. Timestamps are
SYNTHETIC: 60 s steps from 2020-01-01T00:00:00Z. Values are written with 6 significant digits.
Its labelled segments are the runs of 1 in `test_label` whose `interpretation_label` entry
(the entry overlapping the run) lists d, shifted by the train length.

Selection (deterministic): metrics whose test part has fewer than 10 distinct values or zero
variance are constant and skipped; per machine, the <<PER>> (ties: lower d); for 8 machines
spread over the sorted list of machines built (positions round(i * m / 8), m machines), also
the lowest-d non-constant metric that no segment involves, where it has one (incident-free
series).<<TRIM>>
{series} series, {rows} rows, {incident_free} incident-free.

Windows NAB-style: for k segments in n rows, `w = int(0.1 n / k)`, segment [a, b] ->
`[max(0, a - w//2), min(n-1, max(b, a + w//2))]`, anomaly at a, overlaps merged (earliest
anomaly kept). `windows.json` ({windows} windows, NAB's `combined_windows.json` shape),
`segments.json` (segments: rows, times, the dimensions the interpretation names),
`sources.json` (commits and sha256 of every file read). CSVs: {csv_gz_bytes} bytes gzipped.

Reproduce: `python bench/data/build_corpora.py --smd <git dir of NetManAIOps/OmniAnomaly at
{commit}> <<REPRO>>`
"""

SMD_VALUES_NOTE = """
VALUES: the OmniAnomaly snapshot available here lacks its `train/` and `test/` files (each 4
MiB or more, beyond what the snapshot store keeps), so the values come from OmniAnomaly's own
preprocessed form of them (`data_preprocess.py`: the text files read as float32 and pickled
per machine) as vendored by [{repo}](https://github.com/{repo}) at commit `{commit}`,
`data/processed/<machine>_{{train,test}}.pkl` (that repository: MIT License, Copyright (c) 2022
Tuan Anh Pham; the data's licence stays OmniAnomaly's MIT licence above). Its pickles of the
larger machines (~28,700 rows, beyond 4 MiB) are absent from that snapshot too, so {m} of the
28 machines are here ({machines}); left out: {missing}. Checked at build time: every test
part has exactly one row per `test_label` row of OmniAnomaly, 38 metrics, values in [0, 1]
(and that copy's own
`*_test_label.pkl` files equal OmniAnomaly's `test_label`). Labels and interpretation labels
are OmniAnomaly's only.
"""

SMD_VALUES_REPO = "tuananhphamds/MST-VAE"
SMD_METRICS = 38


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickles a plain numpy array and nothing else (no other class can be named)."""

    def find_class(self, module: str, name: str) -> object:
        if module in ("numpy.core.multiarray", "numpy._core.multiarray") and \
                name == "_reconstruct":
            return _reconstruct
        if module == "numpy" and name == "ndarray":
            return np.ndarray
        if module == "numpy" and name == "dtype":
            return np.dtype
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed")


def _reconstruct(cls: type, shape: tuple[int, ...], dtype: object) -> npt.NDArray[np.int8]:
    if cls is not np.ndarray:
        raise pickle.UnpicklingError(f"{cls!r} is not allowed")
    return np.ndarray(shape, np.int8)


def _pickled_array(data: bytes, ndim: int) -> npt.NDArray[np.float64]:
    array = _ArrayUnpickler(io.BytesIO(data)).load()
    if not isinstance(array, np.ndarray) or array.ndim != ndim:
        raise ValueError(f"not a {ndim}-D array")
    return array.astype(np.float64)


def _machine_key(name: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", name))


def _matrix(data: bytes) -> npt.NDArray[np.float64]:
    return np.loadtxt(io.BytesIO(data), delimiter=",", dtype=np.float64, ndmin=2)


def _interpretation(text: str) -> list[tuple[int, int, set[int]]]:
    out = []
    for line in text.splitlines():
        if line.strip():
            span, dims = line.strip().split(":")
            a, b = span.split("-")
            out.append((int(a), int(b), {int(d) for d in dims.split(",") if d}))
    return out


def _constant(column: npt.NDArray[np.float64]) -> bool:
    return len(np.unique(column)) < SMD_MIN_DISTINCT or float(np.var(column)) == 0.0


def _smd_values(source: Source, values: Source | None, machine: str
                ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]] | None:
    """(train, test) of a machine, from OmniAnomaly's text files or, with ``values``, from
    the preprocessed pickles; None when the copy lacks them."""
    if values is None:
        root = "ServerMachineDataset"
        return (_matrix(source.read(f"{root}/train/{machine}.txt")),
                _matrix(source.read(f"{root}/test/{machine}.txt")))
    names = [f"data/processed/{machine}_{part}.pkl" for part in ("train", "test")]
    if not all(values.has(name) for name in names):
        return None
    train, test = (_pickled_array(values.read(name), 2) for name in names)
    if train.shape[1] != SMD_METRICS or test.shape[1] != SMD_METRICS:
        raise ValueError(f"{machine}: {train.shape[1]}/{test.shape[1]} metrics, not 38")
    return train, test


def _check_values(machine: str, train: npt.NDArray[np.float64],
                  test: npt.NDArray[np.float64], n_labels: int) -> None:
    if len(test) != n_labels:
        raise ValueError(f"{machine}: {len(test)} test rows, {n_labels} labels")
    if train.shape[1] != test.shape[1]:
        raise ValueError(f"{machine}: {train.shape[1]}/{test.shape[1]} metrics")
    for part in (train, test):
        if not (np.all(np.isfinite(part)) and part.min() >= 0.0 and part.max() <= 1.0):
            raise ValueError(f"{machine}: values outside [0, 1]")


def build_smd(source: Source, values: Source | None = None,
              per_machine: int = SMD_PER_MACHINE) -> tuple[list[Built], list[str], list[str]]:
    """The series, the machines built and the machines left out for want of values."""
    root = "ServerMachineDataset"
    machines = sorted((p.rsplit("/", 1)[1].removesuffix(".txt")
                       for p in source.list(f"{root}/test_label/")), key=_machine_key)
    data = {}
    missing = []
    for machine in machines:
        got = _smd_values(source, values, machine)
        if got is None:
            missing.append(machine)
        else:
            data[machine] = got
    machines = [m for m in machines if m in data]
    quiet = {machines[round(i * len(machines) / SMD_QUIET_MACHINES)]
             for i in range(min(SMD_QUIET_MACHINES, len(machines)))}
    series: list[Built] = []
    for machine in machines:
        train, test = data[machine]
        labels = _matrix(source.read(f"{root}/test_label/{machine}.txt"))[:, 0]
        _check_values(machine, train, test, len(labels))
        copy_labels = f"data/processed/{machine}_test_label.pkl"
        if values is not None and values.has(copy_labels) and not np.array_equal(
                _pickled_array(values.read(copy_labels), 1), labels):
            raise ValueError(f"{machine}: the copy's test labels differ from OmniAnomaly's")
        notes = _interpretation(source.read(f"{root}/interpretation_label/{machine}.txt")
                                .decode())
        segs = runs(labels.astype(np.int64))
        dims_of = []
        for a, b in segs:
            dims: set[int] = set()
            for s, e, listed in notes:
                if s <= b + 1 and e >= a:        # overlap, tolerant of 0/1-based ranges
                    dims |= listed
            dims_of.append(dims)
        offset = len(train)
        matrix = np.concatenate([train, test])
        per_dim: dict[int, list[tuple[int, int]]] = {}
        notes_of: dict[int, list[dict[str, object]]] = {}
        for d in range(1, test.shape[1] + 1):
            if _constant(test[:, d - 1]):
                continue
            mine = [(seg, ds) for seg, ds in zip(segs, dims_of) if d in ds]
            per_dim[d] = [(a + offset, b + offset) for (a, b), _ in mine]
            notes_of[d] = [{"test_rows": [a, b], "dimensions": sorted(ds)}
                           for (a, b), ds in mine]
        ranked = sorted((d for d in per_dim if per_dim[d]), key=lambda d: (-len(per_dim[d]), d))
        chosen = ranked[:per_machine]
        if machine in quiet:
            free = [d for d in sorted(per_dim) if not per_dim[d]]
            chosen += free[:1]
        stamps = [(SMD_START + i * SMD_STEP).strftime(ISO_FORMAT) for i in range(len(matrix))]
        for d in sorted(chosen):
            column = matrix[:, d - 1]
            series.append(Built(f"{machine}/{d}", stamps, [f"{v:.6g}" for v in column],
                                per_dim[d], notes_of[d]))
    return series, machines, missing


def _smd_readme(values: Source | None, machines: list[str], missing: list[str],
                per_machine: int) -> str:
    note = "" if values is None else SMD_VALUES_NOTE.format(
        repo=SMD_VALUES_REPO, commit=values.commit, m=len(machines),
        machines=", ".join(machines), missing=", ".join(missing) or "none")
    per = ("metric with the most labelled segments" if per_machine == 1
           else f"{per_machine} metrics with the most labelled segments")
    trim = "" if per_machine == SMD_PER_MACHINE else (
        f" (The rule's default keeps {SMD_PER_MACHINE} labelled metrics per machine; this "
        f"build keeps {per_machine}, to stay within the ~8 MB budget of vendored data.)")
    repro = (f"--smd-values <git dir of {SMD_VALUES_REPO} at {values.commit}>"
             if values else "")
    if per_machine != SMD_PER_MACHINE:
        repro += f" --smd-per-machine {per_machine}"
    return (SMD_README.replace("<<VALUES>>", note.replace("{", "{{").replace("}", "}}"))
            .replace("<<PER>>", per).replace("<<TRIM>>", trim)
            .replace("<<REPRO>>", repro.strip()))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cloudmon", type=Path, help="microsoft/cloud-monitoring-dataset")
    parser.add_argument("--smd", type=Path, help="NetManAIOps/OmniAnomaly (labels, values)")
    parser.add_argument("--smd-values", type=Path,
                        help=f"values from data/processed/*.pkl (e.g. {SMD_VALUES_REPO})")
    parser.add_argument("--smd-per-machine", type=int, default=SMD_PER_MACHINE,
                        help="labelled metrics kept per machine")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent)
    args = parser.parse_args(argv)
    if args.cloudmon:
        src = Source(args.cloudmon)
        built = build_cloudmon(src)
        stats = write_corpus(args.out / "cloudmon", "cloudmon", built, src,
                             src.read("LICENSE"), CLOUDMON_README)
        print("cloudmon", stats)
    if args.smd:
        src = Source(args.smd)
        values = Source(args.smd_values) if args.smd_values else None
        smd, machines, missing = build_smd(src, values, args.smd_per_machine)
        readme = _smd_readme(values, machines, missing, args.smd_per_machine)
        stats = write_corpus(args.out / "smd", "smd", smd, src,
                             src.read("ServerMachineDataset/LICENSE"), readme,
                             (SMD_VALUES_REPO, values) if values else None)
        print("smd", stats, "machines", len(machines), "left out", missing)


if __name__ == "__main__":
    main()
