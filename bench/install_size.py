"""Install size and time of `pip install inferwatch`: the monitor alone, and with the reference
server's extra (`inferwatch[server]`, torch's CPU build pinned first as the Makefile does).

    python -m bench.install_size [--variants monitor,server] [--cache] [--repeat N]

Each variant: a wheel of this checkout (`pip wheel --no-deps`), a fresh virtual environment
(`python -m venv`, its bundled pip), then a timed plain `pip install` of the wheel from the
package index, with pip's cache off unless --cache (so downloads count). Prints the seconds,
site-packages' size in MB (10^6 bytes), the number of distributions installed, the cores
other processes kept busy meanwhile (`others`, see bench/cpu_meter.py) and the largest packages.
The install test (tests/install/) uses the same helpers.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from bench.cpu_meter import _system_busy_seconds

REPO: Final = Path(__file__).resolve().parent.parent
# What the wheel is built from: the package's own files, copied so that the build writes
# nothing (build/, *.egg-info) into the checkout.
WHEEL_SOURCES: Final = ("pyproject.toml", "README.md", "monitor", "exporters", "reference_server")
TORCH_PIN: Final = "torch==2.13.0"  # the Makefile's: the CPU build here
# Variables that change what a plain `pip install` does (the old urllib3-future workaround);
# removed so that the install is the one a user gets.
NOT_PLAIN_ENV: Final = ("URLLIB3_NO_OVERRIDE", "PIP_NO_BINARY", "PIP_ONLY_BINARY",
                        "PIP_NO_DEPS", "PIP_CONSTRAINT", "PYTHONPATH")


class InstallError(Exception):
    """A pip or venv step failed; the message holds the command and the end of its output."""

    @property
    def unreachable(self) -> bool:
        """Whether pip said it could not reach the package index."""
        return any(marker in str(self) for marker in NETWORK_ERRORS)


# What pip prints when the package index cannot be reached.
NETWORK_ERRORS: Final = ("NewConnectionError", "ConnectTimeoutError", "ReadTimeoutError",
                         "Max retries exceeded", "Temporary failure in name resolution",
                         "Name or service not known", "Network is unreachable",
                         "Connection refused")


@dataclass(frozen=True, slots=True)
class Venv:
    root: Path

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    def bin(self, name: str) -> Path:
        return self.root / "bin" / name

    def site_packages(self) -> Path:
        return Path(self.query("import sysconfig; print(sysconfig.get_paths()['purelib'])"))

    def query(self, code: str) -> str:
        """Run ``code`` in this environment's Python (from its own directory, so nothing of
        the checkout is importable); its stdout, stripped."""
        return run([str(self.python), "-c", code], timeout=120, cwd=self.root).stdout.strip()


def plain_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in NOT_PLAIN_ENV}
    env.update(extra or {})
    return env


def run(cmd: Sequence[str], *, timeout: float, cwd: Path | None = None,
        check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout,
                          cwd=cwd, env=plain_env())
    if check and proc.returncode != 0:
        tail = (proc.stdout + proc.stderr)[-3000:]
        raise InstallError(f"{' '.join(cmd)} exited {proc.returncode}:\n{tail}")
    return proc


def build_wheel(out: Path, *, python: str = sys.executable, timeout: float = 300) -> Path:
    """A wheel of this checkout in ``out`` (built from a copy, without build isolation where
    the running Python has setuptools and wheel, else with it)."""
    source = out / "source"
    for name in WHEEL_SOURCES:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, source / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            source.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, source / name)
    isolation = ["--no-build-isolation"] if _has_build_backend(python) else []
    run([python, "-m", "pip", "wheel", "--no-deps", *isolation, "-q", "-w", str(out),
         str(source)], timeout=timeout)
    wheels = sorted(out.glob("inferwatch-*.whl"))
    if not wheels:
        raise InstallError(f"pip wheel left no inferwatch wheel in {out}")
    return wheels[-1]


def _has_build_backend(python: str) -> bool:
    probe = "import setuptools, wheel; print(int(setuptools.__version__.split('.')[0]))"
    proc = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=60)
    return proc.returncode == 0 and int(proc.stdout.strip() or 0) >= 68


def make_venv(root: Path, *, python: str = sys.executable) -> Venv:
    """A fresh virtual environment with its bundled pip (never the caller's packages)."""
    run([python, "-m", "venv", str(root)], timeout=180)
    return Venv(root)


def pip_install(venv: Venv, *requirements: str, cache: bool = True, timeout: float = 900,
                options: Sequence[str] = ()) -> float:
    """Seconds a plain `pip install` of ``requirements`` took in ``venv`` (``options``: pip's
    network options, e.g. --retries, which change nothing of what is installed)."""
    flags = [*options] if cache else ["--no-cache-dir", *options]
    start = time.perf_counter()
    run([str(venv.python), "-m", "pip", "install", "-q", *flags, *requirements],
        timeout=timeout)
    return time.perf_counter() - start


def tree_bytes(root: Path) -> int:
    return sum(p.lstat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def distributions(venv: Venv) -> list[str]:
    code = ("import importlib.metadata as m, json; print(json.dumps(sorted("
            "d.metadata['Name'].lower() for d in m.distributions())))")
    names: list[str] = json.loads(venv.query(code))
    return names


def largest(site_packages: Path, count: int) -> list[tuple[str, int]]:
    """The ``count`` largest top-level entries of site-packages and their bytes."""
    sizes = [(p.name, tree_bytes(p) if p.is_dir() else p.stat().st_size)
             for p in site_packages.iterdir() if not p.name.endswith(".dist-info")]
    return sorted(sizes, key=lambda item: -item[1])[:count]


def _busy_seconds() -> tuple[float | None, float]:
    """CPU seconds of every process since boot, and of this one and its children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    mine = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    return _system_busy_seconds(), mine


@dataclass(frozen=True, slots=True)
class Measurement:
    variant: str
    seconds: float
    site_packages_mb: float
    num_distributions: int
    has_torch: bool
    others: float | None  # cores other processes kept busy meanwhile
    largest: list[tuple[str, int]]


def measure(variant: str, wheel: Path, work: Path, *, cache: bool) -> Measurement:
    venv = make_venv(work / f"venv-{variant}")
    seconds = 0.0
    system0, mine0 = _busy_seconds()
    if variant == "server":
        seconds += pip_install(venv, TORCH_PIN, cache=cache)
        seconds += pip_install(venv, f"{wheel}[server]", cache=cache)
    else:
        seconds += pip_install(venv, str(wheel), cache=cache)
    system1, mine1 = _busy_seconds()
    others = None if system0 is None or system1 is None else \
        max(0.0, (system1 - system0) - (mine1 - mine0)) / seconds
    names = distributions(venv)
    site = venv.site_packages()
    measured = Measurement(variant, seconds, tree_bytes(site) / 1e6, len(names),
                           "torch" in names, others, largest(site, 6))
    shutil.rmtree(venv.root)
    return measured


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}"


def _print(m: Measurement) -> None:
    others = "?" if m.others is None else f"{m.others:.2f}"
    top = ", ".join(f"{name} {size / 1e6:.0f}" for name, size in m.largest)
    print(f"{m.variant:<10}{m.seconds:>9.1f}{m.site_packages_mb:>18.1f}"
          f"{m.num_distributions:>15}{'yes' if m.has_torch else 'no':>7}{others:>8}  {top}",
          flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", default="monitor,server")
    parser.add_argument("--cache", action="store_true",
                        help="let pip use its cache (default: --no-cache-dir, downloads count)")
    parser.add_argument("--repeat", type=int, default=1, help="installs of each variant")
    args = parser.parse_args(argv)
    print(f"machine: {_machine()}; pip cache {'on' if args.cache else 'off'}")
    with tempfile.TemporaryDirectory(prefix="inferwatch-install-") as tmp:
        work = Path(tmp)
        start = time.perf_counter()
        wheel = build_wheel(work / "wheel")
        print(f"wheel: {wheel.name} ({wheel.stat().st_size / 1e6:.2f} MB, built in "
              f"{time.perf_counter() - start:.1f} s)")
        print(f"{'variant':<10}{'seconds':>9}{'site-packages MB':>18}{'distributions':>15}"
              f"{'torch':>7}{'others':>8}  largest (MB)")
        for run_index in range(args.repeat):
            for variant in args.variants.split(","):
                m = measure(variant, wheel, work / f"run{run_index}", cache=args.cache)
                _print(m)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
