"""Measured vLLM kernel latencies (AIConfigurator CSV layout) and log-log interpolation over them.

Tables are per GPU and per layer; every lookup returns seconds. Between grid points latencies are
interpolated linearly in log(latency) vs log(size); beyond the largest measured size they scale as
size**power (work grows linearly in tokens, batch and bytes, quadratically in causal prompt length);
below the smallest they are clamped (launch-bound).
"""

from __future__ import annotations

import bisect
import csv
import math
from dataclasses import dataclass
from pathlib import Path

from sim.errors import InputError

MS = 1e-3


@dataclass(frozen=True, slots=True)
class Curve:
    """Latency (s) against one size axis, sorted by size."""

    sizes: tuple[float, ...]
    log_sizes: tuple[float, ...]
    log_latencies: tuple[float, ...]
    power: float  # growth exponent used beyond the largest measured size

    @classmethod
    def from_points(cls, points: dict[float, float], power: float) -> Curve:
        sizes = tuple(sorted(points))
        return cls(
            sizes=sizes,
            log_sizes=tuple(math.log(size) for size in sizes),
            log_latencies=tuple(math.log(points[size]) for size in sizes),
            power=power,
        )

    def __call__(self, size: float) -> float:
        if size <= self.sizes[0]:
            return math.exp(self.log_latencies[0])
        if size >= self.sizes[-1]:
            return math.exp(self.log_latencies[-1]) * (size / self.sizes[-1]) ** self.power
        upper = bisect.bisect_right(self.sizes, size)
        return math.exp(_lerp(self.log_sizes, self.log_latencies, upper, math.log(size)))


@dataclass(frozen=True, slots=True)
class CurveFamily:
    """Latency against an inner axis, measured for several values of an outer axis (e.g. batch)."""

    outer_sizes: tuple[float, ...]
    curves: tuple[Curve, ...]
    outer_power: float

    @classmethod
    def from_rows(
        cls, rows: dict[float, dict[float, float]], inner_power: float, outer_power: float
    ) -> CurveFamily:
        outer_sizes = tuple(sorted(rows))
        curves = tuple(Curve.from_points(rows[outer], inner_power) for outer in outer_sizes)
        return cls(outer_sizes=outer_sizes, curves=curves, outer_power=outer_power)

    def __call__(self, outer: float, inner: float) -> float:
        if outer <= self.outer_sizes[0]:
            return self.curves[0](inner)
        if outer >= self.outer_sizes[-1]:
            scale = (outer / self.outer_sizes[-1]) ** self.outer_power
            return self.curves[-1](inner) * scale
        upper = bisect.bisect_right(self.outer_sizes, outer)
        low_size, high_size = self.outer_sizes[upper - 1], self.outer_sizes[upper]
        weight = math.log(outer / low_size) / math.log(high_size / low_size)
        low_log = math.log(self.curves[upper - 1](inner))
        high_log = math.log(self.curves[upper](inner))
        return math.exp(low_log + weight * (high_log - low_log))


@dataclass(frozen=True, slots=True)
class GemmTable:
    """bf16 GEMM [m,k] x [k,n]: one curve over m per measured (n, k)."""

    n_sizes: tuple[int, ...]
    k_sizes: tuple[int, ...]
    curves: dict[tuple[int, int], Curve]

    def __call__(self, m: int, n: int, k: int) -> float:
        """Latency (s): bilinear in (log n, log k) inside the grid, proportional to n*k outside."""
        n_low, n_high, n_weight, n_scale = _bracket(self.n_sizes, n)
        k_low, k_high, k_weight, k_scale = _bracket(self.k_sizes, k)
        corners = [(n_low, k_low), (n_low, k_high), (n_high, k_low), (n_high, k_high)]
        if any(corner not in self.curves for corner in corners):
            return self._nearest(m, n, k)
        log_nk = [math.log(self.curves[corner](m)) for corner in corners]
        low = log_nk[0] + k_weight * (log_nk[1] - log_nk[0])
        high = log_nk[2] + k_weight * (log_nk[3] - log_nk[2])
        return math.exp(low + n_weight * (high - low)) * n_scale * k_scale

    def _nearest(self, m: int, n: int, k: int) -> float:
        def log_distance(shape: tuple[int, int]) -> float:
            return abs(math.log(shape[0] / n)) + abs(math.log(shape[1] / k))

        near_n, near_k = min(self.curves, key=log_distance)
        return self.curves[(near_n, near_k)](m) * (n * k) / (near_n * near_k)


@dataclass(frozen=True, slots=True)
class KernelTables:
    """All kernel latencies of one GPU."""

    gpu_dir: str
    gemm: GemmTable
    context_attention: dict[tuple[int, int], CurveFamily]  # (q heads, kv heads) -> (batch, isl)
    generation_attention: dict[tuple[int, int], CurveFamily]  # -> (batch, kv_len)
    allreduce: dict[int, Curve]  # num_gpus -> message elements

    def prefill_attention_s(self, heads: tuple[int, int], batch: float, isl: float) -> float:
        """Causal prefill of `batch` sequences of `isl` tokens with no cached prefix, one layer."""
        family, scale = _head_family(self.context_attention, heads, scale_by_kv_heads=False)
        return family(batch, isl) * scale

    def decode_attention_s(self, heads: tuple[int, int], batch: float, kv_len: float) -> float:
        """One query token for each of `batch` sequences of `kv_len` tokens, one layer."""
        family, scale = _head_family(self.generation_attention, heads, scale_by_kv_heads=True)
        return family(batch, kv_len) * scale

    def allreduce_s(self, num_gpus: int, num_elements: int) -> float:
        """CUDA-graph custom all-reduce of `num_elements` bf16 values across `num_gpus`."""
        if num_gpus not in self.allreduce:
            raise InputError(
                f"no all-reduce measurements for {num_gpus} GPUs in {self.gpu_dir}; "
                f"measured: {sorted(self.allreduce)}"
            )
        return self.allreduce[num_gpus](num_elements)


