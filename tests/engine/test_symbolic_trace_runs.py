"""A Mooncake replay whose prompts are block ids writes the same result files as one whose
prompts are tokens.

Where no hash is shown, a trace request's blocks are identified from its hash ids and its
prompt tokens are never made (sim.kvcache.hashing.extend_trace_blocks). Random traces whose
requests share prefixes of hash ids, fork and end in partial blocks (hypothesis), on two
replicas with a cache small enough to evict and preempt, run four ways: block ids on the
compiled core and on the Python core, tokens with the block identity, and vLLM's digests;
every result file must be byte-identical. A spy counts the prompt tokens made.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sim.engine.simulation as simulation_module
import workloads.synthetic_tokens as synthetic_tokens_module
from sim.config import Scenario
from sim.runner import RunResult, run_scenario
from tests.run_files import ENGINE_RESULT_FILES, assert_same_run_files
from workloads.spec import TraceRequestSpec

TRACE_BLOCK_SIZE = 512
# Block events show hashes, so runs that identify blocks by ids write none.
RESULT_FILES = ENGINE_RESULT_FILES - {"events.parquet"}


@st.composite
def mooncake_traces(draw: st.DrawFn) -> list[dict[str, Any]]:
    """6 to 14 requests 0-40 ms apart, each an earlier request's leading hash ids (or none)
    plus new ones, three ids at most, of 1 to 1,536 tokens the ids cover, answers of 1 to 300
    tokens."""
    records: list[dict[str, Any]] = []
    next_id = 0
    timestamp = 0
    for _ in range(draw(st.integers(6, 14))):
        ids: list[int] = []
        if records and draw(st.booleans()):
            source = draw(st.sampled_from(records))["hash_ids"]
            ids = source[: draw(st.integers(1, len(source)))]
        num_new = draw(st.integers(0 if ids else 1, 3 - len(ids)))
        ids = ids + list(range(next_id, next_id + num_new))
        next_id += num_new
        last_block = draw(st.integers(1, TRACE_BLOCK_SIZE))
        timestamp += draw(st.integers(0, 40))
        records.append(
            {
                "timestamp": timestamp,
                "input_length": (len(ids) - 1) * TRACE_BLOCK_SIZE + last_block,
                "output_length": draw(st.integers(1, 300)),
                "hash_ids": ids,
            }
        )
    return records


def scenario(trace: Path, core: str, block_size: int) -> dict[str, Any]:
    """Two replicas by prefix-aware routing; 160 blocks of 16 tokens' worth each (2,560
    tokens), so the longest request (1,836 tokens) fits but two long ones decoding together
    preempt."""
    return {
        "name": "symbolic-trace",
        "seed": 1,
        "duration_s": None,
        "warmup_s": 0,
        "engine": {
            "block_size": block_size,
            "num_gpu_blocks": 160 * 16 // block_size,
            "max_model_len": 2200,
            "max_num_batched_tokens": 1024,
            "core": core,
        },
        "deployment": {
            "model": "llama-3.1-8b",
            "gpu": "h100",
            "tp": 1,
            "replicas": 2,
            "router": {"policy": "prefix_aware"},
        },
        "cost_model": "h100/llama-3.1-8b/tp1",
        "workload": {"source": {"kind": "trace", "format": "mooncake", "path": str(trace)}},
        "outputs": {"events": False, "scrape_interval_s": 0.05},
    }


@contextmanager
def prompts_made() -> Iterator[list[int]]:
    """The lengths of the prompt token runs trace prompts make while inside."""
    lengths: list[int] = []
    block_tokens = synthetic_tokens_module.TracePrompt._block_tokens

    def spy(prompt: Any, first: int, last: int, skip: int = 0) -> Any:
        tokens = block_tokens(prompt, first, last, skip)
        lengths.append(len(tokens))
        return tokens

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(synthetic_tokens_module.TracePrompt, "_block_tokens", spy)
        yield lengths


def run(data: dict[str, Any], run_dir: Path, *, identity: bool, block_ids: bool) -> RunResult:
    """Run `data` with the block identity on or off, prompts as block ids where allowed or
    always as tokens."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(simulation_module, "block_identity_wanted", lambda **_: identity)
        if not block_ids:
            patch.setattr(TraceRequestSpec, "trace_prompt", lambda _: None)
        return run_scenario(Scenario.model_validate(data), run_dir, run_dir=run_dir)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(records=mooncake_traces(), block_size=st.sampled_from([16, 64, 48]))
def test_block_ids_and_tokens_write_identical_files(
    records: list[dict[str, Any]], block_size: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    folder = tmp_path_factory.mktemp("symbolic")
    trace = folder / "trace.jsonl"
    trace.write_text("".join(json.dumps(record) + "\n" for record in records))
    with prompts_made() as made:
        symbolic = run(
            scenario(trace, "native", block_size), folder / "ids", identity=True, block_ids=True
        )
    if block_size == 48:  # blocks straddle trace blocks: tokens are made, for every request
        assert sum(made) == sum(record["input_length"] for record in records)
    else:  # only the tokens of the partial last block, once per request at most
        assert len(made) <= len(records) and all(length < block_size for length in made)
    others = [
        run(scenario(trace, "python", block_size), folder / "py", identity=True, block_ids=True),
        run(scenario(trace, "native", block_size), folder / "tok", identity=True, block_ids=False),
        run(scenario(trace, "native", block_size), folder / "dig", identity=False, block_ids=True),
    ]
    for other in others:
        assert_same_run_files(symbolic.run_dir, other.run_dir, required=RESULT_FILES)
    assert symbolic.summary["num_requests"] == len(records)


def test_the_arxiv_trace_replays_equal_on_block_ids_and_tokens(tmp_path: Path) -> None:
    """The first 150 requests of the arXiv sample on two replicas: the same files either way,
    with the hit rate this replay has always had."""
    trace = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "mooncake"
    data = scenario(trace / "arxiv_mooncake_trace_first1000.jsonl", "native", 16)
    data["workload"]["source"]["max_requests"] = 150
    data["engine"].update(num_gpu_blocks=6000, max_model_len=90000, max_num_batched_tokens=8192)
    symbolic = run(data, tmp_path / "ids", identity=True, block_ids=True)
    tokens = run(data, tmp_path / "tokens", identity=True, block_ids=False)
    assert_same_run_files(symbolic.run_dir, tokens.run_dir, required=RESULT_FILES)
    assert symbolic.summary["num_requests"] == 150
