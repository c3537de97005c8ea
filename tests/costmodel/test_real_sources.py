"""Published step times of other engines (data/engine_steps/) as `costmodel validate` rows."""

import csv
from collections import Counter
from pathlib import Path

import pytest

from sim.costmodel.batch import BatchShape
from sim.costmodel.engine_terms import load_engine_terms, real_engine_coefficients
from sim.costmodel.model import StepTimeModel
from sim.costmodel.real_sources import (
    ENGINE_STEPS_CSV,
    TGI_SAGEMAKER_CSV,
    VLLM01_CSV,
    engine_step_rows,
    read_engine_steps,
)
from sim.costmodel.roofline import roofline_profile
from sim.costmodel.specs import get_gpu, get_model
from sim.costmodel.validation import RealRow, real_measurement_rows
from sim.errors import InputError

GPT_FAST = "gpt-fast (A100, CUDA graphs)"
TRT_LLM = "TensorRT-LLM (A100, kernel prior)"
LMDEPLOY = "LMDeploy TurboMind (A100, kernel prior)"
SARATHI = "Sarathi-Serve (A100 PCIe, vLLM-derived, no CUDA graphs)"
TGI_SAGEMAKER = "TGI 1.0.3 on SageMaker (A10G, A100-40GB, no CUDA graphs)"
VLLM01 = "vLLM 0.1 (A100 TP 2, Ray workers, no CUDA graphs)"


@pytest.fixture(scope="module")
def rows_by_id() -> dict[str, RealRow]:
    rows, _ = engine_step_rows((ENGINE_STEPS_CSV,))
    return {row.record.case.split(":")[0]: row for row in rows}


def test_the_file_holds_109_rows_of_which_99_are_used_per_source_and_quantity() -> None:
    steps = read_engine_steps()
    assert len(steps) == 109
    used = Counter((step.source, step.quantity) for step in steps if step.used)
    assert used == {
        ("gpt-fast", "decode_step"): 14,
        ("TensorRT-LLM", "first_token"): 10,
        ("LMDeploy", "first_token"): 8,
        ("LMDeploy", "decode_step"): 36,
        ("Sarathi-Serve", "first_token"): 7,
        ("Sarathi-Serve", "decode_step"): 8,
        ("Sarathi-Serve", "chunked_prefill"): 16,
    }
    gpus = Counter((step.source == "Sarathi-Serve", step.gpu_key) for step in steps)
    assert gpus == {(False, "a100"): 77, (True, "a100-pcie"): 32}


def test_every_unused_row_is_an_exclusion_with_its_reason() -> None:
    rows, exclusions = engine_step_rows((ENGINE_STEPS_CSV,))
    assert len(rows) == 99
    reasons = Counter((exclusion.source, exclusion.reason[:24]) for exclusion in exclusions)
    assert reasons == {
        (f"{GPT_FAST}: decode steps", "mixture-of-experts: this"): 3,
        (f"{TRT_LLM}: first token", "mixture-of-experts: this"): 2,
        (f"{LMDEPLOY}: decode steps", "the batch needs 131072 K"): 1,
        (f"{LMDEPLOY}: decode steps", "the batch needs 139264 K"): 2,
        (f"{LMDEPLOY}: decode steps", "the batch needs 262144 K"): 1,
        (f"{SARATHI}: first token", "the run's first batch (B"): 1,
    }


def test_measured_values_are_read_off_as_the_readme_says(rows_by_id: dict[str, RealRow]) -> None:
    # gpt-fast: 1000 / tokens per second to the microsecond (Llama-2-7B, one GPU, 104.9/s).
    assert rows_by_id["gptfast-llama-2-7b-tp1"].record.measured_s == pytest.approx(0.009533)
    # TensorRT-LLM 0.9: first-token latency of Llama-2-70B at TP 8, 2048 tokens, 249.2 ms.
    assert rows_by_id["trtllm09-llama-2-70b-tp8-2048"].record.measured_s == pytest.approx(0.2492)
    # LMDeploy: median token gap 0.055 s of 64 Llama-2-70B streams, prompt 2048, output 2048.
    decode = rows_by_id["lmdeploy-llama-2-70b-decode-b64-2048-2048"].record
    assert decode.measured_s == pytest.approx(0.055)
    assert decode.batch_size == 64
    assert decode.case.startswith("lmdeploy-llama-2-70b-decode-b64-2048-2048: decode 64x3072,")


