"""The gateway's ASGI app: forwards every request to the upstream and measures completions.

A plain ASGI callable rather than a framework route: the hot path is read body -> send
upstream -> forward each chunk as it arrives, and a watcher on ``receive`` notices a client
that goes away while the upstream is silent, so the upstream request is aborted at once (the
connection is closed, which vLLM and the reference server take as an abort). The upstream
side is aiohttp (its HTTP parser and stream reader are C): per chunk, httpx's read path (anyio
cancel scopes, h11) cost the gateway about as much as all the rest (docs/benchmarks.md).

POST /v1/chat/completions and /v1/completions are measured and judged; every other path
(/v1/models, /health, ...) is passed through unmeasured. GET /metrics is the gateway's own,
and so is POST /v1/traces: an OTLP/HTTP receiver whose request spans (vLLM's) become events
like the proxied requests' (``otlp_receiver.py``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Coroutine, Iterable, Sequence
from typing import Any, Final
from urllib.parse import quote

import aiohttp
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.types import Message, Receive, Scope, Send
from yarl import URL

from monitor.gateway.config import GatewayConfig
from monitor.gateway.events import EventSink, RequestEvent
from monitor.gateway.measure import RequestTiming, StreamMeter
from monitor.gateway.metrics import GatewayMetrics, MetricsMirror
from monitor.gateway.otlp_receiver import TRACES_PATH, OtlpReceiver
from monitor.gateway.tenants import TenantBudget, TenantIdentifier

log = logging.getLogger(__name__)

MEASURED_PATHS: Final = frozenset({"/v1/chat/completions", "/v1/completions"})
_HOP_BY_HOP: Final = frozenset({
    b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"te",
    b"trailer", b"transfer-encoding", b"upgrade", b"host", b"content-length"})
_NO_AUTO_HEADERS: Final = ("User-Agent", "Accept", "Accept-Encoding", "Content-Type")
_KEEPALIVE_SECONDS: Final = 4.0
_NO_BODY_METHODS: Final = frozenset({"GET", "HEAD", "DELETE", "OPTIONS"})
_UNKNOWN_MODEL: Final = "unknown"
_MAX_MODELS: Final = 1000


class UpstreamFailure(Exception):
    """The upstream did not answer: unreachable (502) or silent past the timeout (504)."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind = status, kind

    def body(self, upstream: str) -> bytes:
        return json.dumps({"error": {"message": str(self), "type": self.kind,
                                     "code": self.status, "upstream": upstream}}).encode()


