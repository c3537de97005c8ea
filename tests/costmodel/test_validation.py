"""`prefixsim costmodel validate`: profiles vs held-out kernel shapes, Splitwise, published."""

import csv
from pathlib import Path

import pytest

from sim.calibration.serving_validation import (
    BATCH_PREFILL_SOURCE,
    SERVING_SOURCE,
    serving_measurements,
)
from sim.cli import main
from sim.costmodel.engine_terms import load_engine_terms
from sim.costmodel.frontend import load_shipped_frontend
from sim.costmodel.real_sources import QUANTITIES, SOURCES
from sim.costmodel.validation import (
    EAGER_PAIRS_CSV,
    EAGER_PAIRS_SOURCE,
    EAGER_TP_SWEEP_CSV,
    EAGER_TP_SWEEP_SOURCE,
    KERNEL_SOURCE,
    LOSO_SUFFIX,
    POWER_CAPPED,
    PUBLISHED_OTHER_SOURCE,
    PUBLISHED_SPLITWISE_SOURCE,
    SERVED_LOSO_SUFFIX,
    SPLITWISE_DECODE_SOURCE,
    SPLITWISE_PREFILL_SOURCE,
    SPLITWISE_REFIT_SOURCE,
    ErrorSummary,
    RealRow,
    ValidationRecord,
    ValidationReport,
    eager_pair_rows,
    eager_tp_sweep_rows,
    held_out_at_request_s,
    leave_one_source_out_records,
    real_measurement_rows,
    validate_shipped_profiles,
)

SARATHI_FIRST_TOKEN = f"{SOURCES['Sarathi-Serve']}: {QUANTITIES['first_token']}"
BATCH_PREFILLS = f"{BATCH_PREFILL_SOURCE}: batch time"


@pytest.fixture(scope="module")
def report() -> ValidationReport:
    return validate_shipped_profiles(serving_measurements())


def _summaries(report: ValidationReport) -> dict[str, ErrorSummary]:
    return {summary.name: summary for summary in report.summaries()}


def test_every_profile_is_within_10_percent_on_held_out_kernel_shapes(
    report: ValidationReport,
) -> None:
    per_profile = report.summaries("profile")
    assert len(per_profile) == 45
    assert all(summary.num_rows == 60 for summary in per_profile)
    worst = max(per_profile, key=lambda summary: summary.mape)
    assert worst.mape <= 0.10, worst
    overall = _summaries(report)[KERNEL_SOURCE]
    assert overall.mape <= 0.05


def test_the_shipped_real_engine_terms_are_the_fit_on_every_real_source(
    report: ValidationReport,
) -> None:
    """engine_terms.yaml and frontend.yaml's request_s hold what validate fits (A100 1.41,
    H100 1.505, pooled 1.42; request_s 14.82 ms; eager host time 181.1 us per layer on decode
    steps, floor 701 us per layer under prefill steps) and the host time per decoding sequence
    it derives from Vidur's 8 profiled setups (140.2 us + 64.8 us x log2(TP))."""
    fit = report.fit_on_all
    terms = load_engine_terms()
    assert fit.factors == terms.factors and fit.pooled == terms.pooled
    assert fit.request_s == pytest.approx(load_shipped_frontend().frontend.request_s, abs=5e-5)
    assert report.eager_host_per_layer_s == pytest.approx(terms.eager_host_per_layer_s, abs=5e-8)
    assert report.eager_prefill_floor_per_layer_s == terms.eager_prefill_floor_per_layer_s
    assert len(report.sequence_host_growths) == 8
    derived, shipped = report.eager_sequence_host, terms.eager_sequence_host
    assert derived.per_sequence_s == pytest.approx(shipped.per_sequence_s, abs=5e-8)
    assert derived.per_tp_doubling_s == pytest.approx(shipped.per_tp_doubling_s, abs=5e-8)