def test_first_token_rows_are_one_prefill_and_decode_rows_one_step_at_their_context() -> None:
    steps = {step.row: step for step in read_engine_steps()}
    assert steps["trtllm05-llama-2-70b-tp4-2048"].shapes == [BatchShape([2048], [0], [])]
    assert steps["lmdeploy-llama-2-7b-decode-b16-128-2048"].shapes == [
        BatchShape([], [], [1152] * 16)
    ]
    assert steps["gptfast-llama-3.1-70b-tp8"].shapes == [BatchShape([], [], [106])]


def test_each_row_is_predicted_by_the_profile_a_run_would_pick(
    rows_by_id: dict[str, RealRow],
) -> None:
    profiles = {case: row.record.profile for case, row in rows_by_id.items()}
    assert profiles["lmdeploy-llama-2-70b-decode-b64-2048-2048"] == "a100/llama-2-70b/tp4"
    assert profiles["trtllm09-mistral-7b-tp1-2048"] == "a100/mistral-7b/tp1"
    # No shipped profile for Llama-2-7B: the roofline prior of the same name.
    assert profiles["gptfast-llama-2-7b-tp8"] == "a100/llama-2-7b/tp8"
    assert profiles["sarathi-yi-34b-tp2-decode-b128"] == "a100-pcie/yi-34b/tp2"  # roofline
    assert {row.origin for row in rows_by_id.values()} == {GPT_FAST, TRT_LLM, LMDEPLOY, SARATHI}
    others = [row for row in rows_by_id.values() if row.origin != SARATHI]
    assert not any(row.eager_layers for row in others)
    # Every first token (a prefill, at the real rate whatever the host) fits the factor.
    fitted = {case for case, row in rows_by_id.items() if row.fitted and row.origin != SARATHI}
    assert fitted == {case for case in rows_by_id if case.startswith("trtllm")} | {
        case for case in rows_by_id if case.startswith("lmdeploy") and "-ftl-" in case
    }
    assert len(fitted) == 18


def test_cpp_decode_steps_are_at_the_kernel_prior_and_prefills_and_python_steps_as_a_run_uses_them(
    rows_by_id: dict[str, RealRow],
) -> None:
    lmdeploy = rows_by_id["lmdeploy-llama-2-70b-decode-b64-2048-2048"]
    # A C++ engine's decode step does not move with the real-engine factor.
    assert lmdeploy.engine_s(1.0) == lmdeploy.engine_s(2.0) == lmdeploy.record.predicted_s
    # Its first token is prefill compute: TensorRT-LLM's 2048 tokens of Llama-2-70B at TP 8 are
    # 225.1 ms at the kernel coefficients, 311.8 ms at the shipped A100 factor (1.41) as a run's
    # prefill would be; measured 249.2 ms.
    trt = rows_by_id["trtllm09-llama-2-70b-tp8-2048"]
    assert trt.engine_s(1.0) == pytest.approx(0.22506, abs=5e-6)
    assert trt.record.predicted_s == trt.engine_s(load_engine_terms().factor("a100"))
    assert trt.record.predicted_s == pytest.approx(0.31177, abs=5e-6)
    # A Python engine is predicted at the shipped A100 factor (1.41), as a run is; a batch-1
    # decode step streams the weights, so the factor moves it only by the rounding of T* / factor.
    gpt_fast = rows_by_id["gptfast-llama-2-70b-tp8"]
    a100_factor = load_engine_terms().factor("a100")
    assert gpt_fast.record.predicted_s == pytest.approx(gpt_fast.engine_s(a100_factor))
    assert gpt_fast.engine_s(2.0) == pytest.approx(gpt_fast.engine_s(1.0), rel=0.01)  # T* rounding


