"""A plain `pip install inferwatch` in a fresh virtual environment: the user's requests and
urllib3 stay as they were (no urllib3-future written over urllib3), torch is not installed,
every monitor command runs, pushing dashboards works, and the commands that need the
reference server say to install inferwatch[server] and exit 2.

Needs the package index (pip fetches the dependencies; its cache is used across runs): without
it the tests skip, or fail under INFERWATCH_REQUIRE_INTEGRATION=1.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from bench.install_size import REPO, InstallError, Venv, build_wheel, make_venv, pip_install, run
from tests.asgi_thread import serving
from tests.integration import unavailable
from tests.monitor.dashboards.fake_grafana import TOKEN, GrafanaState, fake_grafana

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

# The fingerprint of the urllib3 that `import urllib3` finds: version, file, and a digest of
# every file of the package (urllib3-future's wheel overwrites those files in place).
URLLIB3_FINGERPRINT = """
import hashlib, importlib.metadata as md, json, pathlib, urllib3
root = pathlib.Path(urllib3.__file__).parent
digest = hashlib.sha256()
for path in sorted(root.rglob("*.py")):
    digest.update(str(path.relative_to(root)).encode() + path.read_bytes())
names = sorted(d.metadata["Name"].lower() for d in md.distributions())
print(json.dumps({"version": urllib3.__version__, "file": urllib3.__file__,
                  "digest": digest.hexdigest(), "distributions": names}))
"""

# requests, as a user calls it, against a local HTTP server in the same process.
REQUESTS_GET = """
import http.server, threading, requests
class Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Ok)
threading.Thread(target=server.serve_forever, daemon=True).start()
session = requests.Session()
session.trust_env = False
answer = session.get(f"http://127.0.0.1:{server.server_address[1]}/", timeout=10)
print(answer.status_code, answer.text, requests.__version__)
"""


@dataclass(frozen=True, slots=True)
class Installed:
    venv: Venv
    before: dict[str, Any]  # urllib3's fingerprint after `pip install requests urllib3`
    after: dict[str, Any]   # and after `pip install <the inferwatch wheel>`


def _fingerprint(venv: Venv) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(venv.query(URLLIB3_FINGERPRINT))
    return found


# Fail fast where the index cannot be reached (pip's own default waits minutes).
NETWORK_OPTIONS = ("--retries", "2", "--timeout", "30")


def _install(venv: Venv, *requirements: str) -> None:
    try:
        pip_install(venv, *requirements, options=NETWORK_OPTIONS)
    except InstallError as exc:
        if exc.unreachable:
            unavailable(f"the package index is unreachable (pip install "
                        f"{' '.join(requirements)}): {str(exc).strip().splitlines()[-1]}")
        raise


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    work = tmp_path_factory.mktemp("plain-install")
    wheel = build_wheel(work / "wheel")
    venv = make_venv(work / "venv")
    _install(venv, "requests", "urllib3")
    before = _fingerprint(venv)
    _install(venv, str(wheel))  # plain: no variables, dependencies from the index
    yield Installed(venv, before, _fingerprint(venv))


def inferwatch(venv: Venv, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed `inferwatch` command, run from the repository root (for its files)."""
    return run([str(venv.bin("inferwatch")), *args], timeout=180, cwd=REPO, check=False)


def test_urllib3_is_still_the_one_installed_before(installed: Installed) -> None:
    before, after = installed.before, installed.after
    assert (after["version"], after["file"], after["digest"]) == \
        (before["version"], before["file"], before["digest"])
    assert after["file"].startswith(str(installed.venv.root))
    assert "urllib3-future" not in after["distributions"]
    assert "niquests" not in after["distributions"]
    assert "inferwatch" in after["distributions"]


def test_requests_still_works(installed: Installed) -> None:
    status, text, _ = installed.venv.query(REQUESTS_GET).split()
    assert (status, text) == ("200", "ok")


def test_torch_and_the_server_extra_are_not_installed(installed: Installed) -> None:
    assert not {"torch", "safetensors", "tokenizers"} & set(installed.after["distributions"])


def test_the_command_is_the_installed_package(installed: Installed) -> None:
    where = installed.venv.query("import monitor; print(monitor.__file__)")
    assert where.startswith(str(installed.venv.root))


@pytest.mark.parametrize("args", [
    ["--help"],
    ["rules", "windows", "--period", "7d"],
    ["dashboards", "generate", "--check"],
    *[[name, "--help"] for name in ("bridge", "collect", "serve", "silence", "rules", "slo",
                                    "dashboards", "anomaly", "bench", "canary")],
], ids=lambda args: " ".join(args))
def test_monitor_commands_run_without_torch(installed: Installed, args: list[str]) -> None:
    proc = inferwatch(installed.venv, *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr


def test_dashboards_push_works(installed: Installed) -> None:
    state = GrafanaState()
    with serving(fake_grafana(state)) as url:
        proc = inferwatch(installed.venv, "dashboards", "push", "--url", url, "--token", TOKEN)
    assert proc.returncode == 0, proc.stderr
    assert [s["dashboard"]["uid"] for s in state.saved] == \
        ["inferwatch-inference", "inferwatch-slo"]
    assert f"{url}/d/inferwatch-slo/inferwatch-slos" in proc.stdout


@pytest.mark.parametrize("command", ["reference-server", "demo"])
def test_server_commands_say_to_install_the_server_extra(installed: Installed,
                                                         command: str) -> None:
    proc = inferwatch(installed.venv, command)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"inferwatch {command}: torch, safetensors, tokenizers not installed; "
        "install inferwatch[server] (pip install 'inferwatch[server]')"]


def test_the_gateway_s_otlp_push_says_to_install_the_otlp_extra(installed: Installed) -> None:
    proc = inferwatch(installed.venv, "gateway", "--upstream", "http://127.0.0.1:9",
                      "--otlp-metrics-endpoint", "http://127.0.0.1:9/v1/metrics")
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == (
        "inferwatch gateway: the OTLP metrics push needs opentelemetry-sdk and "
        "opentelemetry-exporter-otlp-proto-http; install inferwatch[otlp] "
        "(pip install 'inferwatch[otlp]')")
