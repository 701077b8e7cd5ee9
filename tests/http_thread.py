"""A plain HTTP handler served on a loopback port-0 socket from a daemon thread, for the
tests' hand-made pages (engines whose /metrics they control)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextmanager
def serving_handler(handler: type[BaseHTTPRequestHandler], name: str = "pages",
                    ) -> Iterator[str]:
    """Yields the base URL (http://127.0.0.1:PORT); shuts the server down on exit."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              name=name, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
