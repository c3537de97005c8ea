"""`prefixsim calibrate` and `prefixsim costmodel {validate,derive}`: fit, check and regenerate
step-time profiles."""

from __future__ import annotations

import csv
import io
from dataclasses import fields
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from sim.cli.app import app
from sim.costmodel import SHIPPED_PROFILE_DIR, FeatureRanges, save_profile
from sim.costmodel.calibrate import Calibration, calibrate
from sim.costmodel.derive import write_derived_profiles
from sim.costmodel.fit import COLUMNS
from sim.costmodel.validation import (
    KERNEL_SOURCE,
    TARGET_MAPE,
    TARGET_MIN_ROWS,
    ErrorSummary,
    ValidationReport,
    validate_shipped_profiles,
)
from sim.errors import InputError
from sim.fileio import (
    atomic_write_bytes,
    check_output_dir,
    check_output_file,
    make_dirs,
    remove_created,
)

costmodel_app = typer.Typer(
    help="Step-time profiles: validate the shipped ones, regenerate them from kernel data.",
    no_args_is_help=True,
)
app.add_typer(costmodel_app, name="costmodel")

DEFAULT_VALIDATION_DIR = Path("results/costmodel-validation")


@app.command("calibrate")
def calibrate_command(
    measurements: Path = typer.Argument(
        ..., help="CSV of measured steps, TTFTs or ITLs, or a vLLM benchmark result (--from)."
    ),
    out: Path = typer.Option(..., "--out", help="Profile YAML to write."),
    result_format: str | None = typer.Option(
        None,
        "--from",
        help="vllm-bench-serve (a `vllm bench serve --save-result` JSON) or vllm-bench-latency "
        "(`vllm bench latency --output-json`): simulate the benchmark and fit to it.",
    ),
    batch_size: int | None = typer.Option(None, help="vllm-bench-latency: its --batch-size."),
    input_len: int | None = typer.Option(None, help="vllm-bench-latency: its --input-len."),
    output_len: int | None = typer.Option(None, help="vllm-bench-latency: its --output-len."),
    plot: Path | None = typer.Option(
        None,
        "--plot",
        help="Predicted-vs-measured PNG of a measurements CSV's fit (default: next to --out; "
        "a --from calibration prints its fitted means instead).",
    ),
    gpu: str | None = typer.Option(None, help="GPU measured on (enables a prior profile)."),
    model: str | None = typer.Option(None, help="Model measured (enables a prior profile)."),
    tp: int = typer.Option(1, min=1, help="Tensor-parallel degree of the measurements."),
) -> None:
    """Fit a step-time profile to measurements; use it with load_cost_model(<out>)."""
    check_output_file(out)
    if result_format is not None:
        if plot is not None:
            raise InputError(
                f"--plot {plot}: a --from {result_format} calibration fits the benchmark's means "
                "and prints them; it makes no plot (leave --plot out)"
            )
        from sim.cli.bench_calibrate import calibrate_from_bench

        calibrate_from_bench(
            result_format,
            measurements,
            out,
            gpu=gpu,
            model=model,
            tp=tp,
            batch_size=batch_size,
            input_len=input_len,
            output_len=output_len,
        )
        return
    plot_path = plot if plot is not None else out.with_suffix(".png")
    check_output_file(plot_path)
    calibration = calibrate(measurements, gpu=gpu, model=model, tp=tp)
    save_profile(calibration.profile, out)
    from sim.report.costmodel_figures import calibration_figure
    from sim.report.plotting import save_figure

    save_figure(calibration_figure(calibration), plot_path)
    _print_calibration(calibration, out, plot_path)


