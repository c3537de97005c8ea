"""Kernel-derived profiles: the §5.1 form fitted to the kernel layer-sum at the training shapes."""

from __future__ import annotations

import csv
import functools
from pathlib import Path

from sim.costmodel.fit import Measurement, StepFeatures, fit_step_form
from sim.costmodel.kernel_reference import KernelReference
from sim.costmodel.kernel_tables import KernelTables, load_kernel_tables
from sim.costmodel.profiles import (
    SHIPPED_PROFILE_DIR,
    FitQuality,
    Profile,
    save_profile,
    spec_profile,
)
from sim.costmodel.shapes import training_shapes
from sim.costmodel.specs import GpuSpec, ModelSpec, get_gpu, get_model, known_gpus
from sim.errors import InputError
from sim.fileio import check_output_file

KERNEL_DATA_DIR = Path(__file__).parent / "data" / "aiconfigurator"
# cost_model.md §5.3's 37 (gpu, model, tp) profiles plus the Splitwise validation setups.
SHIPPED_COMBINATIONS = (
    *[
        (gpu, model, 1)
        for gpu in ("a100", "h100", "h200", "b200", "l40s")
        for model in ("llama-3.1-8b", "mistral-7b", "qwen3-0.6b", "qwen3-8b")
    ],
    *[(gpu, "qwen3-32b", 1) for gpu in ("a100", "h200", "b200")],
    *[(gpu, "qwen3-32b", 2) for gpu in ("a100", "h100", "h200", "b200")],
    *[(gpu, "llama-3.1-70b", 2) for gpu in ("h200", "b200")],
    *[(gpu, "llama-3.1-70b", tp) for gpu in ("a100", "h100", "h200", "b200") for tp in (4, 8)],
    *[(gpu, "llama-2-70b", tp) for gpu in ("a100", "h100") for tp in (2, 4, 8)],
    *[(gpu, "bloom-176b", 8) for gpu in ("a100", "h100")],
)
# T* is searched over these multiples of the GPU's ridge point (cost_model.md §5.2 step 4).
RIDGE_FRACTIONS = tuple(0.25 + 0.125 * step for step in range(15))
# Without a GPU the search runs over plain token counts.
GENERIC_T_STAR_CANDIDATES = (0, 16, 32, 48, 64, 96, 128, 160, 192, 256, 320, 384, 512, 768)


def t_star_candidates(gpu: GpuSpec | None) -> list[int]:
    if gpu is None:
        return list(GENERIC_T_STAR_CANDIDATES)
    ridge = gpu.ridge_point_flops_per_byte
    return sorted({round(fraction * ridge) for fraction in RIDGE_FRACTIONS})


def kernel_dir(gpu: GpuSpec) -> str:
    """The folder of `gpu`'s kernel tables (the `kernel_tables` column of data/gpus.csv)."""
    if gpu.kernel_tables is None:
        raise InputError(
            f"no kernel tables for {gpu.name}; kernel-derived profiles exist only for "
            f"{', '.join(gpus_with_kernel_tables())}"
        )
    return gpu.kernel_tables


def gpus_with_kernel_tables() -> list[str]:
    return [key for key in known_gpus() if get_gpu(key).kernel_tables is not None]


@functools.cache
def kernel_tables(gpu_key: str, data_dir: Path = KERNEL_DATA_DIR) -> KernelTables:
    """The (cached) kernel tables of a GPU with kernel data."""
    return load_kernel_tables(data_dir / kernel_dir(get_gpu(gpu_key)))


def kernel_reference(
    gpu: GpuSpec, model: ModelSpec, tp: int, data_dir: Path = KERNEL_DATA_DIR
) -> KernelReference:
    """The kernel layer-sum of (gpu, model, tp); it models dense full-attention bf16 layers."""
    if model.is_moe or model.num_sliding_layers or model.dtype != "bf16":
        raise InputError(
            f"the kernel layer-sum covers dense, full-attention bf16 models; {model.name} "
            f"({model.dtype}, {model.num_experts} experts, {model.num_sliding_layers} sliding "
            "layers) has only the roofline prior"
        )
    return KernelReference(kernel_tables(gpu.key, data_dir), gpu, model, tp)


def kernel_engine_versions(data_dir: Path = KERNEL_DATA_DIR) -> dict[str, str]:
    """vLLM version of each GPU's kernel tables, from the extract's manifest."""
    with (data_dir / "manifest.csv").open(newline="") as handle:
        return {row["gpu"]: row["vllm_version"] for row in csv.DictReader(handle)}


def derive_profile(
    gpu_key: str, model_key: str, tp: int, data_dir: Path = KERNEL_DATA_DIR
) -> Profile:
    """Fit the form to the kernel reference of (gpu, model, tp) over `training_shapes()`."""
    gpu, model = get_gpu(gpu_key), get_model(model_key)
    reference = kernel_reference(gpu, model, tp, data_dir)
    measurements = [
        Measurement((StepFeatures.of(shape),), reference.step_time_s(shape), f"shape {index}")
        for index, shape in enumerate(training_shapes())
    ]
    fit = fit_step_form(measurements, t_star_candidates(gpu))
    tables_dir = kernel_dir(gpu)
    version = kernel_engine_versions(data_dir)[tables_dir]
    return spec_profile(
        gpu,
        model,
        tp,
        engine=f"vLLM {version} kernels",
        source="kernel-derived",
        provenance=(
            f"least-squares fit (relative error, non-negative) of the form to the kernel "
            f"layer-sum (sim.costmodel.kernel_reference) at {len(measurements)} training shapes "
            f"(sim.costmodel.shapes.training_shapes); kernel latencies: AIConfigurator vLLM "
            f"{version} bf16 tables, sim/costmodel/data/aiconfigurator/{tables_dir} "
            "(Apache-2.0, NVIDIA); regenerate with `prefixsim costmodel derive`"
        ),
        coefficients=fit.coefficients,
        fit=FitQuality(len(measurements), fit.rms_rel_err, fit.max_rel_err),
        covered=fit.covered,
    )


def write_derived_profiles(
    out_dir: Path = SHIPPED_PROFILE_DIR, data_dir: Path = KERNEL_DATA_DIR
) -> list[Path]:
    """Derive every shipped combination and save it as `<out_dir>/<gpu>/<model>/tp<N>.yaml`.
    Every place is checked before the first profile is written, so a file in the way leaves
    the folder as it was, not half refitted."""
    derived = [
        (
            out_dir / gpu_key / model_key / f"tp{tp}.yaml",
            derive_profile(gpu_key, model_key, tp, data_dir),
        )
        for gpu_key, model_key, tp in SHIPPED_COMBINATIONS
    ]
    for path, _ in derived:
        check_output_file(path)
    for path, profile in derived:
        save_profile(profile, path)
    return [path for path, _ in derived]
