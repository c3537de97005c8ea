"""Published step times of other engines (data/engine_steps/) as `costmodel validate` rows."""

from collections import Counter
from pathlib import Path

import pytest

from sim.costmodel.batch import BatchShape
from sim.costmodel.engine_terms import load_engine_terms
from sim.costmodel.real_sources import (
    ENGINE_STEPS_CSV,
    engine_step_rows,
    read_engine_steps,
)
from sim.costmodel.validation import RealRow, real_measurement_rows
from sim.errors import InputError

GPT_FAST = "gpt-fast (A100, CUDA graphs)"
TRT_LLM = "TensorRT-LLM (A100, kernel prior)"
LMDEPLOY = "LMDeploy TurboMind (A100, kernel prior)"


@pytest.fixture(scope="module")
def rows_by_id() -> dict[str, RealRow]:
    rows, _ = engine_step_rows()
    return {row.record.case.split(":")[0]: row for row in rows}


def test_the_file_holds_77_rows_of_which_68_are_used_per_source_and_quantity() -> None:
    steps = read_engine_steps()
    assert len(steps) == 77
    used = Counter((step.source, step.quantity) for step in steps if step.used)
    assert used == {
        ("gpt-fast", "decode_step"): 14,
        ("TensorRT-LLM", "first_token"): 10,
        ("LMDeploy", "first_token"): 8,
        ("LMDeploy", "decode_step"): 36,
    }
    assert all(step.gpu_key == "a100" for step in steps)


def test_every_unused_row_is_an_exclusion_with_its_reason() -> None:
    rows, exclusions = engine_step_rows()
    assert len(rows) == 68
    reasons = Counter((exclusion.source, exclusion.reason[:24]) for exclusion in exclusions)
    assert reasons == {
        (f"{GPT_FAST}: decode steps", "mixture-of-experts: this"): 3,
        (f"{TRT_LLM}: first token", "mixture-of-experts: this"): 2,
        (f"{LMDEPLOY}: decode steps", "the batch needs 131072 K"): 1,
        (f"{LMDEPLOY}: decode steps", "the batch needs 139264 K"): 2,
        (f"{LMDEPLOY}: decode steps", "the batch needs 262144 K"): 1,
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
    assert steps["trtllm05-llama-2-70b-tp4-2048"].shape == BatchShape([2048], [0], [])
    assert steps["lmdeploy-llama-2-7b-decode-b16-128-2048"].shape == BatchShape([], [], [1152] * 16)
    assert steps["gptfast-llama-3.1-70b-tp8"].shape == BatchShape([], [], [106])


def test_each_row_is_predicted_by_the_profile_a_run_would_pick(
    rows_by_id: dict[str, RealRow],
) -> None:
    profiles = {case: row.record.profile for case, row in rows_by_id.items()}
    assert profiles["lmdeploy-llama-2-70b-decode-b64-2048-2048"] == "a100/llama-2-70b/tp4"
    assert profiles["trtllm09-mistral-7b-tp1-2048"] == "a100/mistral-7b/tp1"
    # No shipped profile for Llama-2-7B: the roofline prior of the same name.
    assert profiles["gptfast-llama-2-7b-tp8"] == "a100/llama-2-7b/tp8"
    assert all(row.origin in (GPT_FAST, TRT_LLM, LMDEPLOY) for row in rows_by_id.values())
    assert not any(row.eager_layers for row in rows_by_id.values())
    # Every first token (a prefill, at the real rate whatever the host) fits the factor.
    fitted = {case for case, row in rows_by_id.items() if row.fitted}
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
    # 225.1 ms at the kernel coefficients, 313.9 ms at the shipped A100 factor (1.42) as a run's
    # prefill would be; measured 249.2 ms.
    trt = rows_by_id["trtllm09-llama-2-70b-tp8-2048"]
    assert trt.engine_s(1.0) == pytest.approx(0.22506, abs=5e-6)
    assert trt.record.predicted_s == trt.engine_s(load_engine_terms().factor("a100"))
    assert trt.record.predicted_s == pytest.approx(0.31389, abs=5e-6)
    # A Python engine is predicted at the shipped A100 factor (1.42), as a run is; a batch-1
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


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (",decode_step,", ",decode,", "quantity 'decode' is not one of first_token, decode_step"),
        (",python,", ",rust,", "host 'rust' is not one of python, c\\+\\+"),
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
