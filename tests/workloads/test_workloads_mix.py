"""Weighted mixes: arrivals split between components by weight."""

from __future__ import annotations

from collections import Counter

import pytest

from workloads.api import (
    ChatConfig,
    Fixed,
    MixComponent,
    MixConfig,
    PoissonArrivals,
    RagConfig,
    Workload,
    WorkloadError,
)


def test_arrivals_split_by_weight_and_stay_in_time_order() -> None:
    mix = MixConfig(
        (
            MixComponent(3.0, ChatConfig(turns_per_session=Fixed(2))),
            MixComponent(1.0, RagConfig(corpus_size=100)),
        )
    )
    specs = list(Workload(mix, PoissonArrivals(4.0), num_arrivals=400, seed=1))
    first_turns = [spec for spec in specs if spec.turn_index == 0]
    assert len(first_turns) == 400
    kinds = Counter(spec.request_id.split("-")[0] for spec in first_turns)
    assert 0.70 < kinds["chat"] / 400 < 0.80 and kinds["chat"] + kinds["rag"] == 400
    assert len(specs) == 400 + kinds["chat"]  # each chat session has a second turn
    arrivals = [spec.arrival_at for spec in first_turns]
    assert arrivals == sorted(arrivals)
    assert len({spec.request_id for spec in specs}) == len(specs)


def test_bad_mixes_are_rejected() -> None:
    with pytest.raises(WorkloadError, match="MixConfig.components: empty"):
        MixConfig(())
    with pytest.raises(WorkloadError, match="all weights are 0"):
        MixConfig((MixComponent(0.0, ChatConfig()),))
    with pytest.raises(WorkloadError, match="MixComponent.source"):
        MixComponent(1.0, "chat")