def test_the_rows_are_among_the_real_measurements_validate_compares_with() -> None:
    origins = Counter(row.origin for row in real_measurement_rows([]))
    assert origins[GPT_FAST] == 14
    assert origins[TRT_LLM] == 10
    assert origins[LMDEPLOY] == 44
    assert origins[SARATHI] == 31
    assert origins[TGI_SAGEMAKER] == 9
    assert origins[VLLM01] == 8


def test_sarathi_serve_rows_are_figure_2s_batch_execution_times_in_ms() -> None:
    """Yi-34B TP 2 on A100 PCIe: prefill.csv's batch_execution_time 0.0480940844863653 s at 128
    tokens and 4.407501052133739 s at 16384; decode.csv's 0.04680326674133536 s at batch 1 and
    0.18933050256843362 s at batch 128, all to the microsecond, one row per length or batch."""
    steps = {step.row: step for step in read_engine_steps() if step.source == "Sarathi-Serve"}
    assert steps["sarathi-yi-34b-tp2-prefill-128"].measured_s == pytest.approx(0.048094)
    assert steps["sarathi-yi-34b-tp2-prefill-16384"].measured_s == pytest.approx(4.407501)
    assert steps["sarathi-yi-34b-tp2-decode-b1"].measured_s == pytest.approx(0.046803)
    assert steps["sarathi-yi-34b-tp2-decode-b128"].measured_s == pytest.approx(0.189331)
    prefill_tokens = [s.input_tokens for s in steps.values() if s.quantity == "first_token"]
    assert prefill_tokens == [128, 256, 512, 1024, 2048, 4096, 8192, 16384]
    batches = [s.batch_size for s in steps.values() if s.quantity == "decode_step"]
    assert batches == [1, 2, 4, 8, 16, 32, 64, 128]
    # Decode steps of 1020-token prompts generating 4 tokens: the 3 decode steps at 1021-1023.
    assert steps["sarathi-yi-34b-tp2-decode-b128"].shapes == [BatchShape([], [], [1022] * 128)]
    assert steps["sarathi-yi-34b-tp2-prefill-16384"].shapes == [BatchShape([16384], [0], [])]
    assert not any(step.cuda_graphs for step in steps.values())


def test_sarathi_serve_prefills_fit_the_factor_and_its_decode_steps_the_eager_host_time(
    rows_by_id: dict[str, RealRow],
) -> None:
    """A vLLM-derived Python engine without CUDA graphs: its prefills measure the real-engine
    factor (A100 PCIe has no factor of its own: the pooled 1.42) and wait for the host's floor
    (60 layers x 701 us = 42.06 ms over the roofline's 29.77 ms for 128 tokens; measured 48.09),
    its decode steps launch all 60 of Yi-34B's layers from the host (60 x 181.1 us = 10.87 ms on
    the roofline's 27.17 ms at batch 1, with its one sequence's 205.0 us of host work at TP 2).
    No kernel tables for the A100 PCIe: no layer-sum to compare with."""
    terms = load_engine_terms()
    prefill = rows_by_id["sarathi-yi-34b-tp2-prefill-16384"]
    assert (prefill.fitted, prefill.eager_layers, prefill.gpu_key) == (True, 0, "a100-pcie")
    assert prefill.floor_layers == 60
    assert prefill.record.predicted_s == pytest.approx(prefill.engine_s(terms.factor("a100-pcie")))
    short = rows_by_id["sarathi-yi-34b-tp2-prefill-128"]
    assert short.engine_s(1.42) == pytest.approx(0.029773, abs=1e-6)
    assert short.time_s(1.42, 0.000701) == pytest.approx(0.04206)
    assert short.record.predicted_s == pytest.approx(0.04206)
    assert prefill.engine_s(1.0) == pytest.approx(3.07521, abs=5e-6)
    assert prefill.engine_s(1.5) == pytest.approx(4.61089, abs=5e-6)
    decode = rows_by_id["sarathi-yi-34b-tp2-decode-b1"]
    assert (decode.fitted, decode.eager_layers, decode.floor_layers) == (False, 60, 0)
    assert decode.engine_s(1.42) == pytest.approx(0.027173 + 0.0002050, abs=1e-6)
    assert decode.record.predicted_s == pytest.approx(
        0.027173 + 0.0002050 + 60 * 0.0001811, abs=1e-6
    )
    sarathi = [row for row in rows_by_id.values() if row.origin == SARATHI]
    assert sum(row.fitted for row in sarathi) == 7  # not the chunked prefills: validation only
    assert all(row.record.table_predicted_s is None for row in sarathi)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (",decode_step,", ",decode,", "quantity 'decode' is not one of first_token, decode_step"),
        (",python,", ",rust,", "host 'rust' is not one of python, c\\+\\+"),
        (",python,yes,", ",python,maybe,", "cuda_graphs 'maybe' of a python engine is not one of"),
    ],
)
def test_an_unknown_value_names_the_file_line_and_allowed_values(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    # Line 4 of the file is the gpt-fast Llama-2-7B TP 4 row (a Python engine's decode step).
    lines = ENGINE_STEPS_CSV.read_text().splitlines()
    lines[3] = lines[3].replace(old, new, 1)
    bad = tmp_path / "engine_steps.csv"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=rf"engine_steps\.csv:4: {message}"):
        read_engine_steps(bad)


