"""The serving front end in every request's TTFT, and calibration from vLLM benchmark results."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from cli_helpers import run_prefixsim

from sim.calibration.bench_fit import calibrate_from_latency, calibrate_from_serve
from sim.calibration.bench_replay import Deployment, replay_requests
from sim.calibration.serving_validation import (
    read_batch_prefills,
    read_serving_runs,
    served_exclusions,
    serving_measurements,
)
from sim.config.scenario import Scenario
from sim.costmodel import load_cost_model
from sim.costmodel.bench_results import (
    LatencyBenchmark,
    read_latency_result,
    read_serve_result,
)
from sim.costmodel.engine_terms import load_engine_terms
from sim.costmodel.frontend import NO_FRONTEND, FrontEnd, load_shipped_frontend
from sim.costmodel.profiles import load_profile
from sim.costmodel.validation import (
    LOSO_SUFFIX,
    RealRow,
    ValidationRecord,
    leave_one_source_out_records,
)
from sim.errors import InputError
from sim.report.report import write_report
from sim.runner import run_scenario

EXAMPLE = (
    Path(__file__).parents[2] / "sim/costmodel/data/examples/vllm_bench_serve_h100_llama3_8b.json"
)
H100_8B = Deployment.served("h100", "llama-3.1-8b", 1)


def test_two_requests_at_once_reach_the_engine_together_after_the_slowest_ingress():
    """Scenario: 100- and 300-token prompts sent together, constant 10 ms steps, front end
    2 ms + 10 us/token in, 1 ms for the first token out. Both reach the engine at 5 ms (the slower
    ingress), prefill in one step (to 15 ms), first tokens reach the client at 16 ms."""
    frontend = FrontEnd(request_s=0.002, per_prompt_token_s=1e-5, first_token_s=0.001)
    run = replay_requests(
        [(100, 3), (300, 3)], None, None, H100_8B, load_cost_model("constant:0.01"), frontend
    )
    assert run.ttfts_s == pytest.approx([0.016, 0.016])
    assert run.mean_itl_s == pytest.approx(0.01)
    assert run.e2e_s == pytest.approx([0.036, 0.036])


def test_no_front_end_leaves_ttft_to_the_engine():
    """Same requests without a front end: TTFT is the 10 ms prefill step alone."""
    run = replay_requests(
        [(100, 3), (300, 3)], None, None, H100_8B, load_cost_model("constant:0.01"), NO_FRONTEND
    )
    assert run.ttfts_s == pytest.approx([0.01, 0.01])


def test_batch_prefills_load_with_their_reasons():
    """25 cells of the five out1 files, 17 used; the 8227-token single prompt took 0.6849 s at
    the client; the 16384-token file (3 cells), four stalled batches and the batch of 64 are
    left out, each with its reason."""
    batches = {batch.row: batch for batch in read_batch_prefills()}
    assert (len(batches), sum(batch.used for batch in batches.values())) == (25, 17)
    single = batches["tokenomics-llama-3.3-70b-tp4-h100-8192x1"]
    assert (single.input_tokens, single.batch_size, single.elapsed_s) == (
        8227,
        1,
        0.6848535924218595,
    )
    assert single.setup == "h100/llama-3.1-70b/tp4"
    exclusions = served_exclusions()
    assert len(exclusions) == 8 and all(exclusion.reason for exclusion in exclusions)
    assert (
        "ThreadPoolExecutor" in batches["tokenomics-llama-3.3-70b-tp4-h100-1024x64"].reason_not_used
    )


@pytest.mark.slow
def test_requests_parquet_splits_ttft_into_queue_front_end_prefill_and_first_decode(tmp_path):
    """A 5 req/s chat scenario on the shipped H100 profile with the shipped front end: every
    row's queue + front end + prefill + first decode equals its TTFT, and the front end is the
    shipped 14.82 ms + 1.3 us per prompt token."""
    scenario = Scenario.model_validate(
        {
            "name": "ttft-parts",
            "seed": 1,
            "duration_s": 20,
            "deployment": {"model": "llama-3.1-8b", "gpu": "h100"},
            "workload": {
                "source": {"kind": "chat", "common": {"system_prompt_tokens": 512}},
                "arrivals": {"process": "poisson", "rate_per_s": 5},
            },
        }
    )
    result = run_scenario(scenario, tmp_path, results_root=tmp_path)
    rows = pq.read_table(result.run_dir / "requests.parquet").to_pylist()
    assert len(rows) > 50
    for row in rows:
        parts = row["queue_s"] + row["frontend_s"] + row["prefill_s"] + row["first_decode_s"]
        assert parts == pytest.approx(row["ttft_s"], abs=1e-12)
        assert row["frontend_s"] == pytest.approx(0.01482 + 1.3e-6 * row["num_prompt_tokens"])
        assert row["queue_s"] >= -1e-12 and row["prefill_s"] > 0
    cost_model = result.summary["cost_model"]
    assert cost_model["kind"] == "shipped"
    assert cost_model["name"] == "h100/llama-3.1-8b/tp1"
    assert cost_model["validated_error"]["vllm_serving_ttft_loso_mape"] == 0.064
    report = write_report(result.run_dir).report_path.read_text()
    assert "## Cost model\n\n- **shipped** `h100/llama-3.1-8b/tp1`: front end 14.8 ms" in report
    assert "vllm serving ttft loso 6.4%" in report


def test_shipped_front_end_is_the_documented_one():
    assert load_shipped_frontend().frontend == FrontEnd(0.01482, 1.3e-6, 0.0)


def test_calibration_from_the_shipped_bench_serve_example_reproduces_its_means(tmp_path):
    """The example (10 requests at once, H100, Llama-3-8B): calibrated, the simulated run's mean
    TTFT and per-token ITL are within 1 % of the measured 62.43 ms and 7.240 ms."""
    benchmark = read_serve_result(EXAMPLE)
    assert benchmark.mean_ttft_s == pytest.approx(0.0624264, rel=1e-5)
    assert benchmark.mean_itl_s == pytest.approx(0.00723989, rel=1e-5)
    calibration = calibrate_from_serve(benchmark, EXAMPLE, H100_8B)
    for key in ("mean_ttft_s", "mean_itl_s"):
        assert calibration.simulated[key] == pytest.approx(calibration.measured[key], rel=0.01)
    profile = calibration.profile
    assert profile.source == "calibrated" and profile.frontend is not None
    # The calibrated profile replays the benchmark to the same means when loaded from disk.
    out = tmp_path / "cal.yaml"
    result = run_prefixsim(
        "calibrate",
        EXAMPLE,
        "--from",
        "vllm-bench-serve",
        "--gpu",
        "h100",
        "--model",
        "llama-3.1-8b",
        "--out",
        out,
    )
    assert result.returncode == 0, result.stderr
    loaded = load_profile(out)
    assert loaded.frontend == profile.frontend
    rerun = replay_requests(
        [(r.input_len, r.output_len) for r in benchmark.requests],
        None,
        None,
        H100_8B,
        load_cost_model(str(out)),
        loaded.frontend,
    )
    assert rerun.mean_ttft_s == pytest.approx(benchmark.mean_ttft_s, rel=0.01)
    assert rerun.mean_itl_s == pytest.approx(benchmark.mean_itl_s, rel=0.01)


def test_calibration_from_a_latency_run_matches_its_average(tmp_path):
    """A batch of 8 x 512 in / 64 out measured at 0.9 s: the fitted scale reproduces 0.9 s."""
    path = tmp_path / "latency.json"
    path.write_text(json.dumps({"avg_latency": 0.9, "latencies": [0.89, 0.91]}))
    benchmark = read_latency_result(path, batch_size=8, input_len=512, output_len=64)
    assert benchmark == LatencyBenchmark(0.9, 2, 8, 512, 64)
    calibration = calibrate_from_latency(benchmark, path, H100_8B)
    assert calibration.simulated["avg_latency_s"] == pytest.approx(0.9, rel=0.01)
    assert calibration.step_scale > 1


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"ttfts": [0.1]}, "field input_lens: expected a non-empty list"),
        (
            {"input_lens": [1], "output_lens": [2], "ttfts": [-1], "itls": [[0.1]]},
            "field ttfts[0] = -1: expected seconds >= 0",
        ),
        (
            {"input_lens": [1, 2], "output_lens": [2], "ttfts": [0.1], "itls": [[0.1]]},
            "per-request lists differ in length",
        ),
        # vLLM refuses an empty prompt: a served request of 0 input tokens is not a real one
        # (the simulator would have had nothing to prefill).
        (
            {"input_lens": [0], "output_lens": [2], "ttfts": [0.1], "itls": [[0.1]]},
            "field input_lens[0] = 0: expected a whole number >= 1",
        ),
    ],
)
def test_bad_bench_serve_files_name_the_field(tmp_path, document, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document))
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace("]", r"\]")):
        read_serve_result(path)


def test_each_source_is_predicted_by_the_factor_fitted_without_it():
    """Source A measures 1.5x its kernel time (ten rows), source B 2x (ten rows), both on H100:
    A predicted with B's factor 2 is 33.3 % too slow, B with A's factor 1.5 is 25 % too fast."""

    def rows(source: str, ratio: float) -> list[RealRow]:
        record = ValidationRecord(source, "p", "c", ratio, 1.0, None, None, True)
        return [RealRow(record, source, "h100", lambda f: f, fitted=True) for _ in range(10)]

    held_out = leave_one_source_out_records(rows("A", 1.5) + rows("B", 2.0))
    errors = {r.source: round(r.relative_error, 4) for r in held_out}
    assert errors == {"A" + LOSO_SUFFIX: 0.3333, "B" + LOSO_SUFFIX: -0.25}


def test_serving_runs_derive_per_token_itl_from_the_printed_means():
    """Run h100-llama3-8b-tp1: 10 requests, 1867 output tokens, mean TTFT 62.426 ms, mean E2E
    1431.777 ms, so per-token ITL = (1431.777 - 62.426) ms / (1857 / 10) = 7.3740 ms."""
    runs = {run.run: run for run in read_serving_runs()}
    assert len(runs) == 20
    run = runs["h100-llama3-8b-tp1"]
    assert run.mean_itl_s == pytest.approx((1.431777 - 0.062426) / 185.7)
    mistral = runs["h100-mistral-7b-tp1-0819"]  # ITL printed per token, E2E derived
    assert mistral.mean_e2e_s == pytest.approx(0.057569 + 0.0080447 * (2490 - 9) / 9)


def test_empty_output_requests_are_part_of_the_load_but_not_of_the_means():
    """h100-llama3-70b-tp2: requests 7 and 8 (399 and 328 prompt tokens) completed with no text;
    the 8 others carry the means."""
    run = {run.run: run for run in read_serving_runs()}["h100-llama3-70b-tp2"]
    assert run.empty_output_prompts == [399, 328]
    assert len(run.requests) == 8 and sum(p for p, _ in run.requests) + 399 + 328 == 1369


@pytest.mark.slow
def test_shipped_models_follow_real_serving_ttft_itl_and_e2e():
    """The 20 vendored vLLM serving runs (TTFT, ITL and E2E each) and the 17 used batch prefills
    replayed as shipped: TTFT MAPE 6.6 %, ITL 2.8 %, E2E 2.7 % (measured in this branch; the
    figures docs/cost_model.md quotes). The engine-only
    replays at factors 1 and 2 reproduce the shipped replay at the shipped factor."""
    measurements = serving_measurements()
    assert len(measurements) == 77

    def mape(metric: str) -> float:
        rows = [m.shipped for m in measurements if m.shipped.source.endswith(metric)]
        return sum(abs(r.relative_error) for r in rows) / len(rows)

    assert mape("TTFT") == pytest.approx(0.0663, abs=0.00005)
    assert mape("ITL") == pytest.approx(0.0277, abs=0.00005)
    assert mape("E2E") == pytest.approx(0.0266, abs=0.00005)
    terms, request_s = load_engine_terms(), load_shipped_frontend().frontend.request_s
    for m in measurements:
        at_shipped = m.engine_s(terms.factor(m.gpu_key)) + m.request_s_count * request_s
        # Linear up to the rounding of T* / factor, which moves the decode floor by < 1 %.
        assert at_shipped == pytest.approx(m.shipped.predicted_s, rel=5e-3)


def _chat_scenario(**extra: object) -> dict[str, object]:
    return {
        "name": "fe",
        "seed": 1,
        "workload": {
            "source": {"kind": "chat", "common": {"system_prompt_tokens": 64}},
            "arrivals": {"process": "poisson", "rate_per_s": 2},
            "num_arrivals": 5,
        },
        **extra,
    }


def test_frontend_none_and_constant_models_leave_ttft_to_the_engine(tmp_path):
    """`frontend: none` on the shipped profile, and `auto` on a constant: model, both give
    frontend_s = 0 in every row and an all-zero front end in summary.json."""
    for extra in ({"frontend": "none"}, {"cost_model": "constant:0.01"}):
        scenario = Scenario.model_validate(_chat_scenario(**extra))
        result = run_scenario(scenario, tmp_path, results_root=tmp_path / str(len(extra)))
        rows = pq.read_table(result.run_dir / "requests.parquet").to_pylist()
        assert rows and all(row["frontend_s"] == 0.0 for row in rows)
        assert result.summary["cost_model"]["frontend_request_s"] == 0.0


def test_an_unknown_frontend_is_a_one_line_field_error():
    with pytest.raises(Exception, match="frontend") as error:
        Scenario.model_validate(_chat_scenario(frontend="fast"))
    assert "'auto'" in str(error.value) and "'none'" in str(error.value)


@pytest.mark.parametrize(
    ("rate", "concurrency", "start_times"),
    [(4.0, None, None), ("inf", 2, None), (4.0, None, [0.0, 0.1, 0.25, 0.3, 0.7, 0.9])],
)
def test_calibration_replays_rates_concurrency_and_start_times(
    tmp_path, rate, concurrency, start_times
):
    """Six 200-token prompts with 32 output tokens each, measured at 50 ms TTFT and 9 ms ITL,
    sent at 4 req/s (gamma gaps, seed 0), two at a time, or at recorded start times: the fit
    reproduces both means within 1 %."""
    document = {
        "request_rate": rate,
        "max_concurrency": concurrency,
        "input_lens": [200] * 6,
        "output_lens": [32] * 6,
        "ttfts": [0.05] * 6,
        "itls": [[0.009] * 31] * 6,
        "errors": [""] * 6,
    }
    if start_times is not None:
        document["start_times"] = start_times
    path = tmp_path / "serve.json"
    path.write_text(json.dumps(document))
    calibration = calibrate_from_serve(read_serve_result(path), path, H100_8B)
    assert calibration.simulated["mean_ttft_s"] == pytest.approx(0.05, rel=0.01)
    assert calibration.simulated["mean_itl_s"] == pytest.approx(0.009, rel=0.01)


def _calibrate_edited_example(tmp_path: Path, edit, *extra: str):
    """`prefixsim calibrate --from vllm-bench-serve` on the shipped example after `edit(document)`:
    the CLI result, the edited file and the --out path."""
    document = json.loads(EXAMPLE.read_text())
    edit(document)
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(document))
    out = tmp_path / "out" / "p.yaml"
    result = run_prefixsim(
        "calibrate", path, "--from", "vllm-bench-serve", "--gpu", "h100",
        "--model", "llama-3.1-8b", "--out", out, *extra,
    )  # fmt: skip
    return result, path, out


def _assert_latency_refused(tmp_path: Path, setup: list[str], message: str) -> None:
    """`calibrate --from vllm-bench-latency` with --gpu, --model, --batch-size, --input-len and
    --output-len `setup` is refused with `message` (`_assert_refused`)."""
    gpu, model, batch_size, input_len, output_len = setup
    path = tmp_path / "latency.json"
    path.write_text(json.dumps({"avg_latency": 1.0, "latencies": [1.0]}))
    out = tmp_path / "p.yaml"
    result = run_prefixsim(
        "calibrate", path, "--from", "vllm-bench-latency", "--gpu", gpu, "--model", model,
        "--batch-size", batch_size, "--input-len", input_len, "--output-len", output_len,
        "--out", out,
    )  # fmt: skip
    _assert_refused(result, path, out, message)


def _assert_refused(result, path: Path, out: Path, message: str, end: str = "") -> None:
    """Exit 2, one line naming the file and `message` (then anything, then `end` if given), no
    traceback, nothing written."""
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    if end:
        assert len(lines) == 1 and lines[0].startswith(f"error: {path}: {message}"), lines
        assert lines[0].endswith(end), lines
    else:
        assert lines == [f"error: {path}: {message}"]
    assert "Traceback" not in result.stdout + result.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"request_rate": 5, "burstiness": -1},
            "field burstiness = -1: expected a number > 0 (1 = Poisson arrivals) or null",
        ),
        (
            {"request_rate": 5, "burstiness": "x"},
            "field burstiness = 'x': expected a number > 0 (1 = Poisson arrivals) or null",
        ),
        (
            {"request_rate": 5, "burstiness": 0},
            "field burstiness = 0: expected a number > 0 (1 = Poisson arrivals) or null",
        ),
        (
            {"max_concurrency": "a"},
            "field max_concurrency = 'a': expected a whole number >= 1 or null (no limit)",
        ),
        (
            {"max_concurrency": -2},
            "field max_concurrency = -2: expected a whole number >= 1 or null (no limit)",
        ),
        (
            {"errors": ["x"]},
            "field errors: expected a list of 10 error texts (one per request), got 1 entries",
        ),
    ],
)
def test_bad_arrival_fields_of_a_bench_serve_file_are_refused_on_one_line(
    tmp_path, fields, message
):
    """Scenario: the shipped example with a negative, non-numeric or zero burstiness (vLLM needs
    > 0), a non-integer or negative max_concurrency, or an errors list shorter than the requests:
    exit 2 with one line naming the file, the field and its value, and no profile written."""
    result, path, out = _calibrate_edited_example(tmp_path, lambda d: d.update(fields))
    _assert_refused(result, path, out, message)


def test_a_null_burstiness_means_poisson_arrivals(tmp_path):
    """Scenario: request_rate 5 with burstiness null (as missing): read as 1.0, Poisson gaps."""
    document = json.loads(EXAMPLE.read_text())
    document.update({"request_rate": 5, "burstiness": None, "max_concurrency": None})
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(document))
    benchmark = read_serve_result(path)
    assert benchmark.burstiness == 1.0 and benchmark.max_concurrency is None


@pytest.mark.parametrize(("index", "input_len"), [(0, 200_000), (3, 131_072)])
def test_a_prompt_longer_than_max_model_len_is_refused_before_replay(tmp_path, index, input_len):
    """Scenario: one request's input length at or above the replayed engine's max_model_len
    (131072, Llama-3.1-8B's context; vLLM rejects such a prompt), with request 1 failed so
    that the index reported is the file's, not the successful requests': exit 2 naming
    input_lens[index], the length and the limit, checked before any token list is built (a
    length of 10**9 would otherwise exhaust memory)."""

    def edit(document):
        document["errors"][1] = "timeout"
        document["input_lens"][index] = input_len

    result, path, out = _calibrate_edited_example(tmp_path, edit)
    _assert_refused(
        result,
        path,
        out,
        f"field input_lens[{index}] = {input_len}: request {index}'s prompt must be shorter "
        "than max_model_len 131072, the limit of the simulated engine calibrate replays the "
        "benchmark on (calibrate has no option to raise it)",
    )


def test_a_latency_input_len_over_max_model_len_is_refused(tmp_path):
    """Scenario: `--from vllm-bench-latency --input-len 500000`: exit 2 naming --input-len, the
    length and max_model_len 131072, nothing written."""
    _assert_latency_refused(
        tmp_path,
        ["h100", "llama-3.1-8b", "1", "500000", "8"],
        "--input-len 500000: the prompt must be shorter than max_model_len 131072, the limit of "
        "the simulated engine calibrate replays the benchmark on (calibrate has no option to "
        "raise it)",
    )


def test_a_latency_batch_past_the_replay_budget_is_refused(tmp_path):
    """Scenario: `--batch-size 100000000` of 1024 in / 128 out: exit 2 naming --batch-size, the
    1,152 tokens of each request and the 67,108,864-token budget, before any list is built
    (the batch would otherwise fill memory for hours); nothing written."""
    _assert_latency_refused(
        tmp_path,
        ["h100", "llama-3.1-8b", "100000000", "1024", "128"],
        "--batch-size 100000000: 100,000,000 requests of 1,152 prompt and output tokens are "
        "more than the 67,108,864 tokens calibrate replays a batch with; lower --batch-size",
    )


def test_outputs_past_max_model_len_are_not_built():
    """Scenario: one 1000-token prompt asking for 10**12 output tokens on Llama-2-7B
    (max_model_len 4096, its context): the replay builds the 3,096 outputs the engine emits
    before it stops the request, and finishes (10**12 Python ints would exhaust memory)."""
    deployment = Deployment.served("a100", "llama-2-7b", 1)
    run = replay_requests(
        [(1000, 10**12)], None, None, deployment, load_cost_model("constant:0.01"), NO_FRONTEND
    )
    assert run.output_lens == [3_096]


def test_calibrate_replays_on_the_models_context_as_vllm_serves_it(tmp_path):
    """Scenario: a latency run of a 5000-token prompt on Llama-2-7B (a 4096-token context) on
    an A100. vLLM's server starts that model with max_model_len 4096 and refuses the prompt;
    calibrate replays on the same engine (max_model_len 4096, the A100's 2048-token and
    256-sequence batch limits), so it refuses the prompt naming 4096, nothing written."""
    engine = Deployment.served("a100", "llama-2-7b", 1).engine
    assert (engine.max_model_len, engine.max_num_batched_tokens, engine.max_num_seqs) == (
        4096,
        2048,
        256,
    )
    _assert_latency_refused(
        tmp_path,
        ["a100", "llama-2-7b", "1", "5000", "8"],
        "--input-len 5000: the prompt must be shorter than max_model_len 4096, the limit of "
        "the simulated engine calibrate replays the benchmark on (calibrate has no option to "
        "raise it)",
    )


def test_an_unknown_gpu_is_one_line(tmp_path):
    """Scenario: `calibrate --from vllm-bench-serve --gpu nosuch`: exit 2, one line listing the
    known GPUs (it was a pydantic traceback), nothing written."""
    result, _, out = _calibrate_edited_example(tmp_path, lambda document: None, "--gpu", "nosuch")
    assert result.returncode == 2
    assert result.stderr.startswith("error: unknown GPU 'nosuch'; known GPUs: a100, ")
    assert len(result.stderr.strip().splitlines()) == 1 and not out.exists()


def test_plot_is_refused_for_a_benchmark_calibration(tmp_path):
    """Scenario: `calibrate --from vllm-bench-serve ... --plot fit.png`: a benchmark calibration
    fits two means and makes no plot, so the option is refused on one line (exit 2) instead of
    silently writing nothing; no profile is written either."""
    result, _, out = _calibrate_edited_example(
        tmp_path, lambda document: None, "--plot", str(tmp_path / "fit.png")
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: --plot {tmp_path / 'fit.png'}: a --from vllm-bench-serve calibration fits the "
        "benchmark's means and prints them; it makes no plot (leave --plot out)"
    ]
    assert not out.exists() and not (tmp_path / "fit.png").exists()


def test_empty_itls_are_refused_naming_the_field(tmp_path):
    """Scenario: every request's itls list is empty: no ITL to fit, exit 2 naming field itls
    (it used to say only "the fit diverged (step-time scale 0)")."""
    result, path, out = _calibrate_edited_example(
        tmp_path, lambda d: d.update(itls=[[] for _ in d["itls"]])
    )
    _assert_refused(
        result,
        path,
        out,
        "field itls: every successful request's list of inter-token gaps is empty or all 0 s, "
        "so there is no inter-token latency to fit (expected the gaps in seconds between "
        "streamed tokens)",
    )


def test_a_fit_that_misses_the_measured_ttft_is_refused(tmp_path):
    """Scenario: every TTFT is 1 ns, far below the simulated prefill even with no front-end
    time: the calibrated run still misses the mean TTFT by far over MAX_FIT_MISS (50 %), so
    calibrate exits 2 naming field ttfts and writes nothing."""
    result, path, out = _calibrate_edited_example(
        tmp_path, lambda d: d.update(ttfts=[1e-9] * len(d["ttfts"]))
    )
    _assert_refused(
        result,
        path,
        out,
        "field ttfts: calibrated, the simulated mean TTFT is ",
        end="%), more than the allowed 50% off; no step-time scale and front-end time reproduce "
        "this benchmark",
    )


def test_a_ttft_needing_seconds_of_front_end_time_is_refused(tmp_path):
    """Scenario: every TTFT is 50 s with all requests sent at once: matching it needs 50 s of
    front-end time per request, over MAX_FRONTEND_REQUEST_S (1 s): exit 2 naming ttfts."""
    result, path, out = _calibrate_edited_example(
        tmp_path, lambda d: d.update(ttfts=[50.0] * len(d["ttfts"]))
    )
    _assert_refused(
        result,
        path,
        out,
        "field ttfts: matching the mean TTFT of 50 s needs 50 s of front-end time per request, "
        "more than the plausible 1 s (vLLM's API server takes about 15 ms): the TTFTs include "
        "time the replay does not model",
    )


@pytest.mark.parametrize(
    ("avg_latency", "message", "end"),
    [
        (
            0.0001,
            "field avg_latency: matching a batch latency of 0.1 ms needs step times 0.000",
            " x the kernel-derived profile h100/llama-3.1-8b/tp1, outside the plausible 0.2-5 x; "
            "check that the benchmark ran with this --gpu, --model and --tp",
        ),
        (0, "field avg_latency = 0: expected seconds > 0", ""),
    ],
)
def test_an_implausible_latency_fit_is_refused(tmp_path, avg_latency, message, end):
    """Scenario: a batch of 8 x 512 in / 64 out measured at 0.1 ms (a 0.0002 x step-time scale,
    outside STEP_SCALE_RANGE 0.2-5) or at 0 s: exit 2 naming avg_latency, nothing written."""
    path = tmp_path / "latency.json"
    path.write_text(json.dumps({"avg_latency": avg_latency, "latencies": [avg_latency]}))
    out = tmp_path / "p.yaml"
    result = run_prefixsim(
        "calibrate", path, "--from", "vllm-bench-latency", "--gpu", "h100",
        "--model", "llama-3.1-8b", "--batch-size", "8", "--input-len", "512",
        "--output-len", "64", "--out", out,
    )  # fmt: skip
    _assert_refused(result, path, out, message, end)


def test_the_shipped_example_calibrates_within_the_plausibility_limits(tmp_path):
    """Scenario: the unedited example through the CLI: exit 0, a profile written, both means
    within 10 % and the step-time scale inside STEP_SCALE_RANGE."""
    from sim.calibration.bench_fit import STEP_SCALE_RANGE

    result, _, out = _calibrate_edited_example(tmp_path, lambda d: None)
    assert result.returncode == 0, result.stderr
    assert out.is_file()
    calibration = calibrate_from_serve(read_serve_result(EXAMPLE), EXAMPLE, H100_8B)
    assert STEP_SCALE_RANGE[0] <= calibration.step_scale <= STEP_SCALE_RANGE[1]
    for key, measured in calibration.measured.items():
        assert calibration.simulated[key] == pytest.approx(measured, rel=0.1)