class Gateway:
    """The ASGI app. ``sinks`` get each finished request's event after it is counted;
    ``mirrors`` (the OTLP metrics push) record what /metrics records."""

    def __init__(self, config: GatewayConfig, registry: CollectorRegistry,
                 sinks: Sequence[EventSink] = (), mirrors: Sequence[MetricsMirror] = ()
                 ) -> None:
        self.config = config
        self.registry = registry
        self.metrics = GatewayMetrics(registry, TenantBudget(config.max_tenants), mirrors)
        self.identify = TenantIdentifier(config.tenant_salt, config.tenant_header)
        self.sinks = list(sinks)
        self.otlp = OtlpReceiver(registry, config.slo_classes, self._finish)
        self._client: aiohttp.ClientSession | None = None
        self._models_ok: set[str] = set()  # answered with success at least once

    @property
    def client(self) -> aiohttp.ClientSession:
        if self._client is None:  # made on first use: it belongs to the serving event loop
            t = self.config.timeout_seconds
            connector = aiohttp.TCPConnector(
                limit=0,  # no cap on upstream connections: one per stream in flight
                # under the keep-alive of uvicorn-based engines (vLLM's 5 s), so a pooled
                # connection is not reused just as the engine closes it
                keepalive_timeout=_KEEPALIVE_SECONDS)
            self._client = aiohttp.ClientSession(
                connector=connector,
                # silence before the answer and between chunks; connect within 10 s at most
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=min(t, 10.0),
                                              sock_read=t),
                auto_decompress=False,  # bytes pass as they came
                cookie_jar=aiohttp.DummyCookieJar(),  # never one client's cookie to another
                skip_auto_headers=_NO_AUTO_HEADERS,  # the client's headers, not aiohttp's
                trust_env=False)  # straight to the upstream, never through an env proxy
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        arrived_at = time.perf_counter()
        if scope["path"] == "/metrics" and scope["method"] == "GET":
            await _respond(send, 200, generate_latest(self.registry), CONTENT_TYPE_LATEST)
            return
        if scope["path"] == TRACES_PATH:
            await self.otlp(scope, receive, send)
            return
        body = await _read_body(receive)
        tracked = _TrackedSend(send)
        if scope["method"] == "POST" and scope["path"] in MEASURED_PATHS:
            work: Coroutine[Any, Any, None] = self._measured(scope, body, tracked, arrived_at)
        else:
            work = self._passthrough(scope, body, tracked)
        await _until_disconnect(work, receive, tracked)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    # --- measured completions -----------------------------------------------------------
    async def _measured(self, scope: Scope, body: bytes, send: Send, arrived_at: float) -> None:
        headers = _header_dict(scope["headers"])
        payload = _json_object(body)
        stream = payload.get("stream") is True
        body, strip_usage = _ask_for_usage(payload, body) if stream else (body, False)
        model = payload.get("model")
        event = RequestEvent(
            path=scope["path"], model=model[:128] if isinstance(model, str) else _UNKNOWN_MODEL,
            tenant=self.identify.identify(headers),
            slo_class=self.config.slo_classes.for_request(headers), stream=stream,
            timing=RequestTiming(arrived_at))
        try:
            await self._exchange(scope, body, send, event, strip_usage)
        except asyncio.CancelledError:
            event.outcome = "cancelled"
            raise
        finally:
            self._finish(event)

    async def _exchange(self, scope: Scope, body: bytes, send: Send, event: RequestEvent,
                        strip_usage: bool) -> None:
        timing = event.timing
        try:
            response = await self._send_upstream(scope, body, identity=True)
        except UpstreamFailure as failure:
            event.outcome = "timeout" if failure.status == 504 else "error"
            event.status = failure.status
            await _respond(send, failure.status, failure.body(self.config.upstream))
            return
        started = False
        try:
            event.upstream_status = status = response.status
            if status >= 400 or not event.stream:
                await self._forward_whole(response, send, event)
                return
            event.status = status
            await send({"type": "http.response.start", "status": status,
                        "headers": _response_headers(response)})
            started = True
            # A compressed stream (an upstream that ignored accept-encoding: identity) passes
            # unread: only its first byte and its end are timed.
            meter = None if _encoded(response) else StreamMeter(timing, strip_usage)
            await self._forward_stream(response, send, timing, meter)
            # An engine that fails mid-stream can only say so in an SSE error event.
            event.outcome = "ok" if timing.stream_error is None else "error"
        except TimeoutError:
            event.outcome = "timeout"
            await self._fail(send, event, started, UpstreamFailure(
                504, "upstream_timeout", f"upstream {self.config.upstream} silent for "
                f"{self.config.timeout_seconds:g} s"))
        except aiohttp.ClientError as exc:
            event.outcome = "error"
            await self._fail(send, event, started, UpstreamFailure(
                502, "upstream_error", f"upstream {self.config.upstream} broke off: {exc!r}"))
        finally:
            # Read to the end, the connection went back to the pool already; unfinished, it
            # is closed, which the upstream takes as an abort.
            response.close()

    async def _fail(self, send: Send, event: RequestEvent, started: bool,
                    failure: UpstreamFailure) -> None:
        """A JSON error, or after the stream began (status sent) an SSE error event."""
        log.warning("%s: %s", event.path, failure)
        body = failure.body(self.config.upstream)
        if not started:
            event.status = failure.status
            await _respond(send, failure.status, body)
            return
        await send({"type": "http.response.body", "body": b"data: " + body + b"\n\n",
                    "more_body": False})

    async def _forward_whole(self, response: aiohttp.ClientResponse, send: Send,
                             event: RequestEvent) -> None:
        """An error or an answer not streamed: read whole, then sent as it came."""
        status = response.status
        content = await response.read()
        event.timing.first_token_at = time.perf_counter()  # what a client sees: the body
        if status < 400 and not _encoded(response):
            event.timing.read_body(_json_object(content))
        event.outcome = "ok" if status < 400 else "refused" if status < 500 else "error"
        event.status = status
        await _respond(send, status, content, headers=_response_headers(response))

    async def _forward_stream(self, response: aiohttp.ClientResponse, send: Send,
                              timing: RequestTiming, meter: StreamMeter | None) -> None:
        async for data in response.content.iter_any():
            now = time.perf_counter()
            if meter is not None:
                data = meter.feed(data, now)
            elif timing.first_token_at is None:
                timing.first_token_at = now
            if data:
                await send({"type": "http.response.body", "body": data, "more_body": True})
        rest = b"" if meter is None else meter.rest()
        await send({"type": "http.response.body", "body": rest, "more_body": False})

    def _finish(self, event: RequestEvent) -> None:
        timing = event.timing
        if timing.finished_at is None:
            timing.finished_at = time.perf_counter()
        event.good = event.slo_class.is_good(event.outcome == "ok", timing)
        if event.outcome == "ok" and len(self._models_ok) < _MAX_MODELS:
            self._models_ok.add(event.model)
        elif event.outcome == "refused" and event.model not in self._models_ok:
            event.model = _UNKNOWN_MODEL  # a typo or garbage name must not become a series
        self.metrics.record(event)
        for sink in self.sinks:
            sink(event)

    # --- everything else ----------------------------------------------------------------
    async def _passthrough(self, scope: Scope, body: bytes, send: Send) -> None:
        try:
            response = await self._send_upstream(scope, body, identity=False)
        except UpstreamFailure as failure:
            await _respond(send, failure.status, failure.body(self.config.upstream))
            return
        try:
            headers = _response_headers(response, keep_length=True)
            await send({"type": "http.response.start", "status": response.status,
                        "headers": headers})
            async for data in response.content.iter_any():
                await send({"type": "http.response.body", "body": data, "more_body": True})
        except (TimeoutError, aiohttp.ClientError) as exc:
            log.warning("upstream broke off %s: %r", scope["path"], exc)
        finally:
            response.close()
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _send_upstream(self, scope: Scope, body: bytes, identity: bool
                             ) -> aiohttp.ClientResponse:
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]
                   if k not in _HOP_BY_HOP and not (identity and k == b"accept-encoding")]
        if identity:  # chunks must be readable as they pass: no compression
            headers.append(("accept-encoding", "identity"))
        try:
            return await self.client.request(
                scope["method"], self._url(scope), headers=headers,
                data=body if body or scope["method"] not in _NO_BODY_METHODS else None,
                allow_redirects=False)  # a redirect is the client's to follow
        except TimeoutError as exc:
            raise UpstreamFailure(504, "upstream_timeout",
                                  f"upstream {self.config.upstream} did not answer within "
                                  f"{self.config.timeout_seconds:g} s ({type(exc).__name__})"
                                  ) from None
        except aiohttp.ClientError as exc:
            raise UpstreamFailure(502, "upstream_unreachable",
                                  f"upstream {self.config.upstream} unreachable: {exc!r}"
                                  ) from None

    def _url(self, scope: Scope) -> URL:
        """The upstream's base URL (its path a prefix) and the request's path as sent."""
        raw_path: bytes | None = scope.get("raw_path")
        path = raw_path.decode("latin-1") if raw_path else quote(scope["path"])
        query: bytes = scope.get("query_string", b"")
        if query:
            path += "?" + query.decode("latin-1")
        return URL(self.config.upstream.rstrip("/") + path, encoded=True)


