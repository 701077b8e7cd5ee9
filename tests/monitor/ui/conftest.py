"""The UI over the API's filled store (tests/monitor/api/conftest.py), served once per module."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.monitor.api.conftest import Api, served_api


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    with served_api(tmp_path_factory.mktemp("ui")) as served:
        yield served


@pytest.fixture(scope="session")
def artefacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the browser tests keep their screenshots: $INFERWATCH_ARTIFACTS/ui, or a
    temporary folder."""
    root = os.environ.get("INFERWATCH_ARTIFACTS")
    folder = Path(root) / "ui" if root else tmp_path_factory.mktemp("ui-screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    print(f"UI screenshots: {folder}")
    return folder
