"""Inputs on which `make differential` once found prefixsim and real vLLM 0.33.0 apart, minimised.

Each file in tests/fixtures/differential/ (c_*: cache replay, e_*: engine replay) must replay
equal, on every field of every line, to what vLLM printed for it (golden/<name>.out.jsonl).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sim.replay.cache_replay import replay_cache
from sim.replay.engine_replay import replay_engine

CASES_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "differential"
NAMES = sorted(path.stem for path in CASES_DIR.glob("*.jsonl"))


def lines_of(text: str) -> list[dict[str, Any]]:
    """JSON lines, header excluded."""
    lines = [json.loads(row) for row in text.splitlines() if row.strip()]
    return [line for line in lines if line["op"] != "header"]


@pytest.mark.parametrize("name", NAMES)
def test_replay_equals_vllm_on_every_field(name: str) -> None:
    replay = replay_cache if name.startswith("c_") else replay_engine
    replayed = [
        line.line
        for line in replay(CASES_DIR / f"{name}.jsonl")
        if line.line is not None and line.line["op"] != "header"
    ]
    golden = lines_of((CASES_DIR / "golden" / f"{name}.out.jsonl").read_text())
    assert len(replayed) == len(golden)
    for index, (expected, actual) in enumerate(zip(golden, replayed, strict=True)):
        assert {field: actual.get(field) for field in expected} == expected, f"line {index}"


def test_run_outgrowing_the_cache_stops_at_the_decode_without_a_block() -> None:
    # 3 usable blocks of 4: the 8-token prompt takes 2, the decodes of outputs 0-3 the third;
    # output 4's decode needs a fourth.
    run = next(
        line.line
        for line in replay_cache(CASES_DIR / "c_run_outgrows_cache.jsonl")
        if line.line is not None and line.line["op"] == "run"
    )
    assert (run["ok"], run["failed_at_output"], run["status"]) == (False, 4, "RUNNING")
    assert (run["num_tokens"], run["num_computed_tokens"], run["block_ids"]) == (13, 12, [1, 2, 3])
