"""Fetching and reading a /metrics page for a scrape, shared by the bridge (synchronous) and
the collector (asynchronous).

Both follow the same rules: an explicit timeout that bounds the whole fetch (a target that
trickles bytes is cut off too), a body over ``max_bytes`` fails the scrape (as Prometheus'
body_size_limit does) rather than being read half, and every failure is a ScrapeError with
one of SCRAPE_ERROR_REASONS.
"""

from __future__ import annotations

import asyncio
import time
from typing import Final

import httpx

from exporters.adapters import UnknownEngine, detect_engine, detect_engines
from exporters.exposition import ParsedPage

__all__ = ["ACCEPT_HEADERS", "AUTO", "SCRAPE_ERROR_REASONS", "ScrapeError", "append_chunk",
           "check_head", "engines_for", "fetch_page", "fetch_page_async", "require_samples"]

AUTO: Final = "auto"  # detect the engine from the page's metric names on every scrape

SCRAPE_ERROR_REASONS: Final = (
    "timeout", "connect", "http_status", "too_large", "parse", "unknown_engine",
)
ACCEPT_HEADERS: Final = {"Accept": "text/plain;version=0.0.4;q=0.9,*/*;q=0.1"}


class ScrapeError(Exception):
    """A scrape that gave no usable page; ``reason`` is one of SCRAPE_ERROR_REASONS."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def fetch_page(client: httpx.Client, url: str, timeout: float, max_bytes: int) -> str:
    deadline = time.monotonic() + timeout
    try:
        with client.stream("GET", url, timeout=timeout, headers=ACCEPT_HEADERS) as response:
            _check_head(response, url, max_bytes)
            body = bytearray()
            for chunk in response.iter_bytes():
                append_chunk(body, chunk, url, max_bytes)
                if time.monotonic() > deadline:
                    raise ScrapeError("timeout", f"{url}: body not complete within {timeout} s")
    except httpx.HTTPError as exc:
        raise _translate(exc, url, timeout) from exc
    return body.decode("utf-8", "replace")


async def fetch_page_async(client: httpx.AsyncClient, url: str, timeout: float,
                           max_bytes: int) -> str:
    try:
        async with asyncio.timeout(timeout):
            async with client.stream("GET", url, timeout=timeout,
                                     headers=ACCEPT_HEADERS) as response:
                _check_head(response, url, max_bytes)
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    append_chunk(body, chunk, url, max_bytes)
    except TimeoutError as exc:
        raise ScrapeError("timeout", f"{url}: no complete answer within {timeout:g} s") from exc
    except httpx.HTTPError as exc:
        raise _translate(exc, url, timeout) from exc
    return body.decode("utf-8", "replace")


def _check_head(response: httpx.Response, url: str, max_bytes: int) -> None:
    check_head(response.status_code, response.headers.get("content-length", ""), url,
               max_bytes)


def check_head(status: int, content_length: str, url: str, max_bytes: int) -> None:
    """ScrapeError for a status outside 2xx (a redirect included: not followed) or a declared
    length over ``max_bytes``."""
    if not 200 <= status < 300:
        raise ScrapeError("http_status", f"{url}: HTTP {status}")
    if content_length.isdigit() and int(content_length) > max_bytes:
        raise ScrapeError("too_large", f"{url}: {content_length} bytes, over {max_bytes}")


def append_chunk(body: bytearray, chunk: bytes, url: str, max_bytes: int) -> None:
    body += chunk
    if len(body) > max_bytes:
        raise ScrapeError("too_large", f"{url}: body over {max_bytes} bytes")


def _translate(exc: httpx.HTTPError, url: str, timeout: float) -> ScrapeError:
    if isinstance(exc, httpx.TimeoutException):
        return ScrapeError("timeout", f"{url}: no answer within {timeout:g} s ({exc!r})")
    if isinstance(exc, httpx.DecodingError):  # a Content-Encoding the body does not match
        return ScrapeError("parse", f"{url}: {exc!r}")
    return ScrapeError("connect", f"{url}: {exc!r}")  # refused, reset, protocol errors, ...


def require_samples(parsed: ParsedPage, url: str) -> None:
    """ScrapeError("parse") when not one sample of the page could be read."""
    if parsed.num_samples == 0:
        first = (f"line {parsed.problems[0].line}: {parsed.problems[0].message}"
                 if parsed.problems else "none")
        raise ScrapeError("parse", f"{url}: no sample could be read ({parsed.num_problems} "
                                   f"problems, first: {first})")


def engines_for(parsed: ParsedPage, engine: str) -> list[str]:
    """The mapping tables to apply: the one named, or (AUTO) the detected engine followed by
    any GPU exporter sharing the page; ScrapeError("unknown_engine") when none is known."""
    if engine != AUTO:
        return [engine]
    try:
        detect_engine(parsed)  # UnknownEngine lists what the page has
    except UnknownEngine as exc:
        raise ScrapeError("unknown_engine", str(exc)) from exc
    return detect_engines(parsed)
