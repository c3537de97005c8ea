"""Calibration CSVs: the three row kinds, and bad input named by file, line and column."""

from pathlib import Path

import pytest

from sim.costmodel.fit import StepFeatures
from sim.costmodel.measurements import read_measurements
from sim.errors import InputError

HEADER = (
    "ttft_ms,input_tokens,cached_tokens,max_num_batched_tokens,itl_ms,batch,mean_context,"
    "step_ms,num_prefill_tokens_per_seq,cached_tokens_per_seq,decode_context_lens,T,S,K,B_dec\n"
)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "measurements.csv"
    path.write_text(text)
    return path


def test_each_row_kind_becomes_its_steps(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        HEADER
        + "300.5,16384,0,8192,,,,,,,,,,,\n"  # two chunks of 8192
        + ",,,,12.5,16,1000.5,,,,,,,,\n"  # 16 decodes at mean context 1000.5
        + ",,,,,,,20.0,512;64,4096;0,2048;100,,,,\n"
        + ",,,,,,,38.9,,,,1088,2621952.5,133120,64\n",
    )
    request, decode, step_lists, step_totals = read_measurements(path)
    assert request.time_s == pytest.approx(0.3005)
    assert request.kind == "request"
    assert request.label == f"{path}:2"
    assert request.steps == (
        StepFeatures(8192, 8192 * 8193, 0, 0, 8192),
        StepFeatures(8192, 8192 * (2 * 8192 + 8193), 8192, 0, 16384),
    )
    assert decode.steps == (StepFeatures(16, 0, 16008, 16, 1002),)
    # T = 512 + 64 + 2 decodes; 2S = 512 * (2*4096 + 513) + 64 * 65; K = 4096 + 2148.
    assert step_lists.steps == (StepFeatures(578, 512 * 8705 + 64 * 65, 6244, 2, 4608),)
    assert step_totals.steps == (StepFeatures(1088, 5_243_905, 133_120, 64, None),)


@pytest.mark.parametrize(
    ("text", "line", "match"),
    [
        ("", None, "empty file"),
        ("ttft_ms,input_tokens\n", None, "no measurement rows"),
        ("input_tokens,cached_tokens\n1024,0\n", 1, "no time column"),
        ("ttft_ms,input_tokens\n20,1024\n", 2, "column 'cached_tokens' is missing or empty"),
        (
            "ttft_ms,input_tokens,cached_tokens\n20,lots,0\n",
            2,
            "column 'input_tokens': 'lots' is not a whole number",
        ),
        ("ttft_ms,input_tokens,cached_tokens\nfast,1024,0\n", 2, "'fast' is not a number"),
        ("ttft_ms,input_tokens,cached_tokens\n20,1024,-5\n", 2, "'-5' is negative"),
        ("ttft_ms,input_tokens,cached_tokens\n-20,1024,0\n", 2, "-20 must be > 0 ms"),
        (
            "ttft_ms,input_tokens,cached_tokens\n20,1024,1024\n",
            2,
            "cached_tokens=1024 must be < input_tokens=1024",
        ),
        (
            "ttft_ms,itl_ms,batch,mean_context\n20,5,1,100\n",
            2,
            "expected exactly one of step_ms, ttft_ms, itl_ms",
        ),
        (
            "step_ms,num_prefill_tokens_per_seq,cached_tokens_per_seq\n20,512;64,0\n",
            2,
            "has 2 entries but cached_tokens_per_seq has 1",
        ),
        ("step_ms,T\n20,100\n", 2, "a step_ms row needs the lists"),
        ("itl_ms,batch,mean_context\n5,0,100\n", 2, "column 'batch': must be >= 1"),
        ("itl_ms,batch,mean_context\n5,2,100\n6,2,nan\n", 3, "'nan' is not a number"),
    ],
)
def test_bad_rows_raise_input_error_with_file_and_line(
    tmp_path: Path, text: str, line: int | None, match: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(InputError, match=match) as error:
        read_measurements(path)
    assert error.value.source == str(path)
    assert error.value.line == line


def test_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="measurement file not found"):
        read_measurements(tmp_path / "nope.csv")