def test_real_sources_as_shipped(report: ValidationReport) -> None:
    """With the real-engine factor and the eager prefill floor, Splitwise prefill and the serving
    runs' TTFT centre on the measurements; with the eager host times per layer and per decoding
    sequence, so do Splitwise's decode steps (a 2023 stack without CUDA graphs; 38 % below
    without the terms), while the published eager vs CUDA-graph pairs scatter around them (32 %:
    0.03-0.59 ms per layer from engine to engine), TGI 1.2's TP sweep is host-bound where
    the terms are additive (24 %: TP 1 too slow, TP 4 too fast), and the batch prefills of
    Llama-3.3-70B at TP 4 on H100 come out too slow (17 %, median +18 %)."""
    summaries = _summaries(report)
    expected = {
        SPLITWISE_PREFILL_SOURCE: (150, 0.1112, -0.0283),
        SPLITWISE_DECODE_SOURCE: (150, 0.0985, 0.0039),
        EAGER_PAIRS_SOURCE: (9, 0.3185, -0.1786),
        EAGER_TP_SWEEP_SOURCE: (6, 0.2369, 0.0170),
        PUBLISHED_SPLITWISE_SOURCE: (56, 0.1093, -0.0114),
        PUBLISHED_OTHER_SOURCE: (3, 0.4000, 0.1668),
        f"{SERVING_SOURCE}: TTFT": (20, 0.0663, -0.0461),
        f"{SERVING_SOURCE}: ITL": (20, 0.0277, 0.0164),
        f"{SERVING_SOURCE}: E2E": (20, 0.0266, 0.0160),
        BATCH_PREFILLS: (17, 0.1742, 0.1800),
    }
    for source, (rows, mape, median) in expected.items():
        summary = summaries[source]
        assert summary.num_rows == rows, source
        assert summary.mape == pytest.approx(mape, abs=5e-5), source
        assert summary.median_signed_error == pytest.approx(median, abs=5e-5), source
    # Refitted to half of each setup's measurements, the form predicts the other half.
    assert summaries[SPLITWISE_REFIT_SOURCE].mape < 0.10


def test_leave_one_source_out(report: ValidationReport) -> None:
    """Each source predicted by the terms fitted without it: the serving runs within 10 % on
    TTFT (6.4 %), ITL and E2E; Splitwise prefill 17.0 % with the factor fitted on the serving
    runs, the batch prefills, the other published TTFTs and the first tokens of TensorRT-LLM,
    LMDeploy and Sarathi-Serve (A100 1.24, H100 1.27; 13.9 % at A100 1.25, H100 1.495 before
    the batch prefills joined) and the eager prefill floor on Sarathi-Serve's (802 us per layer;
    20.7 % without the floor), its published TTFTs 15.6 % (22.0 %); Sarathi-Serve's first
    tokens 8.3 % with Splitwise's floor (698 us); the batch prefills 24.7 % at the H100 factor
    fitted without them (1.605); Splitwise decode 10.0 % with the host time per decoding
    sequence derived from Vidur's profiles and the eager host time per layer fitted on the
    published pairs, TGI's TP sweep, Sarathi-Serve's and vLLM 0.1's decode steps (185 us per
    layer; 12.1 % without the sequences' term, at 192 us, before the batch prefills joined); the
    pairs 31.9 % and TGI 23.7 % with it fitted on the others."""
    summaries = _summaries(report)
    expected = {
        SPLITWISE_PREFILL_SOURCE + LOSO_SUFFIX: 0.1696,
        SPLITWISE_DECODE_SOURCE + LOSO_SUFFIX: 0.0996,
        PUBLISHED_SPLITWISE_SOURCE + LOSO_SUFFIX: 0.1564,
        SARATHI_FIRST_TOKEN + LOSO_SUFFIX: 0.0835,
        EAGER_PAIRS_SOURCE + LOSO_SUFFIX: 0.3187,
        EAGER_TP_SWEEP_SOURCE + LOSO_SUFFIX: 0.2369,
        f"{SERVING_SOURCE}: TTFT{SERVED_LOSO_SUFFIX}": 0.0635,
        f"{SERVING_SOURCE}: ITL{SERVED_LOSO_SUFFIX}": 0.0284,
        f"{SERVING_SOURCE}: E2E{SERVED_LOSO_SUFFIX}": 0.0273,
        BATCH_PREFILLS + LOSO_SUFFIX: 0.2472,
    }
    for source, mape in expected.items():
        assert summaries[source].mape == pytest.approx(mape, abs=5e-5), source
    held_out_terms = {
        record.held_out_terms
        for record in report.records
        if record.source == SPLITWISE_DECODE_SOURCE + LOSO_SUFFIX
    }
    assert held_out_terms == {
        "x1.240 prefill compute, eager host 185 us/layer",
        "x1.270 prefill compute, eager host 185 us/layer",
    }
    prefill_terms = {
        record.held_out_terms
        for record in report.records
        if record.source
        in (SPLITWISE_PREFILL_SOURCE + LOSO_SUFFIX, SARATHI_FIRST_TOKEN + LOSO_SUFFIX)
    }
    assert prefill_terms == {
        "x1.240 prefill compute, eager prefill floor 802 us/layer",
        "x1.270 prefill compute, eager prefill floor 802 us/layer",
        "x1.425 prefill compute, eager prefill floor 698 us/layer",
    }


