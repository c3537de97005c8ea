"""The host time per decoding sequence of an engine without CUDA graphs, derived from host
profiles (sim/costmodel/sequence_host.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.costmodel.sequence_host import (
    HOST_PARTS_MS,
    VIDUR_CPU_OVERHEADS_CSV,
    SequenceHostTerm,
    fit_sequence_host_term,
    setup_growths,
)

HEADER = "model_name,batch_size,tensor_parallel_degree," + ",".join(HOST_PARTS_MS)


def _profile(path: Path, rows: list[tuple[str, int, int, float]]) -> Path:
    """A host profile whose parts are all 0 but the first, `host_ms` (model, batch, tp, host_ms)."""
    zeros = ",0" * (len(HOST_PARTS_MS) - 1)
    lines = [f"{model},{batch},{tp},{host_ms}{zeros}" for model, batch, tp, host_ms in rows]
    path.write_text("\n".join([HEADER, *lines]) + "\n")
    return path


def test_each_setup_grows_by_the_least_squares_slope_of_its_summed_parts(tmp_path):
    """m at TP 1: 1.0, 2.0 and 3.1 ms at batch 8, 16 and 24 (slope 0.13125 ms per sequence); m at
    TP 2: 2.0 and 3.6 ms at batch 8 and 16 (0.2 ms). Setups come in (model, TP) order."""
    path = _profile(
        tmp_path / "host.csv",
        [
            ("m", 16, 2, 3.6),
            ("m", 8, 1, 1.0),
            ("m", 16, 1, 2.0),
            ("m", 24, 1, 3.1),
            ("m", 8, 2, 2.0),
        ],
    )
    growths = setup_growths(path)
    assert [(growth.model, growth.tp, growth.batch_sizes) for growth in growths] == [
        ("m", 1, (8, 16, 24)),
        ("m", 2, (8, 16)),
    ]
    assert growths[0].per_sequence_s == pytest.approx(0.00013125)
    assert growths[1].per_sequence_s == pytest.approx(0.0002)


def test_the_term_is_linear_in_log2_tp(tmp_path):
    """Growths 125, 200 and 275 us per sequence at TP 1, 2 and 4 are exactly 125 + 75 x log2(TP):
    350 us at TP 8."""
    path = _profile(
        tmp_path / "host.csv",
        [
            ("m", 8, 1, 1.0),
            ("m", 16, 1, 2.0),
            ("m", 8, 2, 2.0),
            ("m", 16, 2, 3.6),
            ("m", 8, 4, 3.0),
            ("m", 16, 4, 5.2),
        ],
    )
    term = fit_sequence_host_term(setup_growths(path))
    assert term.per_sequence_s == pytest.approx(0.000125)
    assert term.per_tp_doubling_s == pytest.approx(0.000075)
    assert term.at_tp(8) == pytest.approx(0.00035)
    assert SequenceHostTerm(0.0001, 0.0).at_tp(4) == 0.0001


def test_vidurs_profiles_give_the_shipped_growths():
    """The vendored profiles: 8 setups, Llama-2-7B growing 105, 181 and 220 us per sequence at TP
    1, 2 and 4 (the host parts' medians summed)."""
    growths = {
        (growth.model, growth.tp): growth for growth in setup_growths(VIDUR_CPU_OVERHEADS_CSV)
    }
    assert len(growths) == 8
    llama_7b = [growths[("meta-llama/Llama-2-7b-hf", tp)].per_sequence_s for tp in (1, 2, 4)]
    assert llama_7b == pytest.approx([105.2e-6, 181.4e-6, 220.0e-6], abs=0.05e-6)
