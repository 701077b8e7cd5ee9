"""A fake Grafana: the few HTTP API endpoints that `inferwatch dashboards push` calls, with
bearer-token checks, answering as Grafana's HTTP API docs describe.

A real Grafana cannot be installed here (not in Debian), so this is the conventions' one
allowed fake. It records what arrived for the test to assert on.
"""

from __future__ import annotations

import asyncio
import base64
import re
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, HTTPException, Request
from fastapi.responses import JSONResponse

TOKEN = "glsa_fake-service-account-token"
BASIC_USER = ("admin", "s3cret:pw")  # also signs in, as HTTP basic auth


@dataclass
class GrafanaState:
    folders: dict[str, dict[str, Any]] = field(default_factory=dict)
    saved: list[dict[str, Any]] = field(default_factory=list)  # POST /api/dashboards/db bodies
    requests: list[str] = field(default_factory=list)          # "METHOD /path", in order
    delay_seconds: float = 0.0                                 # stall every answer
    save_error: tuple[int, str] | None = None                  # status, message of saves


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def fake_grafana(state: GrafanaState) -> FastAPI:
    app = FastAPI()

    @app.middleware("http")
    async def record(request: Request, call_next: Any) -> Any:
        state.requests.append(f"{request.method} {request.url.path}")
        await asyncio.sleep(state.delay_seconds)
        return await call_next(request)

    @app.exception_handler(HTTPException)
    async def grafana_error(_: Request, exc: HTTPException) -> JSONResponse:
        return JSONResponse({"message": exc.detail}, status_code=exc.status_code)

    def signed_in(authorization: Annotated[str | None, Header()] = None) -> None:
        basic = base64.b64encode(":".join(BASIC_USER).encode()).decode()
        if authorization not in (f"Bearer {TOKEN}", f"Basic {basic}"):
            raise HTTPException(401, "invalid API key")

    auth = [Depends(signed_in)]

    @app.get("/api/frontend/settings", dependencies=auth)
    def settings() -> dict[str, Any]:
        return {"buildInfo": {"version": "11.3.0", "commit": "fake", "env": "production"}}

    @app.get("/api/folders/{uid}", dependencies=auth)
    def get_folder(uid: str) -> dict[str, Any]:
        if uid not in state.folders:
            raise HTTPException(404, "folder not found")
        return state.folders[uid]

    @app.post("/api/folders", dependencies=auth)
    def create_folder(body: dict[str, Any]) -> dict[str, Any]:
        uid = body.get("uid") or _slug(body["title"])
        if uid in state.folders:
            raise HTTPException(409, "a folder with the same uid already exists")
        state.folders[uid] = {"id": len(state.folders) + 1, "uid": uid,
                              "title": body["title"], "url": f"/dashboards/f/{uid}/"}
        return state.folders[uid]

    @app.post("/api/dashboards/db", dependencies=auth)
    def save_dashboard(body: dict[str, Any]) -> dict[str, Any]:
        dashboard = body["dashboard"]
        if state.save_error is not None:
            raise HTTPException(*state.save_error)
        if body.get("folderUid") not in state.folders:
            raise HTTPException(400, "folder not found")
        exists = any(s["dashboard"]["uid"] == dashboard["uid"] for s in state.saved)
        if exists and not body.get("overwrite"):
            raise HTTPException(412, "a dashboard with the same uid already exists")
        state.saved.append(body)
        uid = dashboard["uid"]
        return {"id": len(state.saved), "uid": uid, "status": "success",
                "url": f"/d/{uid}/{_slug(dashboard['title'])}", "version": 1}

    return app
