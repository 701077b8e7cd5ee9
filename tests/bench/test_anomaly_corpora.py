"""The vendored labelled corpora (bench/anomaly_corpora.py): every series loads with strictly
increasing times and windows inside it, the splits partition each corpus, the READMEs name a
licence, the vendored data stays small; and bench/data/build_corpora.py's SMD rule on a tiny
OmniAnomaly-shaped repository, with its values in the text files or in a second repository
holding OmniAnomaly's preprocessed pickles (as the vendored SMD is built)."""

from __future__ import annotations

import json
import pickle
import subprocess
from pathlib import Path

import numpy as np
import pytest

from bench import anomaly_corpora as ac
from bench.data import build_corpora as bc

DATA = Path(ac.__file__).parent / "data"
# NAB's own files repeat one timestamp each in these (as numenta/NAB ships them); they are
# read unchanged, as bench/anomaly_nab.py reads them
NAB_REPEATS = {"realAdExchange/exchange-2_cpc_results.csv",
               "realAdExchange/exchange-2_cpm_results.csv",
               "realTraffic/occupancy_t4013.csv", "realTraffic/speed_t4013.csv"}


@pytest.mark.parametrize("name", ac.CORPORA)
def test_every_series_loads_in_order_with_windows_inside(name: str) -> None:
    if not ac.available(name):
        pytest.skip(f"{name} is not vendored (see bench/data/{name}/README.md)")
    series = ac.load_corpus(name)
    assert series and [s.name for s in series] == ac.series_names(name)
    for s in series:
        assert len(s.times) == len(s.values) > 100, s.name
        steps = np.diff(s.times)
        if s.name in NAB_REPEATS:
            assert np.all(steps >= 0) and np.count_nonzero(steps == 0) == 1, s.name
        else:
            assert np.all(steps > 0), s.name
        assert np.all(np.isfinite(s.values)), s.name
        previous_end = -1
        for w in s.windows:
            assert previous_end < w.start <= w.anomaly <= w.end < len(s.times), (s.name, w)
            previous_end = w.end
    if name != "nab":
        assert all(s.name.startswith(f"{name}/") for s in series)
        assert any(not s.windows for s in series), "label-free series are needed"
        assert any(s.windows for s in series)


def test_cloudmon_counts() -> None:
    series = ac.load_corpus("cloudmon")
    assert len(series) == 60
    assert sum(len(s.windows) for s in series) == 263
    assert sum(1 for s in series if not s.windows) == 6


@pytest.mark.parametrize("name", ac.CORPORA)
def test_splits_partition_the_corpus(name: str) -> None:
    split = ac.splits(name)
    assert set(split) == {"a", "b"}
    names = ac.series_names(name)
    assert sorted(split["a"] + split["b"]) == names
    assert not set(split["a"]) & set(split["b"])
    if names:
        assert split["a"] and split["b"]
        assert abs(len(split["a"]) - len(split["b"])) <= len(names) // 4 + 1
    assert split == ac.splits(name)


@pytest.mark.parametrize("name", ac.CORPORA)
def test_readmes_name_a_licence(name: str) -> None:
    readme = (DATA / name / "README.md").read_text()
    assert "MIT License" in readme
    if name != "nab":
        assert (DATA / name / "LICENSE").read_text().lstrip().startswith("MIT License")


def test_vendored_data_stays_small() -> None:
    total = sum(p.stat().st_size for name in ac.CORPORA for p in (DATA / name).rglob("*")
                if p.is_file())
    assert total < 20 * 2**20


def test_nab_style_windows() -> None:
    # n=100, k=2: w = 5, half 2; [10, 11] -> [8, 12]; [11..] overlap merges, earliest anomaly
    assert bc.nab_windows(100, [(10, 11), (40, 50)]) == [(8, 12, 10), (38, 50, 40)]
    assert bc.nab_windows(100, [(0, 0), (2, 3)]) == [(0, 4, 0)]
    assert bc.nab_windows(10, []) == []
    assert bc.runs(np.array([0, 1, 1, 0, 1], dtype=np.int64)) == [(1, 2), (4, 4)]


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                    *args], check=True, capture_output=True)


