"""Real vLLM serving runs (`data/measurements/vllm_serving_runs.csv`) replayed through the
simulator for `prefixsim costmodel validate`: mean TTFT, per-token ITL and E2E per run."""

from __future__ import annotations

import csv
from dataclasses import dataclass, replace
from pathlib import Path

from sim.calibration.bench_replay import Deployment, ReplayedRun, replay_requests
from sim.costmodel import (
    CostModel,
    FrontEnd,
    StepTimeModel,
    choose_cost_model,
    real_engine_coefficients,
)
from sim.costmodel.calibrate import prior_profile
from sim.costmodel.validation import ServedMeasurement, ValidationRecord

SERVING_RUNS_CSV = (
    Path(__file__).parents[1] / "costmodel" / "data" / "measurements" / "vllm_serving_runs.csv"
)
SERVING_SOURCE = "vLLM serving runs"


@dataclass(frozen=True, slots=True)
class ServingRun:
    run: str
    gpu: str
    model: str
    tp: int
    requests: list[tuple[int, int]]  # (prompt, output) tokens of each successful request
    # Prompts that completed with no text: prefilled with the others, so part of the load, but
    # left out of the means (the benchmark counts their TTFT as 0).
    empty_output_prompts: list[int]
    mean_ttft_s: float
    mean_itl_s: float
    mean_e2e_s: float

    @property
    def setup(self) -> str:
        return f"{self.gpu}/{self.model}/tp{self.tp}"


def read_serving_runs(path: Path = SERVING_RUNS_CSV) -> list[ServingRun]:
    """The vendored runs; per-token ITL and E2E derived from each other where one is missing."""
    runs = []
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            inputs = _lengths(row["input_lens"])
            outputs = _lengths(row["output_lens"])
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
                    _lengths(row["empty_output_input_lens"]),
                    ttft_s,
                    itl_s,
                    e2e_s,
                )
            )
    return runs


def _lengths(cell: str) -> list[int]:
    return [int(value) for value in cell.split(";")] if cell else []


def serving_measurements() -> list[ServedMeasurement]:
    """Each run's mean TTFT, per-token ITL and E2E: simulated as shipped (the cost model `auto`
    picks, with its real-engine factor and front end), and engine-only at factors 1 and 2."""
    measurements = []
    for run in read_serving_runs():
        choice = choose_cost_model("auto", "auto", gpu=run.gpu, model=run.model, tp=run.tp)
        deployment = Deployment(run.gpu, run.model, run.tp)
        shipped = _replay(run, deployment, choice.model, choice.frontend)
        # request_s 0: it adds the same to every TTFT (all requests arrive together).
        engine_frontend = replace(choice.frontend, request_s=0.0)
        # The kernel-derived or roofline profile `auto` chose, before its real-engine factor.
        prior = prior_profile(run.gpu, run.model, run.tp)
        assert prior is not None, "a serving run names its GPU and model"
        at_factor = [
            _replay(
                run,
                deployment,
                StepTimeModel(real_engine_coefficients(prior.coefficients, factor)),
                engine_frontend,
            )
            for factor in (1.0, 2.0)
        ]
        label = f"{choice.kind} {choice.name}"
        case = f"{run.run}, {len(run.requests) + len(run.empty_output_prompts)} requests at once"
        for metric, is_ttft, request_s_count, measured, of_run in (
            ("TTFT", True, 1, run.mean_ttft_s, _mean_ttft_s),
            ("ITL", False, 0, run.mean_itl_s, _mean_itl_s),
            ("E2E", False, 1, run.mean_e2e_s, _mean_e2e_s),
        ):
            record = ValidationRecord(
                f"{SERVING_SOURCE}: {metric}",
                label,
                case,
                measured,
                of_run(shipped),
                None,
                None,
                True,
                len(run.requests),
            )
            measurements.append(
                ServedMeasurement(
                    record,
                    run.gpu,
                    run.setup,
                    of_run(at_factor[0]),
                    of_run(at_factor[1]),
                    request_s_count,
                    is_ttft,
                )
            )
    return measurements


def _replay(
    run: ServingRun, deployment: Deployment, cost_model: CostModel, frontend: FrontEnd
) -> ReplayedRun:
    """The run's successful requests and, after them, its empty-output ones (one token each)."""
    requests = run.requests + [(prompt, 1) for prompt in run.empty_output_prompts]
    replayed = replay_requests(requests, None, None, deployment, cost_model, frontend)
    kept = len(run.requests)
    return ReplayedRun(
        replayed.ttfts_s[:kept],
        replayed.decode_times_s[:kept],
        replayed.output_lens[:kept],
        replayed.e2e_s[:kept],
    )


def _mean_ttft_s(run: ReplayedRun) -> float:
    return run.mean_ttft_s


def _mean_itl_s(run: ReplayedRun) -> float:
    return run.mean_itl_s


def _mean_e2e_s(run: ReplayedRun) -> float:
    return sum(run.e2e_s) / len(run.e2e_s)
