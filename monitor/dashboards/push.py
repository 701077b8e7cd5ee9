"""Push the generated dashboards to Grafana's HTTP API with httpx: folder, then each dashboard.

Every file is read and checked before the first request, so a bad file pushes nothing. Every
request has the timeout given. Failures become one ``PushError`` naming the Grafana URL or the
file and what went wrong; httpx's exceptions stay inside this module.

Four calls of Grafana's HTTP API (https://grafana.com/docs/grafana/latest/developers/http_api/):
``GET /api/frontend/settings`` (is it Grafana: its buildInfo), ``GET /api/folders/:uid``,
``POST /api/folders`` and ``POST /api/dashboards/db``. httpx, already a dependency, makes them:
grafana-client 4 and later depend on niquests, whose urllib3-future replaces the urllib3 that
requests and the user's other libraries import, so a plain install must not bring it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

import httpx

DEFAULT_TIMEOUT_SECONDS: Final = 10.0
COMMIT_MESSAGE: Final = "inferwatch dashboards push"
_UID_UNSAFE: Final = re.compile(r"[^a-z0-9_-]+")


class PushError(Exception):
    """Dashboards that could not be pushed; the message names the URL or file and why."""


@dataclass(frozen=True, slots=True)
class DashboardFile:
    path: Path
    dashboard: dict[str, Any]

    @property
    def title(self) -> str:
        return str(self.dashboard["title"])


def folder_uid(name: str) -> str:
    """A Grafana folder uid from its name: lower case, [a-z0-9_-], at most 40 characters."""
    uid = _UID_UNSAFE.sub("-", name.strip().lower()).strip("-")[:40]
    if not uid:
        raise PushError(f"folder {name!r}: give a name with letters or digits")
    return uid


def read_dashboard(path: Path) -> DashboardFile:
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise PushError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PushError(f"{path}: not a dashboard JSON file: {exc}") from None
    if not isinstance(data, dict) or not all(
            isinstance(data.get(k), str) and data.get(k) for k in ("uid", "title")) \
            or not isinstance(data.get("panels"), list):
        raise PushError(f"{path}: not a Grafana dashboard (an object with uid, title and "
                        "panels expected)")
    return DashboardFile(path, data)


def dashboard_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        raise PushError(f"{directory}: not a directory of dashboards")
    files = sorted(directory.glob("*.json"))
    if not files:
        raise PushError(f"{directory}: no *.json dashboards (run `inferwatch dashboards "
                        "generate` first)")
    return files


def _base_url(url: str) -> str:
    """Grafana's root URL ending in "/" (a sub-path install keeps its path), without any
    user:password part."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PushError(f"{url}: give Grafana's http:// or https:// URL")
    netloc = parts.netloc.rpartition("@")[2]
    path = parts.path if parts.path.endswith("/") else parts.path + "/"
    return urlunsplit((parts.scheme, netloc, path, "", ""))


def _credentials(url: str, token: str | None) -> tuple[dict[str, str], tuple[str, str] | None]:
    """The bearer token's header, or else basic auth from the URL's user:password."""
    if token:
        return {"Authorization": f"Bearer {token}"}, None
    parts = urlsplit(url)
    if parts.username:
        return {}, (unquote(parts.username), unquote(parts.password or ""))
    return {}, None


def _message(response: httpx.Response) -> str:
    """Grafana's error text: the "message" of its JSON body, else the body itself."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return f"{response.status_code}: {body['message']}"
    return f"{response.status_code}: {response.text.strip()[:200] or response.reason_phrase}"


class _Session:
    """One httpx client on Grafana's API and the messages of its failures."""

    def __init__(self, url: str, token: str | None, timeout: float) -> None:
        base = _base_url(url)
        self.url = base.rstrip("/")  # in messages: never the password of the URL
        self.timeout = timeout
        headers, auth = _credentials(url, token)
        self.client = httpx.Client(base_url=base, headers=headers, auth=auth, timeout=timeout)

    def close(self) -> None:
        self.client.close()

    def send(self, step: str, method: str, path: str,
             body: dict[str, Any] | None = None) -> httpx.Response:
        """The answer to one request; PushError if none came."""
        where = f"Grafana at {self.url}"
        try:
            return self.client.request(method, f"api/{path}", json=body)
        except httpx.TimeoutException:
            raise PushError(f"{where} did not answer within {self.timeout:g} s while "
                            f"{step}") from None
        except httpx.HTTPError as exc:
            raise PushError(f"cannot reach {where} while {step}: {exc}") from None

    def call(self, step: str, method: str, path: str,
             body: dict[str, Any] | None = None) -> Any:
        """The JSON answer to one request; PushError for an error status or no JSON."""
        response = self.send(step, method, path, body)
        self.refuse_errors(step, response)
        try:
            return response.json()
        except ValueError:
            raise PushError(f"Grafana at {self.url} gave an answer that is not JSON while "
                            f"{step}: {response.text.strip()[:200]!r}") from None

    def refuse_errors(self, step: str, response: httpx.Response) -> None:
        where = f"Grafana at {self.url}"
        status = response.status_code
        if status == 401:
            raise PushError(f"{where} refused the token while {step} (401 Unauthorized): "
                            "check --token")
        if 400 <= status < 500:
            raise PushError(f"{where} refused {step}: Client Error {_message(response)}")
        if status >= 500:
            raise PushError(f"{where} failed while {step}: Server Error {_message(response)}")

    def check(self) -> None:
        step = "checking the server"
        response = self.send(step, "GET", "frontend/settings")
        self.refuse_errors(step, response)
        try:
            info = response.json().get("buildInfo")
        except (ValueError, AttributeError):
            info = None
        if not isinstance(info, dict):
            raise PushError(f"{self.url}: does not answer like Grafana (no build info at "
                            "/api/frontend/settings)")

    def ensure_folder(self, name: str) -> str:
        uid = folder_uid(name)
        response = self.send(f"reading folder {uid}", "GET", f"folders/{uid}")
        if response.status_code != 404:
            self.refuse_errors(f"reading folder {uid}", response)
            return uid
        self.call(f"creating folder {uid}", "POST", "folders", {"title": name, "uid": uid})
        return uid

    def save(self, file: DashboardFile, folder: str) -> str:
        body = {"dashboard": {**file.dashboard, "id": None}, "folderUid": folder,
                "overwrite": True, "message": COMMIT_MESSAGE}
        answer = self.call(f"saving {file.path}", "POST", "dashboards/db", body)
        if not isinstance(answer, dict) or not isinstance(answer.get("url"), str):
            raise PushError(f"Grafana at {self.url} saved {file.path} but gave no URL: "
                            f"{answer!r}")
        return urljoin(self.url + "/", str(answer["url"]))


def push_dashboards(url: str, token: str | None, files: Sequence[Path], *, folder: str,
                    timeout: float = DEFAULT_TIMEOUT_SECONDS) -> list[tuple[str, str]]:
    """Create ``folder`` if missing and save every dashboard into it, overwriting; the
    (title, URL) of each."""
    if not timeout > 0:
        raise PushError(f"timeout must be > 0 seconds, got {timeout:g}")
    dashboards = [read_dashboard(path) for path in files]
    session = _Session(url, token, timeout)
    try:
        session.check()
        folder_id = session.ensure_folder(folder)
        return [(d.title, session.save(d, folder_id)) for d in dashboards]
    finally:
        session.close()
