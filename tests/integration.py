"""The one rule for tests that need something outside Python (a binary, a server, fixtures):
skip saying why, unless INFERWATCH_REQUIRE_INTEGRATION=1 (CI) asks for a failure instead."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

REQUIRE_ENV = "INFERWATCH_REQUIRE_INTEGRATION"


def unavailable(reason: str) -> NoReturn:
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{reason}, and {REQUIRE_ENV}=1 requires it")
    pytest.skip(reason)