def test_each_eager_source_is_predicted_by_the_host_time_fitted_without_it() -> None:
    """Source P: 10 ms steps of 10 layers measured 12 ms eager (0.2 ms per layer); source S: 20 ms
    of 20 layers measured 28 ms (0.4 ms). Each also has a prefill measured at its kernel time
    (factor 1). P with S's 0.4 ms: 14 ms, 16.67 % too slow; S with P's 0.2 ms: 24 ms, 14.29 % too
    fast. The labels name the host time each was predicted with."""

    def rows(source: str, base_s: float, layers: int, measured_s: float) -> list[RealRow]:
        decode = ValidationRecord(source, "p", "decode", measured_s, base_s, None, None, True)
        prefill = ValidationRecord(source, "p", "prefill", 0.1, 0.1, None, None, True)
        return [
            RealRow(decode, source, "h100", lambda _f: base_s, eager_layers=layers),
            RealRow(prefill, source, "h100", lambda f: 0.1 * f, fitted=True),
        ]

    held_out = [
        record
        for record in leave_one_source_out_records(
            rows("P", 0.010, 10, 0.012) + rows("S", 0.020, 20, 0.028)
        )
        if record.case == "decode"
    ]
    errors = {r.source: round(r.relative_error, 4) for r in held_out}
    assert errors == {"P" + LOSO_SUFFIX: 0.1667, "S" + LOSO_SUFFIX: -0.1429}
    assert [r.held_out_terms for r in held_out] == [
        "x1.000 prefill compute, eager host 400 us/layer",
        "x1.000 prefill compute, eager host 200 us/layer",
    ]


