"""Real vLLM serving runs replayed through the simulator for `prefixsim costmodel validate`: the
benchmark runs of `data/measurements/vllm_serving_runs.csv` (mean TTFT, per-token ITL and E2E
per run) and the batch prefills of `data/measurements/tokenomics_batch_prefills.csv` (the time
of a batch of prompts sent at once for one token each)."""

from __future__ import annotations

import csv
from dataclasses import dataclass, replace
from pathlib import Path

from sim.calibration.bench_replay import Deployment, ReplayedRun, replay_requests
from sim.costmodel import (
    StepTimeModel,
    choose_cost_model,
    real_engine_coefficients,
)
from sim.costmodel.calibrate import prior_profile
from sim.costmodel.validation import Exclusion, ServedMeasurement, ValidationRecord

MEASUREMENTS_DIR = Path(__file__).parents[1] / "costmodel" / "data" / "measurements"
SERVING_RUNS_CSV = MEASUREMENTS_DIR / "vllm_serving_runs.csv"
SERVING_SOURCE = "vLLM serving runs"
BATCH_PREFILLS_CSV = MEASUREMENTS_DIR / "tokenomics_batch_prefills.csv"
BATCH_PREFILL_SOURCE = "vLLM batch prefills (Llama-3.3-70B TP 4 on H100)"
BATCH_TIME_SOURCE = f"{BATCH_PREFILL_SOURCE}: batch time"  # its one metric


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


@dataclass(frozen=True, slots=True)
class BatchPrefill:
    """One row of tokenomics_batch_prefills.csv: `batch_size` prompts of `input_tokens` sent at
    once for one output token each, timed at the client until the last answer came back."""

    row: str
    gpu: str
    model: str
    tp: int
    input_tokens: int
    batch_size: int
    elapsed_s: float
    used: bool
    reason_not_used: str

    @property
    def setup(self) -> str:
        return f"{self.gpu}/{self.model}/tp{self.tp}"

    @property
    def case(self) -> str:
        return f"{self.row}: {self.batch_size} x {self.input_tokens}-token prompts at once"


def read_batch_prefills(path: Path = BATCH_PREFILLS_CSV) -> list[BatchPrefill]:
    """The vendored batch prefills, used or not."""
    with path.open(newline="") as handle:
        return [
            BatchPrefill(
                row["row"],
                row["gpu"],
                row["model"],
                int(row["tp"]),
                int(row["input_tokens"]),
                int(row["batch_size"]),
                float(row["elapsed_s"]),
                row["used"] == "yes",
                row["reason_not_used"],
            )
            for row in csv.DictReader(handle)
        ]


def served_exclusions() -> list[Exclusion]:
    """The batch prefills left out, each with its reason."""
    return [
        Exclusion(BATCH_TIME_SOURCE, batch.case, batch.reason_not_used)
        for batch in read_batch_prefills()
        if not batch.used
    ]


def serving_measurements() -> list[ServedMeasurement]:
    """Each serving run's mean TTFT, per-token ITL and E2E, then each used batch prefill's
    time: simulated as shipped (the cost model `auto` picks, with its real-engine factor and
    front end), and engine-only at factors 1 and 2."""
    measurements = []
    for run in read_serving_runs():
        requests = run.requests + [(prompt, 1) for prompt in run.empty_output_prompts]
        label, shipped, at_factor = _replays(run.gpu, run.model, run.tp, requests)
        kept = len(run.requests)
        shipped, at_factor = _kept(shipped, kept), [_kept(replayed, kept) for replayed in at_factor]
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
    for batch in read_batch_prefills():
        if not batch.used:
            continue
        requests = [(batch.input_tokens, 1)] * batch.batch_size
        label, shipped, at_factor = _replays(batch.gpu, batch.model, batch.tp, requests)
        record = ValidationRecord(
            BATCH_TIME_SOURCE,
            label,
            batch.case,
            batch.elapsed_s,
            _batch_time_s(shipped),
            None,
            None,
            True,
            batch.batch_size,
        )
        measurements.append(
            ServedMeasurement(
                record,
                batch.gpu,
                batch.setup,
                _batch_time_s(at_factor[0]),
                _batch_time_s(at_factor[1]),
                1,
                True,
            )
        )
    return measurements


def _replays(
    gpu: str, model: str, tp: int, requests: list[tuple[int, int]]
) -> tuple[str, ReplayedRun, list[ReplayedRun]]:
    """`requests` sent at once: the cost model `auto` picks (its label) as shipped, and engine-only
    at real-engine factors 1 and 2."""
    choice = choose_cost_model("auto", "auto", gpu=gpu, model=model, tp=tp)
    deployment = Deployment.served(gpu, model, tp)
    shipped = replay_requests(requests, None, None, deployment, choice.model, choice.frontend)
    # request_s 0: it adds the same to every request's time (all of them arrive together).
    engine_frontend = replace(choice.frontend, request_s=0.0)
    # The kernel-derived or roofline profile `auto` chose, before its real-engine factor.
    prior = prior_profile(gpu, model, tp)
    assert prior is not None, "a measurement names its GPU and model"
    at_factor = [
        replay_requests(
            requests,
            None,
            None,
            deployment,
            StepTimeModel(real_engine_coefficients(prior.coefficients, factor)),
            engine_frontend,
        )
        for factor in (1.0, 2.0)
    ]
    return f"{choice.kind} {choice.name}", shipped, at_factor


def _batch_time_s(run: ReplayedRun) -> float:
    """From sending a batch at once to its last answer."""
    return max(run.e2e_s)


def _kept(replayed: ReplayedRun, kept: int) -> ReplayedRun:
    """A serving run's successful requests (the first `kept`), without its empty-output ones."""
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
