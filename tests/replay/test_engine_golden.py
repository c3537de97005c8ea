"""`engine replay` of every scheduler workload equals what real vLLM 0.33.0 printed.

Each file in tests/fixtures/fidelity/workloads/ must replay to its golden output on every field of
replay_formats.md §2 (header contents and fields only we print are ignored).
"""

from __future__ import annotations

from typing import Any

import pytest
from golden import FIDELITY_DIR, differences, load_golden

from sim.native import CORES, DEFAULT_CORE
from sim.replay.engine_replay import replay_engine

WORKLOADS = (
    "w01_seed_two_turn_chat",
    "w02_preemption_recompute",
    "w03_same_step_sharing",
    "w04_token_budget_chunking",
    "w05_max_num_seqs",
)


def replayed(name: str, core: str = DEFAULT_CORE) -> list[dict[str, Any]]:
    """Our output lines for one workload, header excluded (as load_golden does)."""
    path = FIDELITY_DIR / "workloads" / f"{name}.jsonl"
    return [line.line for line in replay_engine(path, core) if line.line["op"] != "header"]


def test_every_workload_file_is_covered() -> None:
    on_disk = sorted(path.stem for path in (FIDELITY_DIR / "workloads").glob("w*.jsonl"))
    assert on_disk == list(WORKLOADS)


@pytest.mark.parametrize("core", CORES)
@pytest.mark.parametrize("name", WORKLOADS)
def test_replay_equals_golden_on_every_field(name: str, core: str) -> None:
    assert differences(load_golden(name), replayed(name, core)) == []


# spec §10 rows w01-w05, read off our summary line: (steps, cumulative counters,
# total preemptions, evicted block labels in order).
SUMMARIES = {
    "w01_seed_two_turn_chat": (50, (2, 225, 112, 0, 0, 0), 0, []),
    "w02_preemption_recompute": (
        64,
        (2, 128, 0, 1, 81, 48),
        1,
        ["B#4", "B#3", "A#5", "A#4", "A#3"],
    ),
    "w03_same_step_sharing": (3, (2, 128, 48, 0, 0, 0), 0, []),
    "w04_token_budget_chunking": (7, (2, 200, 0, 0, 0, 0), 0, []),
    "w05_max_num_seqs": (7, (3, 60, 0, 0, 0, 0), 0, []),
}


@pytest.mark.parametrize("name", WORKLOADS)
def test_summary_matches_spec_section_10(name: str) -> None:
    steps, counters, preemptions, evicted_labels = SUMMARIES[name]
    summary = replayed(name)[-1]
    assert summary["op"] == "summary"
    assert summary["steps"] == steps
    assert tuple(summary["cum"].values()) == counters
    assert summary["total_preemptions"] == preemptions
    assert summary["evicted_sequence_labels"] == evicted_labels