def load_kernel_tables(directory: Path) -> KernelTables:
    """Read `gemm_bf16.csv`, `context_attention_bf16.csv`, `generation_attention_bf16.csv` and
    `custom_allreduce_bf16.csv` from one GPU's folder."""
    gemm_points: dict[tuple[int, int], dict[float, float]] = {}
    for row in _read_rows(directory / "gemm_bf16.csv", ("m", "n", "k", "latency_ms")):
        shape = (int(row["n"]), int(row["k"]))
        gemm_points.setdefault(shape, {})[float(row["m"])] = float(row["latency_ms"]) * MS
    gemm = GemmTable(
        n_sizes=tuple(sorted({n for n, _ in gemm_points})),
        k_sizes=tuple(sorted({k for _, k in gemm_points})),
        curves={shape: Curve.from_points(points, 1.0) for shape, points in gemm_points.items()},
    )
    context = _read_families(
        directory / "context_attention_bf16.csv", "isl", inner_power=2.0, outer_power=1.0
    )
    generation = _read_families(
        directory / "generation_attention_bf16.csv", "kv_len", inner_power=1.0, outer_power=1.0
    )
    allreduce_points: dict[int, dict[float, float]] = {}
    columns = ("num_gpus", "message_elements", "backend", "latency_ms")
    for row in _read_rows(directory / "custom_allreduce_bf16.csv", columns):
        if row["backend"] == "vllm_graph":
            points = allreduce_points.setdefault(int(row["num_gpus"]), {})
            points[float(row["message_elements"])] = float(row["latency_ms"]) * MS
    allreduce = {
        num_gpus: Curve.from_points(points, 1.0) for num_gpus, points in allreduce_points.items()
    }
    return KernelTables(directory.name, gemm, context, generation, allreduce)


def _read_families(
    path: Path, inner_column: str, inner_power: float, outer_power: float
) -> dict[tuple[int, int], CurveFamily]:
    points: dict[tuple[int, int], dict[float, dict[float, float]]] = {}
    columns = ("batch_size", inner_column, "num_heads", "num_kv_heads", "latency_ms")
    for row in _read_rows(path, columns):
        heads = (int(row["num_heads"]), int(row["num_kv_heads"]))
        by_batch = points.setdefault(heads, {}).setdefault(float(row["batch_size"]), {})
        by_batch[float(row[inner_column])] = float(row["latency_ms"]) * MS
    return {
        heads: CurveFamily.from_rows(rows, inner_power, outer_power)
        for heads, rows in points.items()
    }


def _read_rows(path: Path, columns: tuple[str, ...]) -> list[dict[str, str]]:
    if not path.is_file():
        raise InputError("kernel table not found", source=str(path))
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [column for column in columns if column not in (reader.fieldnames or [])]
        if missing:
            raise InputError(f"missing columns {missing}", source=str(path), line=1)
        return list(reader)


def _head_family(
    families: dict[tuple[int, int], CurveFamily],
    heads: tuple[int, int],
    scale_by_kv_heads: bool,
) -> tuple[CurveFamily, float]:
    """The measured head configuration closest to `heads`, and the factor to scale it by: the
    ratio of q heads for compute-bound prefill, of KV heads for memory-bound decode."""
    if heads in families:
        return families[heads], 1.0
    num_heads, num_kv_heads = heads

    def log_distance(candidate: tuple[int, int]) -> float:
        return abs(math.log(candidate[0] / num_heads)) + abs(math.log(candidate[1] / num_kv_heads))

    nearest = min(families, key=log_distance)
    if scale_by_kv_heads:
        return families[nearest], num_kv_heads / nearest[1]
    return families[nearest], num_heads / nearest[0]


def _bracket(sizes: tuple[int, ...], size: int) -> tuple[int, int, float, float]:
    """Neighbouring grid sizes, the log-space weight of the upper one, and an outside-grid scale."""
    if size <= sizes[0]:
        return sizes[0], sizes[0], 0.0, size / sizes[0]
    if size >= sizes[-1]:
        return sizes[-1], sizes[-1], 0.0, size / sizes[-1]
    upper = bisect.bisect_left(sizes, size)
    low, high = sizes[upper - 1], sizes[upper]
    if high == size:
        return high, high, 0.0, 1.0
    return low, high, math.log(size / low) / math.log(high / low), 1.0


def _lerp(xs: tuple[float, ...], ys: tuple[float, ...], upper: int, x: float) -> float:
    weight = (x - xs[upper - 1]) / (xs[upper] - xs[upper - 1])
    return ys[upper - 1] + weight * (ys[upper] - ys[upper - 1])
