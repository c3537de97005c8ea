"""Fixtures handing out the record factories (record_factories.py), session-scoped so
hypothesis tests can take them too."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from record_factories import build_request, build_step

from sim.metrics.records import RequestRecord, StepRecord


@pytest.fixture(scope="session")
def make_step() -> Callable[..., StepRecord]:
    return build_step


@pytest.fixture(scope="session")
def make_request() -> Callable[..., RequestRecord]:
    return build_request
