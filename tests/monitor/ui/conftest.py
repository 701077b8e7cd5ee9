"""The UI over the API's filled store (tests/monitor/api/conftest.py), served once per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.monitor.api.conftest import Api, served_api


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    with served_api(tmp_path_factory.mktemp("ui")) as served:
        yield served
