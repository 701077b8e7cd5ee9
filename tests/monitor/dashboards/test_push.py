"""`inferwatch dashboards push` (httpx on Grafana's HTTP API) against a fake Grafana on a real
uvicorn server: folder created once, every dashboard saved with overwrite, URLs printed; a refused
token, an unreachable URL, a slow server and a bad file each give one message and exit 2."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.asgi_thread import serving
from tests.processes import free_port

from .dashboard_queries import DASHBOARDS_DIR, load_dashboards
from .fake_grafana import BASIC_USER, TOKEN, GrafanaState, fake_grafana
from .live_stack import static_pages
from .test_generate import run_cli

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def grafana() -> Iterator[tuple[str, GrafanaState]]:
    state = GrafanaState()
    with serving(fake_grafana(state)) as url:
        yield url, state


def push(url: str, *extra: str, token: str = TOKEN) -> int:
    return run_cli(["push", "--url", url, "--token", token, "--dir", str(DASHBOARDS_DIR),
                    *extra])


def test_push_creates_the_folder_and_saves_every_dashboard(
        grafana: tuple[str, GrafanaState], capsys: pytest.CaptureFixture[str]) -> None:
    url, state = grafana
    assert push(url) == 0
    assert list(state.folders) == ["inferwatch"]
    assert state.folders["inferwatch"]["title"] == "inferwatch"
    checked_in = load_dashboards()
    assert [s["dashboard"]["uid"] for s in state.saved] == \
        [d["uid"] for d in checked_in.values()] == ["inferwatch-inference", "inferwatch-slo"]
    for body, dashboard in zip(state.saved, checked_in.values()):
        assert body["overwrite"] is True and body["folderUid"] == "inferwatch"
        assert body["dashboard"] == {**dashboard, "id": None}
    assert capsys.readouterr().out.splitlines() == [
        f"inferwatch / Inference: {url}/d/inferwatch-inference/inferwatch-inference",
        f"inferwatch / SLOs: {url}/d/inferwatch-slo/inferwatch-slos"]

    state.requests.clear()
    assert push(url) == 0  # again: the folder exists, the dashboards are overwritten
    assert "POST /api/folders" not in state.requests
    assert state.requests.count("POST /api/dashboards/db") == 2
    assert len(state.saved) == 4


def test_a_named_folder_gets_a_uid_from_its_name(grafana: tuple[str, GrafanaState]) -> None:
    url, state = grafana
    assert push(url, "--folder", "LLM Serving / Prod") == 0
    assert state.folders["llm-serving-prod"]["title"] == "LLM Serving / Prod"
    assert {s["folderUid"] for s in state.saved} == {"llm-serving-prod"}


def test_a_user_and_password_in_the_url_sign_in_and_are_not_printed(
        grafana: tuple[str, GrafanaState], capsys: pytest.CaptureFixture[str]) -> None:
    url, state = grafana
    user, password = BASIC_USER
    with_user = url.replace("http://", f"http://{user}:{quote(password, safe='')}@")
    assert run_cli(["push", "--url", with_user, "--token", "", "--dir",
                    str(DASHBOARDS_DIR)]) == 0
    assert len(state.saved) == 2
    out = capsys.readouterr().out
    assert f"{url}/d/inferwatch-slo/inferwatch-slos" in out and password not in out

    state.save_error = (500, "database is locked")
    assert run_cli(["push", "--url", with_user, "--token", "", "--dir",
                    str(DASHBOARDS_DIR)]) == 2
    err = capsys.readouterr().err
    assert f"Grafana at {url} failed" in err and quote(password, safe='') not in err


@pytest.mark.parametrize(("status", "message", "expected"), [
    (412, "a dashboard with the same name exists", "refused saving {file}: Client Error 412: "
     "a dashboard with the same name exists"),
    (500, "database is locked", "failed while saving {file}: Server Error 500: "
     "database is locked"),
], ids=["a refusal", "a server failure"])
def test_a_failed_save_names_grafana_the_file_and_its_message(
        grafana: tuple[str, GrafanaState], capsys: pytest.CaptureFixture[str], status: int,
        message: str, expected: str) -> None:
    url, state = grafana
    state.save_error = (status, message)
    assert push(url) == 2
    first = sorted(DASHBOARDS_DIR.glob("*.json"))[0]
    assert capsys.readouterr().err.splitlines() == [
        f"inferwatch dashboards push: Grafana at {url} " + expected.format(file=first)]


def test_a_refused_token_is_one_message_and_exit_2(
        grafana: tuple[str, GrafanaState], capsys: pytest.CaptureFixture[str]) -> None:
    url, state = grafana
    assert push(url, token="wrong") == 2
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        f"inferwatch dashboards push: Grafana at {url} refused the token while checking the "
        "server (401 Unauthorized): check --token"]
    assert captured.out == "" and not state.saved


def test_an_unreachable_url_is_one_message_and_exit_2(
        capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    assert push(url, "--timeout", "2") == 2
    err = capsys.readouterr().err
    assert err.startswith(f"inferwatch dashboards push: cannot reach Grafana at {url} while "
                          "checking the server")
    assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_a_slow_grafana_times_out(grafana: tuple[str, GrafanaState],
                                  capsys: pytest.CaptureFixture[str]) -> None:
    url, state = grafana
    state.delay_seconds = 1.0
    assert push(url, "--timeout", "0.3") == 2
    assert capsys.readouterr().err.splitlines() == [
        f"inferwatch dashboards push: Grafana at {url} did not answer within 0.3 s while "
        "checking the server"]


def test_a_server_that_is_not_grafana_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    with static_pages({"/api/frontend/settings": "hello"}) as url:
        assert push(url) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"inferwatch dashboards push: {url}: does not answer like Grafana (no build info at "
        "/api/frontend/settings)"]


def test_a_bad_file_pushes_nothing(tmp_path: Path, grafana: tuple[str, GrafanaState],
                                   capsys: pytest.CaptureFixture[str]) -> None:
    url, state = grafana
    for path in DASHBOARDS_DIR.glob("*.json"):
        shutil.copy(path, tmp_path)
    bad = tmp_path / "broken.json"
    bad.write_text('{"uid": "x", "title": ')
    argv = ["push", "--url", url, "--token", TOKEN, "--dir", str(tmp_path)]
    assert run_cli(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"inferwatch dashboards push: {bad}: not a dashboard JSON file")
    bad.write_text(json.dumps({"uid": "x", "title": "no panels"}))
    assert run_cli(argv) == 2
    assert f"{bad}: not a Grafana dashboard" in capsys.readouterr().err
    assert state.requests == []  # nothing was sent


def test_an_empty_directory_or_a_bad_url_exit_2(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["push", "--url", "http://127.0.0.1:1", "--token", TOKEN,
                    "--dir", str(tmp_path)]) == 2
    assert "no *.json dashboards" in capsys.readouterr().err
    assert push("grafana:3000") == 2
    assert "give Grafana's http:// or https:// URL" in capsys.readouterr().err