@costmodel_app.command("validate")
def validate_command(
    out: Path = typer.Option(DEFAULT_VALIDATION_DIR, "--out", help="Folder for the plot and CSV."),
) -> None:
    """Shipped cost models vs real measurements (Splitwise, published TTFTs, vLLM serving runs
    and batch prefills, other engines' steps),
    leave-one-source-out, and the kernel-table comparison labelled as what it is."""
    from sim.calibration.serving_validation import served_exclusions, serving_measurements

    # Made before the work (a minute and more): a place that cannot be written fails now.
    created = make_dirs(out)
    try:
        report = validate_shipped_profiles(serving_measurements(), served_exclusions())
    except BaseException:
        remove_created(created)
        raise
    from sim.report.costmodel_figures import validation_figure
    from sim.report.plotting import save_figure

    save_figure(validation_figure(report), out / "validation.png")
    _write_records_csv(report, out / "validation_records.csv")
    _print_validation(report, out)


@costmodel_app.command("derive")
def derive_command(
    out_dir: Path = typer.Option(SHIPPED_PROFILE_DIR, "--out-dir", help="Profiles folder."),
) -> None:
    """Refit every shipped profile to the vendored kernel tables."""
    check_output_dir(out_dir)
    paths = write_derived_profiles(out_dir)
    Console().print(f"wrote {len(paths)} kernel-derived profiles under {out_dir}")


def _print_calibration(calibration: Calibration, out: Path, plot_path: Path) -> None:
    console = Console()
    fit = calibration.fit
    table = Table(title=f"calibrated profile {calibration.profile.name}")
    table.add_column("coefficient")
    table.add_column("value", justify="right")
    table.add_column("from")
    for name in (*COLUMNS, "t_star_tokens"):
        value = getattr(fit.coefficients, name)
        origin = "fit"
        if name in fit.prior_columns and calibration.prior is not None:
            origin = f"prior ({calibration.prior.source} {calibration.prior.name})"
        elif name in fit.zeroed_columns:
            origin = "0 (negative or not identifiable)"
        elif name == "t_star_tokens":
            origin = "grid search"
        table.add_row(name, f"{value:.4g}", origin)
    console.print(table)
    console.print(
        f"{len(calibration.measurements)} rows: RMS relative error {fit.rms_rel_err:.1%}, "
        f"max {fit.max_rel_err:.1%}"
    )
    ranges = Table(title="covered feature ranges (simulating outside them warns once)")
    ranges.add_column("feature")
    ranges.add_column("min", justify="right")
    ranges.add_column("max", justify="right")
    for feature in fields(FeatureRanges):
        low, high = getattr(fit.covered, feature.name)
        ranges.add_row(feature.name, f"{low:g}", f"{high:g}")
    console.print(ranges)
    console.print(f"wrote {out} and {plot_path}")


