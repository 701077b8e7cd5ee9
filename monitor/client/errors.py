"""The client's one exception: an API error body, a transport failure or an unusable answer,
naming the route."""

from __future__ import annotations


class ClientError(Exception):
    """A request to ``route`` failed: ``status`` is the HTTP status (None when no answer came),
    ``code`` the API's short code (``not_found``, ``bad_request``, ...) and ``message`` what."""

    def __init__(self, route: str, status: int | None, message: str,
                 code: str | None = None) -> None:
        where = f"{route}: {status}" if status is not None else route
        super().__init__(f"{where}: {message}")
        self.route = route
        self.status = status
        self.code = code
        self.message = message
