"""A lean HTTP/1.1 client for the load generator's streamed POSTs (issue 21).

httpx costs a pure-Python h11 event, an anyio receive and a connection-pool scan per network
read, and its pool grows costlier with every idle connection it keeps: on a 2-core machine
serving a ms-scale engine, that client CPU showed in the latencies it measured. This client
does only what a benchmark's request needs: one keep-alive connection per request in flight
(reused LIFO), the request written in one call, the status and headers parsed once, and the
body (chunked, sized or to EOF) handed over once per network read.

Failures raise httpx's exceptions (ConnectError, ConnectTimeout, ReadTimeout, ReadError,
RemoteProtocolError), so callers classify them as they do httpx's. http and https (the
default SSL context) only; no proxies, no redirects, no compression (it asks for identity).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Mapping
from types import TracebackType
from urllib.parse import urlsplit

import httpx

READ_SIZE = 1 << 16


class _Connection:
    __slots__ = ("reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @property
    def usable(self) -> bool:
        return not (self.writer.is_closing() or self.reader.at_eof())

    def close(self) -> None:
        self.writer.close()


class StreamResponse:
    """A response being read: ``status``, ``headers`` (lower-case names), then the body by
    ``aiter_bytes()`` (one piece per network read) or ``aread()``."""

    def __init__(self, client: StreamClient, connection: _Connection, status: int,
                 headers: dict[str, str], rest: bytes) -> None:
        self.status_code, self.headers = status, headers
        self._client, self._connection, self._rest = client, connection, rest
        self._complete = False
        self._reusable = headers.get("connection", "").lower() != "close"

    async def _read(self) -> bytes:
        data = await self._client._read(self._connection)
        if not data:
            raise httpx.RemoteProtocolError("the server closed the connection mid-body")
        return data

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            return self._chunked()
        length = self.headers.get("content-length")
        if length is not None:
            return self._sized(int(length))
        self._reusable = False
        return self._to_eof()

    async def aread(self) -> bytes:
        return b"".join([piece async for piece in self.aiter_bytes()])

    async def _sized(self, length: int) -> AsyncIterator[bytes]:
        data, self._rest = self._rest, b""
        while True:
            if len(data) >= length:
                self._complete = True
                if data[:length]:
                    yield data[:length]
                return
            if data:
                yield data
                length -= len(data)
            data = await self._read()

    async def _to_eof(self) -> AsyncIterator[bytes]:
        data, self._rest = self._rest, b""
        while True:
            if data:
                yield data
            data = await self._client._read(self._connection)
            if not data:
                self._complete = True
                return

    async def _chunked(self) -> AsyncIterator[bytes]:
        """Dechunk: every complete chunk in the buffer, joined, per network read."""
        buffer, self._rest = self._rest, b""
        pos = 0
        while True:
            pieces: list[bytes] = []
            while True:
                line_end = buffer.find(b"\r\n", pos)
                if line_end < 0:
                    break
                try:
                    size = int(buffer[pos:line_end].split(b";", 1)[0], 16)
                except ValueError:
                    raise httpx.RemoteProtocolError(
                        f"bad chunk size {buffer[pos:line_end][:20]!r}") from None
                if size == 0:   # the last chunk; then trailers (none, in practice) and CRLF
                    if buffer.find(b"\r\n\r\n", line_end) < 0:
                        break
                    self._complete = True
                    if pieces:
                        yield b"".join(pieces)
                    return
                end = line_end + 2 + size
                if len(buffer) < end + 2:
                    break
                pieces.append(buffer[line_end + 2:end])
                pos = end + 2
            if pieces:
                yield pieces[0] if len(pieces) == 1 else b"".join(pieces)
            buffer = buffer[pos:] + await self._read()
            pos = 0

    def release(self) -> None:
        """Back to the pool when the body was read to its end, else closed."""
        if self._complete and self._reusable and self._connection.usable:
            self._client._idle.append(self._connection)
        else:
            self._connection.close()


class _Exchange:
    def __init__(self, client: StreamClient, path: str, body: bytes) -> None:
        self.client, self.path, self.body = client, path, body
        self.response: StreamResponse | None = None

    async def __aenter__(self) -> StreamResponse:
        self.response = await self.client._exchange(self.path, self.body)
        return self.response

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self.response is not None:
            if exc is not None:
                self.response._complete = False
            self.response.release()


class StreamClient:
    """POSTs of JSON bodies to one origin, the answers streamed; ``async with`` closes it."""

    def __init__(self, base_url: str, headers: Mapping[str, str] | None = None,
                 timeout: float = 300.0, connect_timeout: float = 10.0) -> None:
        url = urlsplit(base_url.rstrip("/"))
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"{base_url}: not an http(s) URL")
        self.host = url.hostname
        self.port = url.port or (443 if url.scheme == "https" else 80)
        self.prefix = url.path
        self.ssl = ssl.create_default_context() if url.scheme == "https" else None
        self.timeout, self.connect_timeout = timeout, connect_timeout
        host = self.host if url.port is None else f"{self.host}:{url.port}"
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self._head = (f"Host: {host}\r\nUser-Agent: inferwatch\r\nAccept: */*\r\n"
                      f"Accept-Encoding: identity\r\nContent-Type: application/json\r\n"
                      f"{extra}").encode("latin-1")
        self._idle: list[_Connection] = []

    def stream(self, path: str, body: bytes) -> _Exchange:
        """``async with client.stream(path, body) as response``: POST ``body`` (JSON)."""
        return _Exchange(self, path, body)

    async def _connect(self) -> _Connection:
        try:
            async with asyncio.timeout(self.connect_timeout):
                reader, writer = await asyncio.open_connection(
                    self.host, self.port, ssl=self.ssl, limit=READ_SIZE)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"no connection to {self.host}:{self.port} within "
                                       f"{self.connect_timeout:g} s") from None
        except OSError as exc:
            raise httpx.ConnectError(str(exc)) from None
        return _Connection(reader, writer)

    async def _read(self, connection: _Connection) -> bytes:
        try:
            async with asyncio.timeout(self.timeout):
                return await connection.reader.read(READ_SIZE)
        except TimeoutError:
            raise httpx.ReadTimeout(f"nothing read for {self.timeout:g} s") from None
        except OSError as exc:
            raise httpx.ReadError(f"{type(exc).__name__}: {exc}") from None

    async def _exchange(self, path: str, body: bytes) -> StreamResponse:
        request = (f"POST {self.prefix}{path} HTTP/1.1\r\nContent-Length: {len(body)}\r\n"
                   ).encode("latin-1") + self._head + b"\r\n" + body
        while self._idle:
            connection = self._idle.pop()
            if not connection.usable:
                connection.close()
                continue
            # A kept-alive connection the server has just closed fails before any answer:
            # then the request goes once more, on a new connection.
            try:
                return await self._send(connection, request)
            except (httpx.ReadError, httpx.RemoteProtocolError):
                connection.close()
        return await self._send(await self._connect(), request)

    async def _send(self, connection: _Connection, request: bytes) -> StreamResponse:
        try:
            connection.writer.write(request)
            if connection.writer.transport.get_write_buffer_size() > READ_SIZE:
                await connection.writer.drain()
            head = b""
            while (end := head.find(b"\r\n\r\n")) < 0:
                data = await self._read(connection)
                if not data:
                    raise httpx.RemoteProtocolError("the server closed the connection "
                                                    "without answering")
                head += data
        except OSError as exc:
            connection.close()
            raise httpx.ReadError(f"{type(exc).__name__}: {exc}") from None
        except BaseException:
            connection.close()
            raise
        lines = head[:end].decode("latin-1").split("\r\n")
        try:
            status = int(lines[0].split(" ", 2)[1])
        except (IndexError, ValueError):
            connection.close()
            raise httpx.RemoteProtocolError(f"not an HTTP status line: {lines[0][:80]!r}") \
                from None
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        return StreamResponse(self, connection, status, headers, head[end + 4:])

    async def aclose(self) -> None:
        for connection in self._idle:
            connection.close()
        self._idle.clear()

    async def __aenter__(self) -> StreamClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
