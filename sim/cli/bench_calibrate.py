"""`prefixsim calibrate --from vllm-bench-serve|vllm-bench-latency RESULT.json`."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from sim.calibration.bench_fit import (
    BenchCalibration,
    calibrate_from_latency,
    calibrate_from_serve,
)
from sim.calibration.bench_replay import Deployment
from sim.costmodel import save_profile
from sim.costmodel.bench_results import read_latency_result, read_serve_result
from sim.errors import InputError

BENCH_FORMATS = ("vllm-bench-serve", "vllm-bench-latency")


def calibrate_from_bench(
    result_format: str,
    result_path: Path,
    out: Path,
    *,
    gpu: str | None,
    model: str | None,
    tp: int,
    batch_size: int | None,
    input_len: int | None,
    output_len: int | None,
) -> BenchCalibration:
    """Fit and write the profile; print what was fitted and how well the simulation matches."""
    if result_format not in BENCH_FORMATS:
        raise InputError(
            f"--from {result_format!r}: expected one of {', '.join(BENCH_FORMATS)} "
            "(or leave it out for a measurements CSV)"
        )
    if gpu is None or model is None:
        raise InputError(f"--from {result_format} needs --gpu and --model (the prior profile)")
    deployment = Deployment.served(gpu, model, tp)
    if result_format == "vllm-bench-serve":
        calibration = calibrate_from_serve(read_serve_result(result_path), result_path, deployment)
    else:
        missing = [
            name
            for name, value in (
                ("--batch-size", batch_size),
                ("--input-len", input_len),
                ("--output-len", output_len),
            )
            if value is None
        ]
        if missing:
            raise InputError(
                f"--from vllm-bench-latency needs {', '.join(missing)} (the benchmark's "
                "arguments; its JSON does not record them)"
            )
        benchmark = read_latency_result(
            result_path,
            batch_size=batch_size or 0,
            input_len=input_len or 0,
            output_len=output_len or 0,
        )
        calibration = calibrate_from_latency(benchmark, result_path, deployment)
    save_profile(calibration.profile, out)
    console = Console()
    console.print(
        f"calibrated profile {calibration.profile.name}: {calibration.profile.provenance}"
    )
    for key, measured in calibration.measured.items():
        simulated = calibration.simulated[key]
        console.print(
            f"{key}: measured {measured * 1e3:.3f} ms, simulated {simulated * 1e3:.3f} ms "
            f"({simulated / measured - 1:+.2%})"
        )
    console.print(f"wrote {out}")
    return calibration
