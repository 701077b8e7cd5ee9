"""Small pieces the benches' own HTTP servers share."""

from __future__ import annotations

from typing import Any


async def read_body(receive: Any) -> bytes:
    """The whole request body of an ASGI HTTP request."""
    body = b""
    while True:
        message = await receive()
        body += bytes(message.get("body", b""))
        if not message.get("more_body"):
            return body
