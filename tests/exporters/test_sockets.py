"""Loopback sockets: accepted connections send small writes at once (TCP_NODELAY)."""

from __future__ import annotations

import asyncio
import socket

from exporters.sockets import bind_socket


def test_accepted_connections_get_tcp_nodelay_from_asyncio():
    listener = bind_socket("127.0.0.1", 0)
    port = listener.getsockname()[1]

    async def accept_one() -> int:
        accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            sock = writer.get_extra_info("socket")
            accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(on_connect, sock=listener)
        async with server:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            value = await asyncio.wait_for(accepted, 5)
            writer.close()
            return value

    assert asyncio.run(accept_one()) != 0
