"""`inferwatch` imports only the chosen subcommand's module: the monitor's commands run where
torch is missing, and the reference server's commands say to install inferwatch[server]."""

from __future__ import annotations

import subprocess
import sys

import pytest

from monitor.cli import COMMANDS, chosen_command

# Runs `main(argv)` in a fresh interpreter where the server extra's modules cannot be imported
# (as after a plain `pip install inferwatch`); prints the exit status and whether torch or the
# reference server's modules were imported.
WITHOUT_TORCH = """
import sys
class NoServerExtra:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "safetensors", "tokenizers"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, NoServerExtra())
from monitor.cli import main
try:
    status = main(sys.argv[1:])
except SystemExit as exc:
    status = exc.code
loaded = sorted({m.split(".")[0] for m in sys.modules} & {"torch", "reference_server"})
print("status", status, "loaded", ",".join(loaded) or "-", file=sys.stderr)
"""


def without_torch(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", WITHOUT_TORCH, *argv], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize(("argv", "expected"), [
    (["rules", "windows", "--period", "7d"], "rules"),
    (["--log-level", "DEBUG", "dashboards", "generate"], "dashboards"),
    (["--log-level=DEBUG", "reference-server", "--port", "0"], "reference-server"),
    (["--help"], None),
    ([], None),
    (["no-such-command"], None),
], ids=["a command", "after --log-level and its value", "after --log-level=", "help",
        "nothing", "an unknown word"])
def test_the_chosen_command_is_the_first_word(argv: list[str], expected: str | None) -> None:
    command = chosen_command(argv)
    assert (command.name if command else None) == expected


@pytest.mark.parametrize("name", [c.name for c in COMMANDS if c.extra is None])
def test_monitor_commands_run_without_torch(name: str) -> None:
    proc = without_torch(name, "--help")
    assert proc.stderr.splitlines()[-1] == "status 0 loaded -", proc.stderr
    assert proc.stdout.startswith(f"usage: inferwatch {name}")


def test_a_monitor_command_imports_no_torch() -> None:
    proc = without_torch("rules", "windows", "--period", "7d")
    assert proc.stderr.splitlines()[-1] == "status 0 loaded -", proc.stderr
    assert "Burn-rate windows for a 1w SLO" in proc.stdout


@pytest.mark.parametrize("name", [c.name for c in COMMANDS if c.extra == "server"])
def test_server_commands_without_torch_say_to_install_the_extra(name: str) -> None:
    proc = without_torch(name, "--help")
    assert proc.stderr.splitlines() == [
        f"inferwatch {name}: torch, safetensors, tokenizers not installed; "
        "install inferwatch[server] (pip install 'inferwatch[server]')",
        "status 2 loaded -"]
