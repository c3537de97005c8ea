"""`prefixsim calibrate` on hostile measurement files: data that cannot identify the coefficients,
rows of the wrong shape, binary or oversized input. Each is one located line and exit 2, and no
profile or plot is written.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from reliability_cli import assert_input_error, prefixsim, written_entries

from sim.costmodel.calibrate import prior_profile
from sim.costmodel.profiles import load_profile

HEADER = "ttft_ms,input_tokens,cached_tokens\n"
NOT_IDENTIFIED = "add rows of other shapes (prefill lengths, cached prefixes, decode batches)"
# (id, file bytes, line named (None: the whole file), fragments)
BAD_CSVS = (
    (
        "one_row",
        HEADER + "27.6,1024,0\n",
        None,
        (
            "1 measurement row (rank 1) cannot identify the 5 coefficients: per_token_s, "
            "per_attention_pair_s, per_kv_token_s, per_decode_seq_s stay unknown",
            NOT_IDENTIFIED,
            "or give --gpu and --model",
        ),
    ),
    (
        "prefill_only",
        HEADER + "12.1,256,0\n27.6,1024,0\n105.3,4096,0\n236.0,8192,0\n",
        None,
        (
            "4 measurement rows (rank 3) cannot identify the 5 coefficients: per_kv_token_s, "
            "per_decode_seq_s stay unknown",
        ),
    ),
    (
        "one_shape_six_times",
        HEADER + "27.6,1024,0\n" * 6,
        None,
        ("6 measurement rows (rank 1) cannot identify the 5 coefficients",),
    ),
    ("extra_cell", HEADER + "27.6,1024,0\n28.1,1024,0,7\n", 3, ("4 cells; the header has 3",)),
    ("missing_cell", HEADER + "27.6,1024\n", 2, ("2 cells; the header has 3 columns",)),
    ("unclosed_quote", HEADER + '27.6,"1024,0\n', 2, ("2 cells; the header has 3 columns",)),
    ("binary", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", 1, ("not UTF-8 text; expected CSV",)),
    ("latin1", HEADER.encode() + "27,6\xe9,1024,0\n".encode("latin-1"), 2, ("not UTF-8",)),
    ("nul_bytes", HEADER + "27.6,10\x0024,0\n", 2, ("binary data (NUL bytes); expected CSV",)),
    (
        "field_200000_chars",
        HEADER + "27.6," + "1" * 200_000 + ",0\n",
        2,
        ("a field is longer than 131,072 characters",),
    ),
    (
        "repeated_column",
        "ttft_ms,input_tokens,ttft_ms\n27.6,1024,0\n",
        1,
        ("the header repeats column 'ttft_ms'",),
    ),
    ("no_time_column", "input_tokens,cached_tokens\n1024,0\n", 1, ("no time column",)),
    ("empty", "", None, ("empty file: expected a header row and measurements",)),
    ("header_only", HEADER, None, ("no measurement rows after the header",)),
    ("zero_time", HEADER + "0,1024,0\n", 2, ("column 'ttft_ms': 0 must be > 0 ms",)),
    ("nan_time", HEADER + "nan,1024,0\n", 2, ("column 'ttft_ms': 'nan' is not a number",)),
    (
        "huge_integer",
        HEADER + "27.6," + "9" * 5000 + ",0\n",
        2,
        ("'input_tokens': '99999999999999999999'... (5,000 characters) is not",),
    ),
)


@pytest.mark.parametrize(
    ("content", "line", "fragments"),
    [case[1:] for case in BAD_CSVS],
    ids=[case[0] for case in BAD_CSVS],
)
def test_bad_measurements(content, line, fragments, tmp_path, capsys):
    """One `error: FILE[:LINE]: ...` line, exit 2, no profile and no plot."""
    measurements = tmp_path / "measured.csv"
    if isinstance(content, str):
        content = content.encode()
    measurements.write_bytes(content)
    outcome = prefixsim(capsys, "calibrate", measurements, "--out", tmp_path / "out" / "p.yaml")
    assert_input_error(outcome, measurements, line, fragments)
    assert written_entries(tmp_path) == ["measured.csv"]


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("missing.csv", "measurement file not found"),
        ("a_directory", "is a directory; expected a measurement CSV file"),
        ("sparse_65_mib.csv", "68,157,440 bytes is more than the 64 MiB a measurement file"),
    ],
    ids=["missing", "directory", "over_64_mib"],
)
def test_bad_measurement_path(name, fragment, tmp_path, capsys):
    """A path that is not a measurement file of a sane size: one line naming it, exit 2."""
    (tmp_path / "a_directory").mkdir()
    with (tmp_path / "sparse_65_mib.csv").open("wb") as handle:
        handle.truncate(65 * 2**20)
    path = tmp_path / name
    outcome = prefixsim(capsys, "calibrate", path, "--out", tmp_path / "p.yaml")
    assert_input_error(outcome, path, None, (fragment,))
    assert not (tmp_path / "p.yaml").exists()


def test_one_row_with_a_prior_takes_the_rest_from_it(tmp_path, capsys):
    """With --gpu and --model the one row fits the step overhead alone; the four other
    coefficients are the shipped H100 Llama-3.1-8B profile's."""
    measurements = tmp_path / "one.csv"
    measurements.write_text(HEADER + "27.6,1024,0\n")
    out = tmp_path / "p.yaml"
    outcome = prefixsim(
        capsys, "calibrate", measurements, "--out", out, "--gpu", "h100", "--model", "llama-3.1-8b"
    )
    assert outcome.status == 0, outcome.err
    prior = prior_profile("h100", "llama-3.1-8b", 1)
    assert prior is not None
    fitted = load_profile(out).coefficients
    for name in ("per_token_s", "per_attention_pair_s", "per_kv_token_s", "per_decode_seq_s"):
        assert getattr(fitted, name) == getattr(prior.coefficients, name)
    assert Path(out.with_suffix(".png")).stat().st_size > 10_000
