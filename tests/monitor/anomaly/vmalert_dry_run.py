"""vmalert's own parser on a rule file: `vmalert -dryRun` reads every expression as MetricsQL."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.integration import unavailable


def assert_vmalert_parses(rule_file: Path) -> None:
    vmalert = shutil.which("vmalert")
    if vmalert is None:
        unavailable("vmalert is not installed (Debian package victoria-metrics)")
    done = subprocess.run([vmalert, "-dryRun", f"-rule={rule_file}"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-4000:]
