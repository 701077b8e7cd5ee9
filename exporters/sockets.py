"""Loopback sockets for the project's HTTP servers (the reference server, the monitor, the
demo's children and the tests)."""

from __future__ import annotations

import socket


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening socket; port 0 picks a free port (read it back with getsockname)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto named: accepted sockets inherit it, and asyncio sets TCP_NODELAY only on sockets
    # whose proto is IPPROTO_TCP. With proto 0, Nagle held each streamed chunk after the first
    # of a keep-alive connection until the client's delayed ACK (~40 ms).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def free_port() -> int:
    """A loopback port nothing listens on (at the time of asking: bind may still race)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port
