"""The scrape fetch: a target's /metrics page over HTTP, with aiohttp.

aiohttp parses HTTP in C (llhttp) and reads through asyncio's transports directly, where httpx
adds h11's pure-Python events, httpcore's pool and anyio's stream wrappers to every request:
with aiohttp the collector needs 34-57% less CPU per sample at 100-300 targets
(bench/collector_cpu.py, docs/benchmarks.md). The rules are exporters/fetch.py's, the same as
the httpx path's: one timeout bounds the whole fetch, a status outside 2xx fails the scrape
(redirects are not followed, as Prometheus does not), a body over ``max_bytes`` (declared, or
counted after decompression) fails it rather than being read half, and every failure is a
ScrapeError naming the target's URL.

What the httpx path did and this one keeps:

- TLS: verified against the same CA set, httpx's default context (certifi's bundle, or
  SSL_CERT_FILE / SSL_CERT_DIR from the environment), one context for every target;
- basic auth from the URL's user info (``http://user:pass@host/metrics``);
- gzip and deflate, decoded (the limit counts the decoded bytes);
- the exposition Accept header;
- idle connections kept 5 min (``KEEPALIVE_SECONDS``), no pool limit (the collector's
  semaphore bounds the scrapes in flight; a pool wait would read as a target timeout).

Proxies: the httpx path took HTTP_PROXY / HTTPS_PROXY / ALL_PROXY / NO_PROXY from the
environment. When any proxy is set there, ``use_aiohttp`` says no and the collector keeps the
httpx path for every scrape target, so proxied setups behave exactly as before (aiohttp's own
environment handling differs: no ALL_PROXY, no https:// proxies, and it would also read
~/.netrc for every request).
"""

from __future__ import annotations

import asyncio
import ssl
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Final

import aiohttp
import httpx

from exporters.fetch import ACCEPT_HEADERS, ScrapeError, append_chunk, check_head

__all__ = ["KEEPALIVE_SECONDS", "PageFetch", "ScrapeSession", "use_aiohttp"]

# How long an idle connection to a target is kept: longer than any usual scrape interval, as
# Prometheus' scrape clients do (5 min). A default of a few seconds drops it just before the
# next scrape at a 5 s interval, and a new connection per scrape costs about as much CPU as
# the rest of the scrape. A connection the target closed meanwhile is not reused.
KEEPALIVE_SECONDS: Final = 300.0

# A target's fetch: (url, timeout seconds, max body bytes) -> the page's text, or ScrapeError.
PageFetch = Callable[[str, float, int], Awaitable[str]]


def use_aiohttp() -> bool:
    """True unless the environment sets a proxy: then the httpx path keeps honouring it. The
    same reading of the environment as httpx's (urllib's getproxies: http, https, all)."""
    proxies = urllib.request.getproxies()
    return not any(proxies.get(scheme) for scheme in ("http", "https", "all"))


class ScrapeSession:
    """One aiohttp session for every scrape target, made in the running loop at the first
    fetch. Its connector keeps connections per (host, port, TLS), found by one dict lookup:
    unlike httpx's pool, which scans its connections on every request, one pool for all
    targets costs no more per scrape than one each."""

    def __init__(self, ssl_context: Callable[[], ssl.SSLContext] | None = None) -> None:
        self._ssl_context = ssl_context or httpx.create_ssl_context
        self._session: aiohttp.ClientSession | None = None
        self._closed = False

    def _open(self) -> aiohttp.ClientSession:
        if self._closed:
            raise RuntimeError("ScrapeSession used after aclose")
        connector = aiohttp.TCPConnector(ssl=self._ssl_context(), limit=0, limit_per_host=0,
                                         keepalive_timeout=KEEPALIVE_SECONDS)
        # trust_env=False: proxies are use_aiohttp's matter, and no ~/.netrc lookup (in a
        # thread) per request. No client-side timeouts: fetch's one deadline bounds it all.
        self._session = aiohttp.ClientSession(
            connector=connector, trust_env=False, timeout=aiohttp.ClientTimeout(),
            auto_decompress=True, raise_for_status=False)
        return self._session

    async def fetch(self, url: str, timeout: float, max_bytes: int) -> str:
        """The page at ``url`` as text (UTF-8, bad bytes replaced); ScrapeError otherwise."""
        session = self._session or self._open()
        try:
            async with asyncio.timeout(timeout):
                async with session.get(url, headers=ACCEPT_HEADERS,
                                       allow_redirects=False) as response:
                    check_head(response.status, response.headers.get("Content-Length", ""),
                               url, max_bytes)
                    body = bytearray()
                    async for chunk in response.content.iter_any():
                        append_chunk(body, chunk, url, max_bytes)
        except TimeoutError as exc:
            raise ScrapeError("timeout",
                              f"{url}: no complete answer within {timeout:g} s") from exc
        except aiohttp.ClientPayloadError as exc:
            if isinstance(exc.__cause__, aiohttp.http_exceptions.ContentEncodingError):
                raise ScrapeError("parse", f"{url}: {_describe(exc)}") from exc
            raise ScrapeError("connect", f"{url}: {_describe(exc)}") from exc
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            # refused, reset, DNS, TLS verification, an invalid URL or answer ...
            raise ScrapeError("connect", f"{url}: {_describe(exc)}") from exc
        return body.decode("utf-8", "replace")

    async def aclose(self) -> None:
        self._closed = True
        session, self._session = self._session, None
        if session is not None:
            await session.close()


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split())  # aiohttp's messages may span lines
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