def _ask_for_usage(payload: dict[str, Any], body: bytes) -> tuple[bytes, bool]:
    """Ask a streamed request for usage; True if the client did not, so its chunk is cut."""
    options = payload.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage") is True:
        return body, False
    payload["stream_options"] = {**(options if isinstance(options, dict) else {}),
                                 "include_usage": True}
    return json.dumps(payload).encode(), True


class _TrackedSend:
    """``send``, noting when the response is complete: from then on uvicorn's ``receive``
    answers http.disconnect at once, which is no client going away."""

    __slots__ = ("_send", "complete")

    def __init__(self, send: Send) -> None:
        self._send = send
        self.complete = False

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            self.complete = True  # before the await: the watcher wakes during it
        await self._send(message)


async def _until_disconnect(work: Coroutine[Any, Any, None], receive: Receive,
                            sent: _TrackedSend) -> None:
    """Run ``work`` in this task; cancel it if the client disconnects before its response is
    complete. The watcher is the second task, not the work: the work starts at once, with no
    task to make and no turn of the loop on the way to the upstream."""
    current = asyncio.current_task()
    assert current is not None  # an ASGI app always runs in a task
    gone = False

    async def watch() -> None:
        nonlocal gone
        await _disconnected(receive)
        if not sent.complete:
            gone = True
            current.cancel()  # the client went away: the work's cleanup aborts the upstream

    watcher = asyncio.ensure_future(watch())
    try:
        await work
    except asyncio.CancelledError:
        if not gone or current.uncancel() > 0:
            raise  # not (only) ours: the server is cancelling this request
    except Exception:
        log.exception("gateway request failed")
    else:
        if gone:  # our cancel came as the work ended and was swallowed: withdraw it
            current.uncancel()
    finally:
        watcher.cancel()


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _read_body(receive: Receive) -> bytes:
    parts: list[bytes] = []
    while True:
        message: Message = await receive()
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(parts)


def _header_dict(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    return {k.decode("latin-1"): v.decode("latin-1") for k, v in raw}


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        value = json.loads(body)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _encoded(response: aiohttp.ClientResponse) -> bool:
    encoding: str = response.headers.get("content-encoding", "identity")
    return encoding != "identity"


def _response_headers(response: aiohttp.ClientResponse, keep_length: bool = False
                      ) -> list[tuple[bytes, bytes]]:
    return [(k, v) for k, v in response.raw_headers
            if k.lower() not in _HOP_BY_HOP or (keep_length and k.lower() == b"content-length")]


async def _respond(send: Send, status: int, body: bytes,
                   content_type: str = "application/json",
                   headers: list[tuple[bytes, bytes]] | None = None) -> None:
    if headers is None:
        headers = [(b"content-type", content_type.encode())]
    headers = [*headers, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})

