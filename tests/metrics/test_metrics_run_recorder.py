"""make_run_recorder: the five result files, atomically placed, byte-identical across runs."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
from step_helpers import steps_of

from sim.metrics import BlockEvent, make_run_recorder
from sim.metrics.recorder import FanOutRecorder

RESULT_FILES = [
    "events.parquet",
    "metrics.parquet",
    "requests.parquet",
    "steps.parquet",
    "summary.json",
]


def replay_seeded_run(out_dir, make_step, make_request, *, events: bool = True) -> None:
    """Feed 300 steps, block events and 40 requests drawn from a fixed seed."""
    rng = np.random.default_rng(np.random.SeedSequence(7))
    recorder = make_run_recorder(
        out_dir, max_model_len=1024, scrape_interval_s=0.5, warmup_s=1.0, events=events
    )
    now = 0.0
    for step_index in range(300):
        duration_s = float(rng.uniform(0.005, 0.05))
        recorder.on_block_event(
            BlockEvent(
                str(rng.choice(["stored", "hit", "evicted"])),
                now,
                rng.bytes(32),
                int(rng.integers(1, 50)),
                16 * int(rng.integers(1, 9)),
            )
        )
        recorder.on_steps(
            steps_of(
                make_step(
                    step_index=step_index,
                    started_at=now,
                    duration_s=duration_s,
                    num_prefill_tokens=int(rng.integers(0, 2048)),
                    num_decode_tokens=int(rng.integers(0, 64)),
                    usage=float(rng.uniform()),
                    num_queries=int(rng.integers(0, 500)),
                    num_hits=int(rng.integers(0, 100)),
                )
            )
        )
        now += duration_s
        if step_index % 7 == 6:
            arrival_at = max(0.0, now - float(rng.uniform(0.1, 2.0)))
            recorder.on_request_finished(
                make_request(
                    request_id=f"r{step_index}",
                    arrival_at=arrival_at,
                    first_scheduled_at=arrival_at + 0.01,
                    first_token_at=arrival_at + 0.05,
                    finished_at=now,
                    inter_token_latencies_s=[float(x) for x in rng.uniform(0.01, 0.03, 5)],
                    num_output_tokens=6,
                )
            )
    recorder.close(end_at=now)


def test_run_writes_all_five_files_and_nothing_else(tmp_path, make_step, make_request):
    out_dir = tmp_path / "run"
    replay_seeded_run(out_dir, make_step, make_request)
    assert sorted(p.name for p in out_dir.iterdir()) == RESULT_FILES
    assert pq.read_table(out_dir / "steps.parquet").num_rows == 300
    assert pq.read_table(out_dir / "events.parquet").num_rows == 300
    assert pq.read_table(out_dir / "requests.parquet").num_rows == 42
    assert json.loads((out_dir / "summary.json").read_text())["warmup_s"] == 1.0


def test_events_can_be_left_out(tmp_path, make_step, make_request):
    out_dir = tmp_path / "run"
    replay_seeded_run(out_dir, make_step, make_request, events=False)
    assert "events.parquet" not in {p.name for p in out_dir.iterdir()}
    assert len(list(out_dir.iterdir())) == 4


def test_identical_input_gives_byte_identical_files(tmp_path, make_step, make_request):
    replay_seeded_run(tmp_path / "a", make_step, make_request)
    replay_seeded_run(tmp_path / "b", make_step, make_request)
    for name in RESULT_FILES:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_parquet_files_carry_no_wall_clock_metadata(tmp_path, make_step, make_request):
    # Only the arrow schema and the writer version go into the footer: nothing time-dependent.
    # metrics.parquet, written from dictionary-encoded keys, stores no arrow schema: its
    # parquet types read back as its schema.
    replay_seeded_run(tmp_path, make_step, make_request)
    for name in RESULT_FILES[:-1]:
        metadata = pq.read_metadata(tmp_path / name)
        stored = [] if name == "metrics.parquet" else [b"ARROW:schema"]
        assert list(metadata.metadata or {}) == stored
        assert metadata.created_by.startswith("parquet-cpp-arrow version ")


def test_run_recorder_is_a_fan_out_in_file_order(tmp_path):
    recorder = make_run_recorder(tmp_path, max_model_len=1024)
    assert isinstance(recorder, FanOutRecorder)
    assert [type(r).__name__ for r in recorder.recorders] == [
        "RequestsWriter",
        "StepsWriter",
        "EventsWriter",
        "MetricsScraper",
        "SummaryRecorder",
    ]
    recorder.close(end_at=0.0)
