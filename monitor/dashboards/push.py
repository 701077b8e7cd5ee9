"""Push the generated dashboards to Grafana with grafana-client: folder, then each dashboard.

Every file is read and checked before the first request, so a bad file pushes nothing. Every
request has the timeout given. Failures become one ``PushError`` naming the Grafana URL or the
file and what went wrong; grafana-client's and niquests' exceptions stay inside this module.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import urljoin, urlsplit

import niquests.exceptions
from grafana_client.api import GrafanaApi
from grafana_client.client import (
    GrafanaClientError,
    GrafanaException,
    GrafanaServerError,
    GrafanaTimeoutError,
    GrafanaUnauthorizedError,
)

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
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PushError(f"{url}: give Grafana's http:// or https:// URL")
    # grafana-client appends "api" to the path: a sub-path must end with "/".
    return url if url.endswith("/") else url + "/"


def _explain(exc: Exception, url: str, step: str, timeout: float) -> str:
    where = f"Grafana at {url}"
    if isinstance(exc, GrafanaUnauthorizedError):
        return f"{where} refused the token while {step} (401 Unauthorized): check --token"
    if isinstance(exc, GrafanaTimeoutError):
        return f"{where} did not answer within {timeout:g} s while {step}"
    if isinstance(exc, GrafanaClientError):
        return f"{where} refused {step}: {exc.message}"
    if isinstance(exc, GrafanaServerError):
        return f"{where} failed while {step}: {exc.message}"
    if isinstance(exc, niquests.exceptions.Timeout):
        return f"{where} did not answer within {timeout:g} s while {step}"
    if isinstance(exc, (niquests.exceptions.RequestException, GrafanaException)):
        return f"cannot reach {where} while {step}: {exc}"
    return f"{where} gave an unexpected answer while {step}: {exc}"


class _Session:
    """One GrafanaApi and the step it is at, for messages."""

    def __init__(self, url: str, token: str | None, timeout: float) -> None:
        self.url = url
        self.timeout = timeout
        self.api = GrafanaApi.from_url(_base_url(url), credential=token or None,
                                       timeout=timeout)

    def call(self, step: str, request: Callable[[], Any]) -> Any:
        try:
            return request()
        except (GrafanaException, niquests.exceptions.RequestException, ValueError) as exc:
            raise PushError(_explain(exc, self.url, step, self.timeout)) from None

    def check(self) -> None:
        try:
            info = self.call("checking the server", self.api.health.check)
        except AttributeError:  # grafana-client reads buildInfo from a text (not JSON) answer
            info = None
        if not isinstance(info, dict):
            raise PushError(f"{self.url}: does not answer like Grafana (no build info at "
                            "/api/frontend/settings)")

    def ensure_folder(self, name: str) -> str:
        uid = folder_uid(name)
        try:
            self.api.folder.get_folder(uid)
            return uid
        except GrafanaClientError as exc:
            if exc.status_code != 404:
                raise PushError(_explain(exc, self.url, f"reading folder {uid}",
                                         self.timeout)) from None
        except (GrafanaException, niquests.exceptions.RequestException) as exc:
            raise PushError(_explain(exc, self.url, f"reading folder {uid}",
                                     self.timeout)) from None
        self.call(f"creating folder {uid}", lambda: self.api.folder.create_folder(name, uid=uid))
        return uid

    def save(self, file: DashboardFile, folder: str) -> str:
        body = {"dashboard": {**file.dashboard, "id": None}, "folderUid": folder,
                "overwrite": True, "message": COMMIT_MESSAGE}
        answer = self.call(f"saving {file.path}",
                           lambda: self.api.dashboard.update_dashboard(body))
        if not isinstance(answer, dict) or not isinstance(answer.get("url"), str):
            raise PushError(f"Grafana at {self.url} saved {file.path} but gave no URL: "
                            f"{answer!r}")
        return urljoin(_base_url(self.url), str(answer["url"]))


def push_dashboards(url: str, token: str | None, files: Sequence[Path], *, folder: str,
                    timeout: float = DEFAULT_TIMEOUT_SECONDS) -> list[tuple[str, str]]:
    """Create ``folder`` if missing and save every dashboard into it, overwriting; the
    (title, URL) of each."""
    if not timeout > 0:
        raise PushError(f"timeout must be > 0 seconds, got {timeout:g}")
    dashboards = [read_dashboard(path) for path in files]
    session = _Session(url, token, timeout)
    session.check()
    folder_id = session.ensure_folder(folder)
    return [(d.title, session.save(d, folder_id)) for d in dashboards]