def test_each_eager_prefill_is_held_to_the_floor_fitted_without_its_source() -> None:
    """Source P: a 30 ms prefill step of 60 layers measured 48 ms (floor 0.8 ms per layer);
    source S: 20 ms of 80 layers measured 56 ms (0.7 ms). Each also has a prefill step far
    above any floor, measured at its kernel time (factor 1). P with S's 0.7 ms: 42 ms, 12.5 %
    too fast; S with P's 0.8 ms: 64 ms, 14.29 % too slow; their long steps stay exact."""

    def rows(source: str, step_s: float, layers: int, measured_s: float) -> list[RealRow]:
        short = ValidationRecord(source, "p", "short", measured_s, step_s, None, None, True)
        long = ValidationRecord(source, "p", "long", 1.0, 1.0, None, None, True)
        return [
            RealRow(short, source, "h100", lambda _f: step_s, fitted=True, floor_layers=layers),
            RealRow(long, source, "h100", lambda f: 1.0 * f, fitted=True, floor_layers=layers),
        ]

    held_out = leave_one_source_out_records(
        rows("P", 0.030, 60, 0.048) + rows("S", 0.020, 80, 0.056)
    )
    errors = {(r.source, r.case): round(r.relative_error, 4) for r in held_out}
    assert errors == {
        ("P" + LOSO_SUFFIX, "short"): -0.125,
        ("P" + LOSO_SUFFIX, "long"): 0.0,
        ("S" + LOSO_SUFFIX, "short"): 0.1429,
        ("S" + LOSO_SUFFIX, "long"): 0.0,
    }
    assert {r.held_out_terms for r in held_out} == {
        "x1.000 prefill compute, eager prefill floor 700 us/layer",
        "x1.000 prefill compute, eager prefill floor 800 us/layer",
    }


def test_the_eager_pairs_load_with_their_sources() -> None:
    """17 vendored rows, each with its thread and where in it the numbers are; 9 fitted (Python
    engines, dense decoders). metaseq's OPT-175B (96 layers) on 8 A100s: 95 ms per token eager,
    66 ms with CUDA graphs, predicted 66 + 96 x 0.1811 = 83.39 ms as shipped (the measured
    CUDA-graph step holds its sequence's host work already)."""
    with EAGER_PAIRS_CSV.open(newline="") as handle:
        vendored = list(csv.DictReader(handle))
    assert len(vendored) == 17
    assert all(row["source_url"].startswith("https://github.com/") for row in vendored)
    assert all(row["quote_location"] and row["as_published"] for row in vendored)
    rows, exclusions = eager_pair_rows()
    assert len(rows) == 9 and len(exclusions) == 8
    metaseq = next(row for row in rows if row.record.case.startswith("metaseq-opt175b"))
    assert metaseq.eager_layers == 96
    assert metaseq.record.measured_s == pytest.approx(0.095)
    assert metaseq.engine_s(1.505) == pytest.approx(0.066)
    assert metaseq.record.predicted_s == pytest.approx(0.0833856)


def test_the_tgi_tp_sweep_loads_with_its_source() -> None:
    """TGI 1.2 (before its CUDA graphs) serving CodeLlama-34B (48 layers) one request at a time
    at TP 1, 2 and 4 on A100 and H100: 46.79, 29.39, 32.06 and 27.98, 28.02, 31.77 ms per token,
    flat from TP 2 to 4 where the GPU work halves. H100 TP 4 is predicted as the roofline step
    (9.37 ms at H100's factor: T* / factor rounds differently from the weight floor) plus its
    sequence's host work at TP 4 (140.2 + 2 x 64.8 = 269.8 us) and 48 x 0.1811 ms = 18.34 ms as
    shipped."""
    with EAGER_TP_SWEEP_CSV.open(newline="") as handle:
        vendored = list(csv.DictReader(handle))
    assert [row["tp"] for row in vendored] == ["1", "2", "4"] * 2
    assert all(row["source_url"].endswith("/issues/1315") for row in vendored)
    assert all(row["quote_location"] and row["as_published"] for row in vendored)
    rows = eager_tp_sweep_rows()
    measured_ms = [round(row.record.measured_s * 1e3, 2) for row in rows]
    assert measured_ms == [46.79, 29.39, 32.06, 27.98, 28.02, 31.77]
    assert all(row.eager_layers == 48 for row in rows)
    h100_tp4 = rows[-1]
    assert h100_tp4.record.profile == "h100/codellama-34b/tp4"
    assert h100_tp4.engine_s(1.505) == pytest.approx(0.009375 + 0.0002698, abs=5e-6)
    assert h100_tp4.record.predicted_s == pytest.approx(
        0.009375 + 0.0002698 + 48 * 0.0001811, abs=5e-6
    )


