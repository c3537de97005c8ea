"""Fixtures for the engine tests: a 0.25 s constant-time cost model and a fresh recorder."""

from __future__ import annotations

import pytest
from engine_fakes import STEP_TIME_S, CollectingRecorder, ConstantStepCost


@pytest.fixture
def cost_model() -> ConstantStepCost:
    return ConstantStepCost(STEP_TIME_S)


@pytest.fixture
def recorder() -> CollectingRecorder:
    return CollectingRecorder()