def test_a_chunked_prefill_is_its_chunk_steps_each_attending_to_the_ones_before() -> None:
    """Figure 9: 2047 tokens in chunks of 512 are four steps, 512 new tokens on 0, 512, 1024
    cached and the last 511 on 1536; chunk 16384 covers the prompt in one step; measured as
    published (435.679 and 378.134 ms, each the mean over the run's 5 requests)."""
    steps = {step.row: step for step in read_engine_steps()}
    chunked = steps["sarathi-yi-34b-tp2-chunked-2047-c512"]
    assert chunked.shapes == [
        BatchShape([512], [0], []),
        BatchShape([512], [512], []),
        BatchShape([512], [1024], []),
        BatchShape([511], [1536], []),
    ]
    assert chunked.measured_s == pytest.approx(0.435679)
    whole = steps["sarathi-yi-34b-tp2-chunked-2047-c16384"]
    assert whole.shapes == [BatchShape([2047], [0], [])]
    assert whole.measured_s == pytest.approx(0.378134)
    assert len(steps["sarathi-yi-34b-tp2-chunked-16383-c512"].shapes) == 32


def test_a_chunked_prefill_is_predicted_as_the_sum_of_its_steps(
    rows_by_id: dict[str, RealRow],
) -> None:
    """The row's time at a factor is its four chunk steps' times added, each from the roofline
    prior of Yi-34B TP 2 on A100 PCIe at that factor (a Python engine); as shipped (the pooled
    1.42) 445.7 ms against 435.7 measured (+2.3 %): each chunk (108-114 ms) outlasts the host's
    floor of 42.1 ms. Validation only: not fitted."""
    row = rows_by_id["sarathi-yi-34b-tp2-chunked-2047-c512"]
    step = next(s for s in read_engine_steps() if s.row == "sarathi-yi-34b-tp2-chunked-2047-c512")
    prior = roofline_profile(get_gpu("a100-pcie"), get_model("yi-34b"), 2).coefficients
    for factor in (1.0, 1.5):
        model = StepTimeModel(real_engine_coefficients(prior, factor))
        chunks_s = sum(model.step_time_s(shape) for shape in step.shapes)
        assert row.engine_s(factor) == pytest.approx(chunks_s)
    assert row.steps_s is not None and len(row.steps_s(1.42)) == 4
    assert row.time_s(1.42, 0.000701) == pytest.approx(row.engine_s(1.42))
    assert row.record.predicted_s == pytest.approx(0.44565, abs=5e-5)
    assert row.record.relative_error == pytest.approx(0.0229, abs=5e-4)
    assert (row.fitted, row.eager_layers, row.floor_layers) == (False, 0, 60)


