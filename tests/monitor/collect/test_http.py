"""The scrape fetch against real servers on 127.0.0.1 port 0: the aiohttp path
(monitor/collect/http.py) and the httpx path it replaced, held to the same rules (gzip, basic
auth from the URL, no redirects, the size limit, timeouts, TLS against SSL_CERT_FILE, errors
naming the target, kept connections), and a proxy from the environment still honoured."""

from __future__ import annotations

import asyncio
import base64
import gzip
import shutil
import ssl
import subprocess
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from exporters.fetch import ACCEPT_HEADERS, ScrapeError
from monitor.collect.collector import Collector, shared_tls_clients
from monitor.collect.config import MonitorConfig
from monitor.collect.http import PageFetch, ScrapeSession, use_aiohttp
from monitor.collect.snapshot import TargetState
from monitor.collect.sources import httpx_fetch
from tests.integration import unavailable

PAGE = (b"# TYPE gen_ai_server_generation_tokens counter\n"
        b'gen_ai_server_generation_tokens_total{model="m"} 7\n'
        b"# TYPE gen_ai_server_requests_running gauge\n"
        b'gen_ai_server_requests_running{model="m"} 3\n')
CREDENTIALS = "scraper:s3cret"
PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


class Target:
    """A /metrics server with the answers the fetch rules are about; it records what it got
    (request headers, the client's port per request, the request line's path)."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.headers: list[dict[str, str]] = []
        self.ports: list[int] = []
        self.paths: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as engines serve /metrics

            def do_GET(self) -> None:  # noqa: N802 (the http.server API)
                owner.headers.append(dict(self.headers))
                owner.ports.append(self.client_address[1])
                owner.paths.append(self.path)
                status, extra, body = owner.answer(self.path.rsplit("/", 1)[-1],
                                                   self.headers.get("Authorization"))
                self.send_response(status)
                extra.setdefault("Content-Length", str(len(body)))
                for name, value in extra.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a client that gave up

        self.server = Server(("127.0.0.1", 0), Handler)
        scheme = "http"
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.host = f"127.0.0.1:{self.server.server_address[1]}"
        self.base = f"{scheme}://{self.host}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()

    def answer(self, name: str, auth: str | None) -> tuple[int, dict[str, str], bytes]:
        if name == "gzip":
            return 200, {"Content-Encoding": "gzip"}, gzip.compress(PAGE)
        if name == "bad-gzip":
            return 200, {"Content-Encoding": "gzip"}, b"not gzip at all"
        if name == "bomb":  # 200 kB of comments, 1 kB on the wire
            return 200, {"Content-Encoding": "gzip"}, gzip.compress(b"#" * 200_000 + b"\n")
        if name == "large":
            return 200, {"Content-Length": "999999"}, b""
        if name == "auth":
            expected = "Basic " + base64.b64encode(CREDENTIALS.encode()).decode()
            return (200, {}, PAGE) if auth == expected else (401, {}, b"who are you\n")
        if name == "redirect":
            return 302, {"Location": "/metrics"}, b""
        if name == "stall":
            time.sleep(1.0)
        return 200, {"Content-Type": "text/plain; version=0.0.4"}, PAGE

    def url(self, name: str) -> str:
        return f"{self.base}/{name}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def target() -> Iterator[Target]:
    served = Target()
    yield served
    served.close()


FetchRun = Callable[[Callable[[PageFetch], Awaitable[Any]]], Any]


@pytest.fixture(params=["aiohttp", "httpx"])
def with_fetch(request: pytest.FixtureRequest) -> FetchRun:
    """Runs a coroutine with one path's fetch (made in the loop, closed after)."""
    def run(steps: Callable[[PageFetch], Awaitable[Any]]) -> Any:
        async def main() -> Any:
            if request.param == "aiohttp":
                session = ScrapeSession()
                try:
                    return await steps(session.fetch)
                finally:
                    await session.aclose()
            async with shared_tls_clients()() as client:
                return await steps(httpx_fetch(lambda: client))
        return asyncio.run(main())
    return run


def fails(with_fetch: FetchRun, url: str, timeout: float = 2.0,
          max_bytes: int = 100_000) -> ScrapeError:
    async def steps(fetch: PageFetch) -> ScrapeError:
        with pytest.raises(ScrapeError) as caught:
            await fetch(url, timeout, max_bytes)
        return caught.value
    error: ScrapeError = with_fetch(steps)
    assert str(error).startswith(f"{url}: "), error  # the message names the target
    return error


def test_a_page_is_fetched_with_the_exposition_accept_header_and_gzip_offered(
        target: Target, with_fetch: FetchRun) -> None:
    text = with_fetch(lambda fetch: fetch(target.url("metrics"), 2.0, 100_000))
    assert text == PAGE.decode()
    [headers] = target.headers
    assert headers["Accept"] == ACCEPT_HEADERS["Accept"]
    assert "gzip" in headers["Accept-Encoding"]


