"""load_cost_model: shipped names (aliases too), YAML paths, roofline, constant and linear."""

from dataclasses import asdict
from pathlib import Path

import pytest

from sim.costmodel import (
    BatchShape,
    StepCoefficients,
    get_gpu,
    get_model,
    load_cost_model,
    real_engine_coefficients,
)
from sim.costmodel.derive import SHIPPED_COMBINATIONS, derive_profile
from sim.costmodel.profiles import (
    Profile,
    load_profile,
    save_profile,
    shipped_profile_names,
    shipped_profile_path,
)
from sim.costmodel.roofline import roofline_coefficients
from sim.errors import InputError

ONE_K_PREFILL = BatchShape([1024], [0], [])


def test_constant_and_linear_specs() -> None:
    assert load_cost_model("constant:0.02").step_time_s(ONE_K_PREFILL) == 0.02
    # 2 ms + 1024 prefill tokens + 3 decodes at 10 us per token.
    linear = load_cost_model("linear:0.002,1e-5")
    assert linear.step_time_s(BatchShape([1024], [0], [5, 6, 7])) == pytest.approx(0.01227)


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("constant:0", "must be > 0"),
        ("constant:abc", r"expected constant:<seconds>"),
        ("linear:0.1", r"expected linear:<seconds>,<seconds>"),
        ("linear:-1,2", "numbers >= 0"),
        ("roofline", "needs a gpu and a model"),
        ("fastest", "unknown cost model 'fastest'"),
        ("h100/llama-3.1-8b/tp3", "no shipped profile 'h100/llama-3.1-8b/tp3'; shipped: "),
        ("tpu/llama-3.1-8b/tp1", "unknown GPU 'tpu'"),
        ("missing-profile.yaml", "missing-profile.yaml: profile file not found"),
    ],
)
def test_bad_specs_raise_input_error(spec: str, match: str) -> None:
    with pytest.raises(InputError, match=match):
        load_cost_model(spec)


def test_profile_names_accept_gpu_and_model_aliases() -> None:
    canonical = load_cost_model("h100/llama-3.1-8b/tp1")
    alias = load_cost_model("H100-80GB/Meta-Llama-3.1-8B/TP1")
    assert alias.step_time_s(ONE_K_PREFILL) == canonical.step_time_s(ONE_K_PREFILL)


def test_a_profile_for_other_hardware_is_refused() -> None:
    with pytest.raises(InputError, match="gpu 'a100' vs profile gpu 'h100'"):
        load_cost_model("h100/llama-3.1-8b/tp1", gpu="a100", model="llama-3.1-8b")
    with pytest.raises(InputError, match="tp 2 vs profile tp 1"):
        load_cost_model("h100/llama-3.1-8b/tp1", gpu="h100", model="llama-3.1-8b", tp=2)
    load_cost_model("h100/llama-3.1-8b/tp1", gpu="H100-80GB", model="llama-3.1-8b", tp=1)


def test_roofline_matches_cost_model_section_5_4() -> None:
    # Llama-3.1-8B on one H100: b1 = 2 * 6.98e9 / (0.80 * 989e12) = 17.64 us per token.
    c = roofline_coefficients(get_gpu("h100"), get_model("llama-3.1-8b"), 1)
    assert c.per_token_s == pytest.approx(2 * 6_979_321_856 / (0.80 * 989e12))
    assert c.per_token_s == pytest.approx(17.64e-6, rel=1e-3)
    # b2 = 4 * 32 layers * 32 heads * 128 / (0.55 * 989e12); b3 = 131072 B / (0.8 * 3.35e12).
    assert c.per_attention_pair_s == pytest.approx(4 * 32 * 32 * 128 / (0.55 * 989e12))
    assert c.per_kv_token_s == pytest.approx(131_072 / (0.80 * 3.35e12))
    # b0 = 0.126 ms + 32 * 0.032 ms; T* = weight read time / b1.
    assert c.step_overhead_s == pytest.approx(1.15e-3)
    weight_read_s = 2 * (6_979_321_856 + 128_256 * 4096) / (0.80 * 3.35e12)
    assert c.t_star_tokens == round(weight_read_s / c.per_token_s) == 317
    # A run uses it with H100's real-engine factor (engine_terms.yaml).
    loaded = load_cost_model("roofline", gpu="h100", model="llama-3.1-8b")
    assert loaded.coefficients == real_engine_coefficients(c, 1.505)


def test_saved_profile_loads_back_identically(tmp_path: Path) -> None:
    profile = load_profile(shipped_profile_path("b200/qwen3-32b/tp2"))
    path = tmp_path / "copy.yaml"
    save_profile(profile, path)
    assert load_profile(path) == profile
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.yaml"]  # no temp files left


def test_every_shipped_profile_is_what_derive_produces() -> None:
    # The fit is a least-squares solve whose last bits depend on the BLAS kernel numpy picks on
    # this processor, so floats agree to 1e-9 relative; every other field is exact.
    names = shipped_profile_names()
    assert names == sorted(f"{gpu}/{model}/tp{tp}" for gpu, model, tp in SHIPPED_COMBINATIONS)
    for gpu, model, tp in SHIPPED_COMBINATIONS:
        shipped = load_profile(shipped_profile_path(f"{gpu}/{model}/tp{tp}"))
        assert_close(asdict(shipped), asdict(derive_profile(gpu, model, tp)))
        assert shipped.source == "kernel-derived"


def assert_close(shipped: object, derived: object) -> None:
    """Equal field by field, floats to 1e-9 relative."""
    if isinstance(shipped, dict) and isinstance(derived, dict):
        assert shipped.keys() == derived.keys()
        for key in shipped:
            assert_close(shipped[key], derived[key])
    elif isinstance(shipped, list | tuple) and isinstance(derived, list | tuple):
        assert len(shipped) == len(derived)
        for left, right in zip(shipped, derived, strict=True):
            assert_close(left, right)
    elif isinstance(shipped, float):
        assert shipped == pytest.approx(derived, rel=1e-9)
    else:
        assert shipped == derived


BAD_FIELDS = [
    ("tp: 1", "tp: zero", "field tp = 'zero': expected a positive integer"),
    ("  per_token_s: ", "  per_token_s: -", "field coefficients.per_token_s"),
    ("  num_decodes: [0, 1024]", "  num_decodes: [5, 1]", "field covered.num_decodes"),
    ("source: kernel-derived\n", "", "missing field source"),
    ("tp: 1", "tp: [1", "not valid YAML"),
]


@pytest.mark.parametrize(("old", "new", "match"), BAD_FIELDS)
def test_bad_profile_files_name_the_file_and_field(
    tmp_path: Path, old: str, new: str, match: str
) -> None:
    text = shipped_profile_path("h100/llama-3.1-8b/tp1").read_text()
    assert old in text
    path = tmp_path / "bad.yaml"
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(InputError, match=match) as error:
        load_cost_model(str(path))
    assert str(path) in str(error.value)


def test_user_profile_without_known_hardware_runs_on_any_gpu(tmp_path: Path) -> None:
    profile = Profile(
        name="my-box/my-model/tp1",
        gpu="my-box",
        model="my-model",
        tp=1,
        dtype="bf16",
        engine="as measured",
        source="calibrated",
        provenance="test",
        coefficients=StepCoefficients(0.004, 2e-5, 0, 0.0, 0.0, 0.0),
    )
    path = tmp_path / "mine.yaml"
    save_profile(profile, path)
    model = load_cost_model(str(path), gpu="h100", model="llama-3.1-8b")
    assert model.step_time_s(ONE_K_PREFILL) == pytest.approx(0.004 + 1024 * 2e-5)