def _print_validation(report: ValidationReport, out: Path) -> None:
    console = Console()
    table = Table(title="step-time profiles vs measurements (error = predicted / measured - 1)")
    columns = (
        "source",
        "rows",
        "MAPE",
        "median error",
        "max |error|",
        "table MAPE",
        "roofline MAPE",
    )
    for column in columns:
        table.add_column(column, justify="left" if column == "source" else "right")
    for summary in report.summaries():
        table.add_row(
            summary.name,
            str(summary.num_rows),
            f"{summary.mape:.1%}",
            f"{summary.median_signed_error:+.1%}",
            f"{summary.max_abs_error:.1%}",
            _percent(summary.table_mape),
            _percent(summary.roofline_mape),
        )
    console.print(table)
    per_profile = Table(title=f"{KERNEL_SOURCE}: MAPE per profile (shapes not used for fitting)")
    for column in ("profile", "rows", "MAPE", "max |error|"):
        per_profile.add_column(column, justify="left" if column == "profile" else "right")
    for summary in report.summaries("profile"):
        per_profile.add_row(
            summary.name,
            str(summary.num_rows),
            f"{summary.mape:.1%}",
            f"{summary.max_abs_error:.1%}",
        )
    console.print(per_profile)
    for held_out, kind in ((False, "as shipped"), (True, "leave-one-source-out")):
        console.print(
            _breakdown_table(
                f"real sources, {kind}: MAPE per source and cost model (GPU, model, TP)",
                "cost model",
                report.setup_summaries(held_out=held_out),
            )
        )
        console.print(
            _breakdown_table(
                f"real sources, {kind}: MAPE per source and batch size (sequences together)",
                "batch",
                report.batch_summaries(held_out=held_out),
            )
        )
    for exclusion in report.exclusions:
        console.print(f"left out ({exclusion.source}) {exclusion.case}: {exclusion.reason}")
    fit = report.fit_on_all
    per_gpu = ", ".join(f"{gpu} {factor:.3f}" for gpu, factor in sorted(fit.factors.items()))
    request_ms = "-" if fit.request_s is None else f"{fit.request_s * 1e3:.1f} ms"
    console.print(
        f"real-engine terms fitted on every real source (shipped in engine_terms.yaml and "
        f"frontend.yaml): prefill compute factor {per_gpu}, other GPUs {fit.pooled:.3f}; "
        f"front end request_s {request_ms}; engines without CUDA graphs: host time per layer "
        f"{report.eager_host_per_layer_s * 1e6:.1f} us per decode step, floor per layer "
        f"{report.eager_prefill_floor_per_layer_s * 1e6:.0f} us under prefill steps"
    )
    growths = ", ".join(
        f"{growth.model} TP {growth.tp} {growth.per_sequence_s * 1e6:.0f} us"
        for growth in report.sequence_host_growths
    )
    term = report.eager_sequence_host
    console.print(
        f"host time per decoding sequence of engines without CUDA graphs (derived from Vidur's "
        f"host profiles, shipped in engine_terms.yaml): {term.per_sequence_s * 1e6:.1f} us + "
        f"{term.per_tp_doubling_s * 1e6:.1f} us x log2(TP); per setup {growths}"
    )
    checked = report.target_check()
    missed = sum(not met for _, met in checked)
    console.print(
        f"target, leave-one-source-out MAPE <= {TARGET_MAPE:.0%} on every real source with >= "
        f"{TARGET_MIN_ROWS} rows: " + (f"MISSED on {missed} of {len(checked)}" if missed else "met")
    )
    for summary, met in checked:
        console.print(
            f"  {'met   ' if met else 'MISSED'} {summary.mape:8.4%}  {summary.name} "
            f"({summary.num_rows} rows)"
        )
    console.print(f"wrote {out / 'validation.png'} and {out / 'validation_records.csv'}")


def _breakdown_table(title: str, key: str, summaries: list[ErrorSummary]) -> Table:
    """One row per "source | key value" summary."""
    table = Table(title=title)
    for column in ("source", key, "rows", "MAPE", "median error"):
        table.add_column(column, justify="left" if column in ("source", key) else "right")
    for summary in summaries:
        source, value = summary.name.split(" | ")
        table.add_row(
            source,
            value,
            str(summary.num_rows),
            f"{summary.mape:.1%}",
            f"{summary.median_signed_error:+.1%}",
        )
    return table


def _percent(value: float | None) -> str:
    return f"{value:.1%}" if value is not None else "-"


def _write_records_csv(report: ValidationReport, path: Path) -> None:
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(
        [
            "source",
            "profile",
            "case",
            "measured_s",
            "predicted_s",
            "table_predicted_s",
            "roofline_predicted_s",
            "in_fitted_range",
            "batch_size",
            "held_out_terms",
        ]
    )
    for r in report.records:
        writer.writerow(
            [
                r.source,
                r.profile,
                r.case,
                repr(r.measured_s),
                repr(r.predicted_s),
                "" if r.table_predicted_s is None else repr(r.table_predicted_s),
                "" if r.roofline_predicted_s is None else repr(r.roofline_predicted_s),
                r.in_fitted_range,
                "" if r.batch_size is None else r.batch_size,
                r.held_out_terms,
            ]
        )
    atomic_write_bytes(path, text.getvalue().encode())