def test_a_gzipped_page_is_decoded_and_a_corrupt_one_is_a_parse_error(
        target: Target, with_fetch: FetchRun) -> None:
    assert with_fetch(lambda fetch: fetch(target.url("gzip"), 2.0, 100_000)) == PAGE.decode()
    assert fails(with_fetch, target.url("bad-gzip")).reason == "parse"


def test_the_size_limit_holds_declared_and_after_decompression(
        target: Target, with_fetch: FetchRun) -> None:
    declared = fails(with_fetch, target.url("large"))
    assert (declared.reason, str(declared)) == (
        "too_large", f"{target.url('large')}: 999999 bytes, over 100000")
    bomb = fails(with_fetch, target.url("bomb"))
    assert (bomb.reason, str(bomb)) == ("too_large",
                                        f"{target.url('bomb')}: body over 100000 bytes")


def test_basic_auth_comes_from_the_url(target: Target, with_fetch: FetchRun) -> None:
    with_credentials = target.url("auth").replace("://", f"://{CREDENTIALS}@")
    assert with_fetch(lambda fetch: fetch(with_credentials, 2.0, 100_000)) == PAGE.decode()
    refused = fails(with_fetch, target.url("auth"))
    assert (refused.reason, str(refused)) == ("http_status", f"{target.url('auth')}: HTTP 401")


def test_a_redirect_is_not_followed(target: Target, with_fetch: FetchRun) -> None:
    redirect = fails(with_fetch, target.url("redirect"))
    assert (redirect.reason, str(redirect)) == ("http_status",
                                                f"{target.url('redirect')}: HTTP 302")
    assert target.paths == ["/redirect"]


def test_a_stalled_answer_times_out(target: Target, with_fetch: FetchRun) -> None:
    started = time.monotonic()
    stalled = fails(with_fetch, target.url("stall"), timeout=0.2)
    assert (stalled.reason, str(stalled)) == (
        "timeout", f"{target.url('stall')}: no complete answer within 0.2 s")
    assert time.monotonic() - started < 0.9


def test_a_refused_connection_names_the_target(with_fetch: FetchRun) -> None:
    with ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler) as closed:
        port = closed.server_address[1]  # bound, then closed: nothing listens there
    assert fails(with_fetch, f"http://127.0.0.1:{port}/metrics").reason == "connect"


def test_the_connection_is_kept_between_scrapes(target: Target, with_fetch: FetchRun) -> None:
    async def steps(fetch: PageFetch) -> None:
        for _ in range(3):
            assert await fetch(target.url("metrics"), 2.0, 100_000) == PAGE.decode()
    with_fetch(steps)
    assert len(target.ports) == 3 and len(set(target.ports)) == 1


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (the openssl binary makes it)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        unavailable("the openssl binary is needed to make a test certificate")
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
                    "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=30)
    return cert, key


def test_tls_is_verified_against_ssl_cert_file(
        certificate: tuple[Path, Path], with_fetch: FetchRun,
        monkeypatch: pytest.MonkeyPatch) -> None:
    cert, key = certificate
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    served = Target(tls=context)
    try:
        unknown = fails(with_fetch, served.url("metrics"))  # not in the default CA set
        assert unknown.reason == "connect" and "CERTIFICATE_VERIFY_FAILED" in str(unknown)
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # read when the TLS context is made
        got = with_fetch(lambda fetch: fetch(served.url("metrics"), 2.0, 100_000))
        assert got == PAGE.decode()
    finally:
        served.close()


def scrape_once(url: str) -> TargetState:
    config = MonitorConfig.model_validate({"targets": [{"name": "t", "url": url}]})
    sunk: list[TargetState] = []

    async def main() -> None:
        async with Collector(config, lambda s: sunk.append(s.state)) as collector:
            await collector.scrape_once()
    asyncio.run(main())
    return sunk[0]


def test_the_collector_scrapes_with_aiohttp_unless_the_environment_sets_a_proxy(
        target: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    """With HTTP_PROXY set, scrapes keep the httpx path, which sends them to the proxy: here
    ``target`` answers as the proxy, for a host that only it knows (.invalid is reserved)."""
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    assert use_aiohttp()
    assert scrape_once(target.url("metrics")) is TargetState.FIRST
    assert "aiohttp" in target.headers[-1]["User-Agent"]

    monkeypatch.setenv("HTTP_PROXY", target.base)
    assert not use_aiohttp()
    assert scrape_once("http://engine-0.inferwatch.invalid:8000/metrics") is TargetState.FIRST
    assert target.paths[-1] == "http://engine-0.inferwatch.invalid:8000/metrics"
    assert "python-httpx" in target.headers[-1]["User-Agent"]
