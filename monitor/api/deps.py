"""Dependencies of the routes, as Annotated aliases."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from monitor.api.errors import ApiError
from monitor.api.state import ServiceState

_bearer = HTTPBearer(auto_error=False, description="the token given to `inferwatch serve "
                                                   "--token` (or INFERWATCH_API_TOKEN)")


def get_state(request: Request) -> ServiceState:
    state: ServiceState = request.app.state.service
    return state


StateDep = Annotated[ServiceState, Depends(get_state)]


def require_token(state: StateDep, credentials: Annotated[
        HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> None:
    """Anything that changes state needs the bearer token; with none configured, nothing may."""
    if state.token is None:
        raise ApiError(403, "forbidden", "this monitor has no API token, so it accepts no "
                                         "changes: start `inferwatch serve` with --token or "
                                         "INFERWATCH_API_TOKEN")
    if credentials is None or not secrets.compare_digest(
            credentials.credentials.encode(), state.token.encode()):
        raise ApiError(401, "unauthorized", "a valid 'Authorization: Bearer <token>' header "
                                            "is required", headers={"WWW-Authenticate": "Bearer"})


TokenDep = Depends(require_token)

Limit = Annotated[int, Query(ge=1, le=1000, description="items per page")]
Offset = Annotated[int, Query(ge=0, le=1_000_000_000, description="items to skip")]