def test_tgi_sagemaker_rows_are_the_one_user_runs_median_time_per_token() -> None:
    """results/sagemaker.csv's 9 unquantized runs with 1 virtual user (batch 1): Llama-2-7B on 1,
    4 and 8 A10G, Llama-2-13B on 4 and 8, Llama-2-70B on 8, and the three on 8 A100-40GB; the
    'Latency (ms/token) med' column to the microsecond (41.348543 ms for Llama-2-70B on p4d),
    each a decode step of one sequence at context 44 + 25, every row with its source."""
    steps = {step.row: step for step in read_engine_steps(TGI_SAGEMAKER_CSV)}
    assert len(steps) == 9
    assert all(step.used and step.source == "TGI-SageMaker" for step in steps.values())
    assert all(step.host == "python" and not step.cuda_graphs for step in steps.values())
    assert Counter((step.gpu_key, step.tp) for step in steps.values()) == {
        ("a10g", 1): 1,
        ("a10g", 4): 2,
        ("a10g", 8): 3,
        ("a100-40gb", 8): 3,
    }
    assert steps["tgi-sm-llama-2-70b-a100-40gb-tp8"].measured_s == pytest.approx(0.041349)
    assert steps["tgi-sm-llama-2-7b-a10g-tp4"].measured_s == pytest.approx(0.016813)
    assert steps["tgi-sm-llama-2-7b-a10g-tp1"].measured_s == pytest.approx(0.030962)
    assert all(step.shapes == [BatchShape([], [], [69])] for step in steps.values())
    with TGI_SAGEMAKER_CSV.open(newline="") as handle:
        vendored = list(csv.DictReader(handle))
    commit = "4373a85992198f116af57c7dd18d2f07f6d03bae"
    assert all(row["source_url"].endswith(f"{commit}/results/sagemaker.csv") for row in vendored)
    assert all("Virtual Users=1" in row["quote_location"] for row in vendored)
    assert all(row["as_published"] and row["notes"] for row in vendored)


def test_tgi_sagemaker_steps_get_the_shipped_eager_host_time_and_stay_out_of_its_fit() -> None:
    """Llama-2-70B on 8 A100-40GB (1,555 GB/s, no kernel tables: the roofline prior) is predicted
    as the roofline step, 19.857 ms, plus its one sequence's 334.6 us of host work at TP 8 and 80
    layers x 181.1 us = 34.679 ms, 16.1 % below the 41.35 ms measured; Llama-2-7B at TP 8 (23.50
    ms, slower than Llama-2-13B's 21.63 ms) 58.9 % below: a host cost per step the per-layer term
    does not carry, so the rows validate only (no eager layers for the fit, the host time inside
    their prediction at every factor)."""
    rows, exclusions = engine_step_rows((TGI_SAGEMAKER_CSV,))
    assert len(rows) == 9 and not exclusions
    by_id = {row.record.case.split(":")[0]: row for row in rows}
    assert all(row.origin == TGI_SAGEMAKER for row in rows)
    assert not any(row.fitted or row.eager_layers for row in rows)
    host_s = 80 * load_engine_terms().eager_host_per_layer_s
    big = by_id["tgi-sm-llama-2-70b-a100-40gb-tp8"]
    assert big.record.profile == "a100-40gb/llama-2-70b/tp8"
    assert big.record.table_predicted_s is None
    assert big.record.predicted_s == pytest.approx(big.engine_s(1.42))
    assert big.engine_s(1.42) - host_s == pytest.approx(0.019857 + 0.0003346, abs=1e-6)
    assert big.record.predicted_s == pytest.approx(0.034679, abs=1e-6)
    assert big.record.relative_error == pytest.approx(-0.1613, abs=5e-4)
    small = by_id["tgi-sm-llama-2-7b-a100-40gb-tp8"]
    assert small.record.relative_error == pytest.approx(-0.5887, abs=5e-4)
    assert small.record.measured_s > by_id["tgi-sm-llama-2-13b-a100-40gb-tp8"].record.measured_s


