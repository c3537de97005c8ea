"""Recorders give the same files however steps are batched and hooks interleave.

A run's hooks are three streams: steps (each replica's in time order), finished requests and
block events (both in a fixed order). The reference hands every step alone, replicas
interleaved as generated, and all steps before any request or event. Each case then
interleaves the replicas' steps in a random order, cuts them and the finished requests into
random batches (requests handed over one at a time or as RequestColumns, as the compiled step
loops hand them) and merges the three streams in a random order; every file the recorders write
(requests, steps, events, metrics with small row groups, summary, per-replica summaries)
and every raw summary value must be identical to the reference's.
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st
from step_helpers import steps_of

import sim.metrics.run_recorder as run_recorder_module
import sim.metrics.scraper as scraper_module
import sim.metrics.summary as summary_module
from sim.metrics import (
    BlockEvent,
    EventsWriter,
    FanOutRecorder,
    MetricsScraper,
    Recorder,
    ReplicaRecorders,
    RequestColumns,
    RequestRecord,
    RequestsWriter,
    StepRecord,
    StepsWriter,
    SummaryRecorder,
    make_run_recorder,
)

MAX_MODEL_LEN = 1024
DURATIONS_S = (0.0, 0.013, 0.05, 0.1, 0.37, 1.1)


def _steps_and_requests(
    rng: random.Random, num_replicas: int, num_steps: int
) -> tuple[list[StepRecord], list[RequestRecord], list[BlockEvent]]:
    """Steps in time order per replica, replicas interleaved at random; requests finishing at
    their replica's step ends (with frontend delays), in finish order per replica; one block
    event per request."""
    clocks = [0.0] * num_replicas
    indexes = [0] * num_replicas
    steps: list[StepRecord] = []
    requests: list[RequestRecord] = []
    events: list[BlockEvent] = []
    for _ in range(num_steps):
        replica = rng.randrange(num_replicas)
        clocks[replica] += rng.choice((0.0, 0.0, 0.2, 0.9, 2.5))  # idle gaps
        started_at = clocks[replica]
        duration_s = rng.choice(DURATIONS_S)
        indexes[replica] += 1
        steps.append(
            StepRecord(
                step_index=indexes[replica],
                started_at=started_at,
                duration_s=duration_s,
                num_prefill_tokens=rng.choice((0, 7, 300, 9000)),
                num_decode_tokens=rng.randrange(40),
                num_running=rng.randrange(30),
                num_waiting=rng.choice((0, 0, 3, 17)),
                num_free_blocks=rng.randrange(500),
                usage=rng.random(),
                num_preemptions=rng.choice((0, 0, 0, 2)),
                num_queries=rng.randrange(5000),
                num_hits=rng.randrange(3000),
                num_evictions=rng.randrange(4),
                replica=replica,
                cached_free_usage=rng.random(),
                num_external_queries=rng.randrange(100),
                num_external_hits=rng.randrange(50),
            )
        )
        clocks[replica] = started_at + duration_s
        for _ in range(rng.choice((0, 0, 1, 3))):
            finished_at = clocks[replica] + 0.0625
            arrival_at = max(0.0, finished_at - rng.choice((0.7, 3.3, 12.0)))
            first_token_at = arrival_at + (finished_at - arrival_at) * rng.random()
            num_output_tokens = rng.choice((1, 2, 9))
            requests.append(
                RequestRecord(
                    request_id=f"r{len(requests)}",
                    session_id=rng.choice((None, "s1")),
                    tenant=None,
                    arrival_at=arrival_at,
                    first_scheduled_at=arrival_at + 0.01,
                    first_token_at=first_token_at,
                    finished_at=finished_at,
                    num_prompt_tokens=rng.randrange(1, 1000),
                    num_cached_tokens=rng.randrange(0, 500),
                    num_computed_prefill_tokens=rng.randrange(1, 1000),
                    num_output_tokens=num_output_tokens,
                    num_preemptions=rng.choice((0, 1)),
                    inter_token_latencies_s=[rng.random() for _ in range(num_output_tokens - 1)],
                    frontend_in_s=0.01,
                    frontend_out_s=0.0625,
                    replica=replica,
                )
            )
            events.append(
                BlockEvent(
                    rng.choice(("stored", "hit", "evicted")),
                    finished_at,
                    bytes([len(events) % 256]) * 32,
                    len(events),
                    16,
                    replica,
                )
            )
    return steps, requests, events


def _recorders(out_dir: Path, num_replicas: int) -> tuple[Recorder, list[SummaryRecorder]]:
    """Every writer with tiny row groups, a run's standard set, and per-replica summaries."""
    out_dir.mkdir()
    small = out_dir / "small"
    small.mkdir()
    summaries = [SummaryRecorder(out_dir / f"replica{i}.json") for i in range(num_replicas)]
    warmed = SummaryRecorder(small / "warm_summary.json", warmup_s=1.5, duration_s=6.0)
    recorder = FanOutRecorder(
        [
            make_run_recorder(
                out_dir / "run", max_model_len=MAX_MODEL_LEN, num_replicas=num_replicas
            ),
            RequestsWriter(small / "requests.parquet", batch_rows=3),
            StepsWriter(small / "steps.parquet", num_replicas=num_replicas, batch_rows=5),
            EventsWriter(small / "events.parquet", batch_rows=2),
            MetricsScraper(
                small / "metrics.parquet",
                0.3,
                max_model_len=MAX_MODEL_LEN,
                num_replicas=num_replicas,
                batch_rows=700,
            ),
            warmed,
            ReplicaRecorders(summaries),
        ]
    )
    return recorder, [*summaries, warmed]