def test_the_target_check_lists_every_source_of_20_rows_or_more(report: ValidationReport) -> None:
    """Leave-one-source-out MAPE within 10 % on every real source with >= 20 rows (the 17 batch
    prefills are not one): met on the serving runs (TTFT, ITL, E2E: 20 rows each), LMDeploy's
    decode steps (36) and Splitwise decode (150, 9.96 %: a hair under); missed on Splitwise
    prefill (150, 17.0 %) and its published TTFTs (56, 15.6 %)."""
    checked = {summary.name: (summary.num_rows, met) for summary, met in report.target_check()}
    assert checked == {
        SPLITWISE_PREFILL_SOURCE + LOSO_SUFFIX: (150, False),
        SPLITWISE_DECODE_SOURCE + LOSO_SUFFIX: (150, True),
        PUBLISHED_SPLITWISE_SOURCE + LOSO_SUFFIX: (56, False),
        "LMDeploy TurboMind (A100, kernel prior): decode steps" + LOSO_SUFFIX: (36, True),
        f"{SERVING_SOURCE}: TTFT{SERVED_LOSO_SUFFIX}": (20, True),
        f"{SERVING_SOURCE}: ITL{SERVED_LOSO_SUFFIX}": (20, True),
        f"{SERVING_SOURCE}: E2E{SERVED_LOSO_SUFFIX}": (20, True),
    }
    # A looser target still misses Splitwise prefill and its published TTFTs; a row floor of 40
    # drops the serving runs and LMDeploy, leaving Splitwise's three.
    assert {summary.name for summary, met in report.target_check(0.1001) if not met} == {
        SPLITWISE_PREFILL_SOURCE + LOSO_SUFFIX,
        PUBLISHED_SPLITWISE_SOURCE + LOSO_SUFFIX,
    }
    assert len(report.target_check(min_rows=40)) == 3


def test_held_out_errors_per_setup_and_batch(report: ValidationReport) -> None:
    """Splitwise decode left out, per setup: Llama-2-70B at TP 8 on A100 too fast (MAPE 22.1 %),
    at TP 2 too slow (A100 15.0 %, H100 16.3 %); per batch: 10.8 % at batch 1, 7.0 % at 64 (37.0 %
    without the host time per decoding sequence, before the batch prefills joined): what is left
    depends on TP, not the batch."""
    held_out = SPLITWISE_DECODE_SOURCE + LOSO_SUFFIX
    per_setup = {s.name: s for s in report.setup_summaries(held_out=True)}
    expected_setups = {
        "a100/llama-2-70b/tp8": (19, 0.2209, -0.2297),
        "a100/llama-2-70b/tp2": (18, 0.1497, 0.1186),
        "h100/llama-2-70b/tp2": (18, 0.1628, 0.1790),
    }
    for setup, (rows, mape, median) in expected_setups.items():
        summary = per_setup[f"{held_out} | {setup}"]
        assert (summary.num_rows, round(summary.mape, 4)) == (rows, mape), setup
        assert summary.median_signed_error == pytest.approx(median, abs=5e-5), setup
    per_batch = {s.name: s for s in report.batch_summaries(held_out=True)}
    assert per_batch[f"{held_out} | 1"].mape == pytest.approx(0.1082, abs=5e-5)
    assert per_batch[f"{held_out} | 64"].mape == pytest.approx(0.0701, abs=5e-5)
    assert all(LOSO_SUFFIX in name or SERVED_LOSO_SUFFIX in name for name in per_batch)