def test_smd_rule_on_a_tiny_omnianomaly_shaped_repository(tmp_path: Path) -> None:
    repo = tmp_path / "omni"
    root = repo / "ServerMachineDataset"
    rng = np.random.default_rng(0)
    n_train, n_test, dims = 300, 300, 4
    for machine in ("machine-1-1", "machine-1-2", "machine-2-1"):
        for part, n in (("train", n_train), ("test", n_test)):
            values = rng.random((n, dims)).round(3)
            values[:, 3] = 0.5                      # constant metric: never selected
            (root / part).mkdir(parents=True, exist_ok=True)
            np.savetxt(root / part / f"{machine}.txt", values, delimiter=",", fmt="%.6f")
        labels = np.zeros(n_test, dtype=int)
        labels[100:110] = labels[200:205] = 1
        (root / "test_label").mkdir(exist_ok=True)
        np.savetxt(root / "test_label" / f"{machine}.txt", labels, fmt="%d")
        (root / "interpretation_label").mkdir(exist_ok=True)
        (root / "interpretation_label" / f"{machine}.txt").write_text(
            "100-110:1,2,4\n200-205:2\n")
    (root / "LICENSE").write_text("MIT License\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "data")
    out = tmp_path / "out"
    bc.main(["--smd", str(repo), "--out", str(out)])
    windows = json.loads((out / "smd" / "windows.json").read_text())
    # per machine: metric 2 (2 segments), metric 1 (1); the "quiet" machines (sorted
    # positions round(i * 3 / 8): 0, 0, 1) also get metric 3, which no segment involves;
    # metric 4 is constant
    assert sorted(windows) == ["smd/machine-1-1/1", "smd/machine-1-1/2", "smd/machine-1-1/3",
                               "smd/machine-1-2/1", "smd/machine-1-2/2", "smd/machine-1-2/3",
                               "smd/machine-2-1/1", "smd/machine-2-1/2"]
    assert windows["smd/machine-1-1/3"] == []
    series = {s.name: s for s in ac.load_corpus("smd", root=out)}
    two = series["smd/machine-1-1/2"]
    assert len(two.times) == n_train + n_test
    assert two.times[1] - two.times[0] == 60.0
    assert two.times[0] == 1577836800.0                       # 2020-01-01T00:00:00Z
    # n = 600, k = 2: w = 30, half 15; segment [400, 409] -> [385, 415], anomaly 400
    assert [(w.start, w.end, w.anomaly) for w in two.windows] == [(385, 415, 400),
                                                                  (485, 515, 500)]
    one = series["smd/machine-1-1/1"]
    assert [(w.start, w.end, w.anomaly) for w in one.windows] == [(370, 430, 400)]
    sources = json.loads((out / "smd" / "sources.json").read_text())
    assert len(sources["sha256"]) == 3 * 4 + 1
    split = ac.splits("smd", root=out)
    machines = [{n.split("/")[1] for n in split[h]} for h in "ab"]
    assert not machines[0] & machines[1]
    assert "MIT License" in (out / "smd" / "README.md").read_text()


def test_smd_values_from_preprocessed_pickles(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    omni = tmp_path / "omni"
    copy = tmp_path / "copy"
    root = omni / "ServerMachineDataset"
    for folder in (root / "test_label", root / "interpretation_label", copy / "data/processed"):
        folder.mkdir(parents=True)
    n = 200
    for machine in ("machine-1-1", "machine-1-2"):
        labels = np.zeros(n, dtype=int)
        labels[50:60] = 1
        np.savetxt(root / "test_label" / f"{machine}.txt", labels, fmt="%d")
        (root / "interpretation_label" / f"{machine}.txt").write_text("50-60:3\n")
    (root / "LICENSE").write_text("MIT License\n")
    for part in ("train", "test"):        # machine-1-1's values are absent from the copy
        values = rng.random((n, bc.SMD_METRICS)).astype(np.float32)
        (copy / "data/processed" / f"machine-1-2_{part}.pkl").write_bytes(pickle.dumps(values))
    for repo in (omni, copy):
        _git(repo, "init", "-q")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", "data")
    out = tmp_path / "out"
    bc.main(["--smd", str(omni), "--smd-values", str(copy), "--out", str(out)])
    windows = json.loads((out / "smd" / "windows.json").read_text())
    assert sorted(windows) == ["smd/machine-1-2/1", "smd/machine-1-2/3"]   # 3 labelled, 1 free
    sources = json.loads((out / "smd" / "sources.json").read_text())
    assert len(sources["values"]["sha256"]) == 2
    assert "left out: machine-1-1" in (out / "smd" / "README.md").read_text()
    series = {s.name: s for s in ac.load_corpus("smd", root=out)}
    assert len(series["smd/machine-1-2/3"].values) == 2 * n
    # labels count must match the test rows, and nothing but an array may be unpickled
    (copy / "data/processed" / "machine-1-2_test.pkl").write_bytes(
        pickle.dumps(np.zeros((n - 1, bc.SMD_METRICS), dtype=np.float32)))
    _git(copy, "commit", "-q", "-am", "short")
    with pytest.raises(ValueError, match="labels"):
        bc.main(["--smd", str(omni), "--smd-values", str(copy), "--out", str(out)])
    with pytest.raises(pickle.UnpicklingError):
        bc._pickled_array(pickle.dumps(Path("x")), 2)