def _run(
    out_dir: Path,
    num_replicas: int,
    hooks: tuple[list[StepRecord], list[RequestRecord], list[BlockEvent]],
    end_at: float,
    rng: random.Random | None,
) -> tuple[dict[str, bytes], list[str]]:
    """Hand the hooks over (one step at a time, steps first, without `rng`); the files written
    and the raw summaries."""
    steps, requests, events = hooks
    recorder, summaries = _recorders(out_dir, num_replicas)
    request_batches = [[request] for request in requests]
    if rng is None:
        batches = [[step] for step in steps]
        order = ["steps"] * len(batches) + ["request"] * len(requests) + ["event"] * len(events)
    else:
        # The replicas' steps merged in a random order (each replica's kept), then cut.
        per_replica = [[step for step in steps if step.replica == r] for r in range(num_replicas)]
        labels = [step.replica for step in steps]
        rng.shuffle(labels)
        queues_by_replica = [iter(replica_steps) for replica_steps in per_replica]
        merged = [next(queues_by_replica[replica]) for replica in labels]
        batches, start = [], 0
        while start < len(merged):
            size = rng.choice((1, 2, 3, 8, 40))
            batches.append(merged[start : start + size])
            start += size
        request_batches, start = [], 0
        while start < len(requests):
            size = rng.choice((1, 1, 2, 5))
            request_batches.append(requests[start : start + size])
            start += size
        order = ["steps"] * len(batches) + ["request"] * len(request_batches)
        order += ["event"] * len(events)
        rng.shuffle(order)  # each stream keeps its own order
    queues = {"steps": iter(batches), "request": iter(request_batches), "event": iter(events)}
    for kind in order:
        item = next(queues[kind])
        if kind == "steps":
            recorder.on_steps(steps_of(*item))
        elif kind == "request" and len(item) == 1 and (rng is None or rng.random() < 0.5):
            recorder.on_request_finished(item[0])
        elif kind == "request":
            recorder.on_requests_finished(RequestColumns.from_records(item))
        else:
            recorder.on_block_event(item)
    raw = [repr(sorted(summary.summary(end_at).items())) for summary in summaries]
    recorder.close(end_at)
    files = {
        str(path.relative_to(out_dir)): path.read_bytes()
        for path in sorted(out_dir.rglob("*"))
        if path.is_file()
    }
    return files, raw


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    num_replicas=st.integers(1, 3),
    num_steps=st.integers(0, 120),
    tail_s=st.sampled_from((0.0, 0.3, 1.7)),
)
def test_batching_and_interleaving_leave_every_file_unchanged(
    seed: int, num_replicas: int, num_steps: int, tail_s: float
) -> None:
    rng = random.Random(seed)
    hooks = _steps_and_requests(rng, num_replicas, num_steps)
    stamps = [step.started_at for step in hooks[0]] + [r.finished_at for r in hooks[1]]
    end_at = max(stamps, default=0.0) + tail_s
    with tempfile.TemporaryDirectory() as tmp:
        reference, reference_raw = _run(Path(tmp) / "one", num_replicas, hooks, end_at, None)
        batched, batched_raw = _run(Path(tmp) / "batched", num_replicas, hooks, end_at, rng)
    assert sorted(batched) == sorted(reference)
    assert len(reference) == 10 + num_replicas
    for name, content in reference.items():
        assert batched[name] == content, name
    assert batched_raw == reference_raw


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    num_replicas=st.integers(1, 3),
    num_steps=st.integers(0, 120),
    batch=st.sampled_from(((1, 1), (2, 1), (3, 2), (1, 1000))),
)
def test_requests_counted_in_any_batches_leave_every_file_unchanged(
    seed: int, num_replicas: int, num_steps: int, batch: tuple[int, int]
) -> None:
    # Recorders count finished requests in bulk: counted a request at a time (or in twos or
    # threes, or whenever they pass a scrape; the run recorder's batches of every replica
    # split by replica), every file and summary is the reference's.
    requests_per_batch, scrapes_per_batch = batch
    rng = random.Random(seed)
    hooks = _steps_and_requests(rng, num_replicas, num_steps)
    stamps = [step.started_at for step in hooks[0]] + [r.finished_at for r in hooks[1]]
    end_at = max(stamps, default=0.0) + 0.3
    with tempfile.TemporaryDirectory() as tmp:
        reference, reference_raw = _run(Path(tmp) / "one", num_replicas, hooks, end_at, None)
        with (
            patch.object(scraper_module, "REQUEST_BATCH", requests_per_batch),
            patch.object(scraper_module, "REQUEST_BATCH_SCRAPES", scrapes_per_batch),
            patch.object(summary_module, "REQUEST_BATCH", requests_per_batch),
            patch.object(run_recorder_module, "REQUEST_BATCH", requests_per_batch),
        ):
            batched, batched_raw = _run(Path(tmp) / "batched", num_replicas, hooks, end_at, rng)
    assert batched == reference
    assert batched_raw == reference_raw