def test_splitwise_prefill_held_out_per_prompt_tokens_in_the_step(report: ValidationReport) -> None:
    """Splitwise prefill left out, by total prompt tokens in the step (docs §7): 512-2048 tokens,
    where every source agrees on the factor, 10.8 % (13.5 % without the floor); 128-256 tokens
    on the eager host floor fitted on Sarathi-Serve's 128-token prefill 15.5 % (35.5 % without
    it); 4096 or more (the TP-dependent step up) 29.3 % too fast, a regime no other source
    measures."""
    by_tokens: dict[str, list[float]] = {}
    for record in report.records:
        if record.source != SPLITWISE_PREFILL_SOURCE + LOSO_SUFFIX:
            continue
        batch, prompt = record.case.rsplit(" ", 1)[1].split("x")
        tokens = int(batch) * int(prompt)
        regime = "128-256" if tokens <= 256 else "512-2048" if tokens <= 2048 else "4096+"
        by_tokens.setdefault(regime, []).append(record.relative_error)
    summary = {
        regime: (len(errors), round(sum(abs(e) for e in errors) / len(errors), 4))
        for regime, errors in by_tokens.items()
    }
    assert summary == {"128-256": (16, 0.1550), "512-2048": (88, 0.1079), "4096+": (46, 0.2928)}


def test_splitwise_prefill_held_out_hangs_on_the_front_end_constant() -> None:
    """Left free, the fit without Splitwise settles on request_s about 25.5 ms (17.0 %); held at
    14.82 ms (what the fit on every source gives), the same non-Splitwise rows give A100 1.26
    (its own factor from the first tokens of the C++ engines and the A100 serving runs), H100
    1.35 and Splitwise prefill 15.0 %; at 0 ms 12.6 %, at 20 ms 16.0 %."""
    rows = real_measurement_rows(serving_measurements())
    expected = {
        0.0: ({"a100": 1.37, "h100": 1.465}, 1.36, 0.1261),
        0.01482: ({"a100": 1.26, "h100": 1.35}, 1.26, 0.1502),
        0.02: ({"a100": 1.25, "h100": 1.31}, 1.25, 0.1598),
    }
    for request_s, (factors, pooled, mape) in expected.items():
        fit, summary = held_out_at_request_s(rows, SPLITWISE_PREFILL_SOURCE, request_s)
        assert (fit.factors, fit.pooled, fit.request_s) == (factors, pooled, request_s)
        assert summary.num_rows == 150
        assert summary.mape == pytest.approx(mape, abs=5e-5), request_s


def test_unmodellable_rows_are_listed_with_a_reason(report: ValidationReport) -> None:
    reasons = [exclusion.reason for exclusion in report.exclusions]
    assert reasons.count("fp8 weights; the profiles are bf16") == 2
    assert reasons.count("32-GPU TensorRT-LLM system; no profile") == 3
    assert sum("not a full prefill" in reason for reason in reasons) == 4
    # 75 Splitwise cases x prefill and decode, and 28 published rows.
    assert reasons.count(POWER_CAPPED) == 2 * 76 + 28
    # The eager pairs outside the term: 6 from C++ engines (one of them MoE), 1 MoE, 1 rough.
    eager = [e.reason for e in report.exclusions if e.source == EAGER_PAIRS_SOURCE]
    assert len(eager) == 8
    assert sum("C++" in reason for reason in eager) == 6
    assert sum(reason.startswith("MoE") for reason in eager) == 1


@pytest.mark.slow
def test_cli_writes_plot_and_records(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as done:
        main(["costmodel", "validate", "--out", str(tmp_path)])
    assert done.value.code == 0
    assert (tmp_path / "validation.png").stat().st_size > 20_000
    lines = (tmp_path / "validation_records.csv").read_text().splitlines()
    assert lines[0].startswith("source,profile,case,measured_s,predicted_s")
    # Kernel tables; real rows (eager pairs, TGI's TP sweep and the 99 + 9 + 8 published engine
    # steps included), 20 serving runs x 3 metrics and 17 batch prefills as shipped and left one
    # source out; Splitwise refit.
    assert (
        len(lines) == 1 + 2700 + 2 * (150 + 150 + 56 + 3 + 9 + 6 + 99 + 9 + 8 + 20 * 3 + 17) + 300
    )
