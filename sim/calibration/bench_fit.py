"""`prefixsim calibrate --from vllm-bench-serve|vllm-bench-latency`: fit a profile by simulating
the benchmark and matching what it measured.

Two numbers are fitted, each to the measurement it moves most: a scale on every step-time
coefficient of the prior profile (kernel-derived or roofline), matched to the measured per-token
ITL (or, for a latency run, the batch latency), and the front end's per-request time, matched to
the measured mean TTFT. The simulation is re-run after each update (the batch each request lands
in depends on the times), until both agree within `TOLERANCE`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from sim.calibration.bench_replay import Deployment, replay_requests, serve_send_times
from sim.costmodel import (
    NO_FRONTEND,
    FrontEnd,
    Profile,
    StepCoefficients,
    StepTimeModel,
    engine_coefficients,
    get_gpu,
    get_model,
    load_shipped_frontend,
    profile_name,
)
from sim.costmodel.bench_results import LatencyBenchmark, ServeBenchmark
from sim.costmodel.calibrate import prior_profile
from sim.errors import InputError

TOLERANCE = 0.002
MAX_ROUNDS = 40


@dataclass(frozen=True, slots=True)
class BenchCalibration:
    profile: Profile
    prior: Profile
    step_scale: float
    measured: dict[str, float]  # mean_ttft_s, mean_itl_s or avg_latency_s
    simulated: dict[str, float]  # the same, simulated with the calibrated profile
    rounds: int


def calibrate_from_serve(
    benchmark: ServeBenchmark, source: Path, deployment: Deployment
) -> BenchCalibration:
    """Scale the prior's step times to the measured ITL, set the front end to the measured TTFT."""
    prior = _prior(deployment)
    requests = [(r.input_len, r.output_len) for r in benchmark.requests]
    send_times = serve_send_times(benchmark)
    target_ttft, target_itl = benchmark.mean_ttft_s, benchmark.mean_itl_s
    shipped = load_shipped_frontend().frontend
    scale, request_s = 1.0, shipped.request_s
    for rounds in range(1, MAX_ROUNDS + 1):  # noqa: B007 (reported after the loop)
        frontend = replace(shipped, request_s=request_s)
        run = replay_requests(
            requests,
            send_times,
            benchmark.max_concurrency,
            deployment,
            StepTimeModel(_scaled(prior.coefficients, scale)),
            frontend,
        )
        itl_ratio = target_itl / run.mean_itl_s
        ttft_gap = target_ttft - run.mean_ttft_s
        converged = abs(itl_ratio - 1) < TOLERANCE and abs(ttft_gap) < TOLERANCE * target_ttft
        if converged or (abs(itl_ratio - 1) < TOLERANCE and request_s == 0 and ttft_gap < 0):
            break
        scale *= itl_ratio
        request_s = max(0.0, request_s + ttft_gap)
    simulated = {"mean_ttft_s": run.mean_ttft_s, "mean_itl_s": run.mean_itl_s}
    measured = {"mean_ttft_s": target_ttft, "mean_itl_s": target_itl}
    provenance = (
        f"prefixsim calibrate --from vllm-bench-serve {source.name}: "
        f"{len(requests)} requests ({benchmark.num_failed} failed, left out); step times = "
        f"{scale:.4g} x {prior.source} profile {prior.name} with its real-engine factor; "
        f"front end request_s fitted "
        f"({request_s * 1e3:.3g} ms), tokenization and first-token times shipped; simulated "
        f"mean TTFT {run.mean_ttft_s * 1e3:.2f} ms vs measured {target_ttft * 1e3:.2f} ms, "
        f"ITL {run.mean_itl_s * 1e3:.3f} ms vs {target_itl * 1e3:.3f} ms"
    )
    profile = _calibrated(prior, scale, frontend, provenance)
    return BenchCalibration(profile, prior, scale, measured, simulated, rounds)


def calibrate_from_latency(
    benchmark: LatencyBenchmark, source: Path, deployment: Deployment
) -> BenchCalibration:
    """Scale the prior's step times until the simulated batch takes the measured latency."""
    prior = _prior(deployment)
    requests = [(benchmark.input_len, benchmark.output_len)] * benchmark.batch_size
    target = benchmark.avg_latency_s
    scale = 1.0
    for rounds in range(1, MAX_ROUNDS + 1):  # noqa: B007 (reported after the loop)
        run = replay_requests(
            requests,
            None,
            None,
            deployment,
            StepTimeModel(_scaled(prior.coefficients, scale)),
            NO_FRONTEND,  # an offline LLM.generate batch: no API server
        )
        latency = max(run.e2e_s)
        ratio = target / latency
        if abs(ratio - 1) < TOLERANCE:
            break
        scale *= ratio
    provenance = (
        f"prefixsim calibrate --from vllm-bench-latency {source.name}: batch "
        f"{benchmark.batch_size} x {benchmark.input_len} in / {benchmark.output_len} out, "
        f"{benchmark.num_iterations} iterations; step times = {scale:.4g} x {prior.source} "
        f"profile {prior.name} with its real-engine factor; simulated latency "
        f"{latency * 1e3:.1f} ms vs measured {target * 1e3:.1f} ms"
    )
    profile = _calibrated(prior, scale, None, provenance)
    return BenchCalibration(
        profile, prior, scale, {"avg_latency_s": target}, {"avg_latency_s": latency}, rounds
    )


def _prior(deployment: Deployment) -> Profile:
    """The kernel-derived or roofline profile as a run uses it: with the real-engine factor."""
    prior = prior_profile(deployment.gpu, deployment.model, deployment.tp)
    if prior is None:
        raise InputError("calibrating from a benchmark needs --gpu and --model")
    coefficients = engine_coefficients(prior.coefficients, prior.source, get_gpu(prior.gpu).key)
    return replace(prior, coefficients=coefficients)


def _scaled(coefficients: StepCoefficients, scale: float) -> StepCoefficients:
    if not scale > 0:
        raise InputError(f"the fit diverged (step-time scale {scale:g}); check the benchmark file")
    return replace(
        coefficients,
        step_overhead_s=coefficients.step_overhead_s * scale,
        per_token_s=coefficients.per_token_s * scale,
        per_attention_pair_s=coefficients.per_attention_pair_s * scale,
        per_kv_token_s=coefficients.per_kv_token_s * scale,
        per_decode_seq_s=coefficients.per_decode_seq_s * scale,
    )


def _calibrated(
    prior: Profile, scale: float, frontend: FrontEnd | None, provenance: str
) -> Profile:
    return Profile(
        name=profile_name(get_gpu(prior.gpu).key, get_model(prior.model).key, prior.tp),
        gpu=prior.gpu,
        model=prior.model,
        tp=prior.tp,
        dtype=prior.dtype,
        engine="vLLM, as benchmarked",
        source="calibrated",
        provenance=provenance,
        coefficients=_scaled(prior.coefficients, scale),
        frontend=frontend,
    )