def test_the_registry_holds_the_gpu_and_model_tgi_sagemaker_ran() -> None:
    """AWS p4d's A100-SXM4-40GB (the datasheet's 40GB column: 1,555 GB/s, 40960 MiB, 312 TFLOP/s
    bf16, no kernel tables) and Llama-2-13B (40 layers, 13,015,864,320 parameters)."""
    gpu = get_gpu("A100-SXM4-40GB")
    assert (gpu.key, gpu.name, gpu.kernel_tables) == ("a100-40gb", "A100-40GB-SXM", None)
    assert gpu.memory_bandwidth_bytes_per_s == 1.555e12
    assert gpu.memory_bytes == 40960 * 2**20
    assert gpu.bf16_dense_flops_per_s == 312e12
    model = get_model("Llama-2-13b-chat-hf")
    assert (model.key, model.num_layers, model.num_params) == ("llama-2-13b", 40, 13015864320)


def test_vllm01_rows_are_benchmark_latency_over_its_tokens() -> None:
    """vllm_notes.md's benchmark_latency runs of Llama-2-70B at TP 2: batches 1-64 of 32-token
    prompts generating 128 tokens (7.503512 s at batch 1, 13.740530 s at 64: 58.621 and 107.348
    ms per step), and batch 2 generating 2017 (139.349854 s: 69.088 ms); each a decode step at
    the mean context of its run, no CUDA graphs."""
    steps = {step.row: step for step in read_engine_steps(VLLM01_CSV)}
    assert [step.batch_size for step in steps.values()] == [1, 2, 4, 8, 16, 32, 64, 2]
    assert all(step.used and step.source == "vLLM-0.1" for step in steps.values())
    assert all(
        (step.gpu_key, step.model_key, step.tp) == ("a100", "llama-2-70b", 2)
        for step in steps.values()
    )
    assert not any(step.cuda_graphs for step in steps.values())
    assert steps["vllm01-llama-2-70b-tp2-b1"].measured_s == pytest.approx(7.503512 / 128, abs=5e-7)
    assert steps["vllm01-llama-2-70b-tp2-b64"].measured_s == pytest.approx(
        13.740530 / 128, abs=5e-7
    )
    assert steps["vllm01-llama-2-70b-tp2-b2-out4000"].measured_s == pytest.approx(
        139.349854 / 2017, abs=5e-7
    )
    assert steps["vllm01-llama-2-70b-tp2-b64"].shapes == [BatchShape([], [], [96] * 64)]
    assert steps["vllm01-llama-2-70b-tp2-b2-out4000"].shapes == [BatchShape([], [], [1040] * 2)]
    with VLLM01_CSV.open(newline="") as handle:
        vendored = list(csv.DictReader(handle))
    commit = "43685b903da38e102e3fbc829331f5e37c268fd4"
    assert all(row["source_url"].endswith(f"{commit}/vllm_notes.md") for row in vendored)
    assert all("latency" in row["as_published"] for row in vendored)


def test_vllm01_decode_steps_fit_the_eager_host_time_and_grow_with_the_batch() -> None:
    """The shipped Llama-2-70B TP 2 profile plus 80 layers x 181.1 us and 205.0 us per decoding
    sequence predicts 66.52 ms at batch 1 (13.5 % above the 58.62 ms measured) and 80.97 ms at
    batch 64 (24.6 % below 107.35 ms): the step grows by 0.77 ms per added sequence where the
    kernels and the host term derived from Vidur's profiles add 0.23 ms, a 2023 vLLM's host work
    per sequence beyond that engine's; these rows fit the per-layer host time."""
    rows, exclusions = engine_step_rows((VLLM01_CSV,))
    assert len(rows) == 8 and not exclusions
    by_id = {row.record.case.split(":")[0]: row for row in rows}
    one, many = by_id["vllm01-llama-2-70b-tp2-b1"], by_id["vllm01-llama-2-70b-tp2-b64"]
    assert all(row.eager_layers == 80 and not row.fitted for row in rows)
    assert one.record.profile == "a100/llama-2-70b/tp2"
    host_s = 80 * load_engine_terms().eager_host_per_layer_s
    assert one.record.predicted_s == pytest.approx(one.engine_s(1.41) + host_s)
    assert one.record.relative_error == pytest.approx(0.1347, abs=5e-4)
    assert many.record.relative_error == pytest.approx(-0.2457, abs=5e-4)
    growth_ms = (many.record.measured_s - one.record.measured_s) / 63 * 1e3
    assert growth_ms == pytest.approx(0.7735, abs=5e-4)
