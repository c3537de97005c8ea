"""Real vLLM serving runs (`data/measurements/vllm_serving_runs.csv`) replayed through the
simulator for `prefixsim costmodel validate`: mean TTFT, per-token ITL and E2E per run."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from sim.calibration.bench_replay import Deployment, ReplayedRun, replay_requests
from sim.costmodel import NO_FRONTEND, choose_cost_model
from sim.costmodel.validation import ValidationRecord

SERVING_RUNS_CSV = (
    Path(__file__).parents[1] / "costmodel" / "data" / "measurements" / "vllm_serving_runs.csv"
)
SERVING_SOURCE = "vLLM serving runs"
# The run the shipped front end's request_s was read from (data/frontend.yaml): its TTFT row is
# not an independent check of the front end.
FRONTEND_RUN = "h100-mistral-7b-tp1-0819"


@dataclass(frozen=True, slots=True)
class ServingRun:
    run: str
    gpu: str
    model: str
    tp: int
    requests: list[tuple[int, int]]  # (prompt, output) tokens of each successful request
    mean_ttft_s: float
    mean_itl_s: float
    mean_e2e_s: float


def read_serving_runs(path: Path = SERVING_RUNS_CSV) -> list[ServingRun]:
    """The vendored runs; per-token ITL and E2E derived from each other where one is missing."""
    runs = []
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            inputs = [int(value) for value in row["input_lens"].split(";")]
            outputs = [int(value) for value in row["output_lens"].split(";")]
            requests = list(zip(inputs, outputs, strict=True))
            ttft_s = float(row["mean_ttft_ms"]) * 1e-3
            gaps_per_request = sum(output - 1 for output in outputs) / len(outputs)
            if row["mean_e2e_ms"]:
                e2e_s = float(row["mean_e2e_ms"]) * 1e-3
                itl_s = (e2e_s - ttft_s) / gaps_per_request
            else:
                itl_s = float(row["mean_itl_ms"]) * 1e-3
                e2e_s = ttft_s + itl_s * gaps_per_request
            runs.append(
                ServingRun(
                    row["run"],
                    row["gpu"],
                    row["model"],
                    int(row["tp"]),
                    requests,
                    ttft_s,
                    itl_s,
                    e2e_s,
                )
            )
    return runs


def serving_validation_records() -> tuple[list[ValidationRecord], list[ValidationRecord]]:
    """(as shipped, front end included; engine only, without the front end) records per run and
    metric, each run simulated with the cost model `auto` picks for it."""
    shipped, engine_only = [], []
    for run in read_serving_runs():
        choice = choose_cost_model("auto", "auto", gpu=run.gpu, model=run.model, tp=run.tp)
        deployment = Deployment(run.gpu, run.model, run.tp)
        with_frontend = replay_requests(
            run.requests, None, None, deployment, choice.model, choice.frontend
        )
        without = replay_requests(run.requests, None, None, deployment, choice.model, NO_FRONTEND)
        label = f"{choice.kind} {choice.name}"
        shipped += _records(run, with_frontend, label)
        engine_only += _records(run, without, label)
    return shipped, engine_only


def _records(run: ServingRun, replayed: ReplayedRun, label: str) -> list[ValidationRecord]:
    e2e_s = sum(replayed.e2e_s) / len(replayed.e2e_s)
    case = f"{run.run}, {len(run.requests)} requests at once"
    ttft_case = case + (" (front end read from this run)" if run.run == FRONTEND_RUN else "")
    return [
        ValidationRecord(
            f"{SERVING_SOURCE}: {metric}",
            label,
            metric_case,
            measured,
            predicted,
            None,
            None,
            True,
            len(run.requests),
        )
        for metric, metric_case, measured, predicted in (
            ("TTFT", ttft_case, run.mean_ttft_s, replayed.mean_ttft_s),
            ("ITL", case, run.mean_itl_s, replayed.mean_itl_s),
            ("E2E", case, run.mean_e2e_s, e2e_s),
        )
    ]
