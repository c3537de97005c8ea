"""Host time per decoding sequence of an engine without CUDA graphs (docs/cost_model.md §5.8).

A 2023 Python engine schedules, prepares the inputs of, samples and processes the output of every
running sequence on the host in every step, and (with Ray workers) sends the step's inputs to each
tensor-parallel worker, all in series with the GPU. Vidur profiled those parts per step for a
vLLM-derived engine at batch 8-64 and TP 1-4 on A100 (`data/eager/vidur_cpu_overheads.csv`):
their sum grows about linearly with the batch, and faster at higher TP. The term is that growth,
per sequence `a + b log2(TP)`, derived from the profiles alone (no step time is fitted to it).
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

VIDUR_CPU_OVERHEADS_CSV = Path(__file__).parent / "data" / "eager" / "vidur_cpu_overheads.csv"
# The parts of a step the host runs in series with the GPU, each the median over the profiled
# steps (the step times the term is compared with are medians too).
HOST_PARTS_MS = (
    "schedule_median_ms",
    "prepare_inputs_e2e_median_ms",
    "sampler_e2e_median_ms",
    "process_model_outputs_median_ms",
    "ray_comm_time_median_ms",
)


@dataclass(frozen=True, slots=True)
class SequenceHostTerm:
    """Host seconds per decoding sequence in a step: `per_sequence_s` at TP 1, plus
    `per_tp_doubling_s` for each doubling of TP."""

    per_sequence_s: float
    per_tp_doubling_s: float

    def at_tp(self, tp: int) -> float:
        """Host seconds per decoding sequence at tensor parallelism `tp`."""
        return self.per_sequence_s + self.per_tp_doubling_s * math.log2(tp)


@dataclass(frozen=True, slots=True)
class SetupGrowth:
    """How fast one profiled setup's host parts grow: seconds per added sequence."""

    model: str
    tp: int
    per_sequence_s: float
    batch_sizes: tuple[int, ...]


def setup_growths(path: Path = VIDUR_CPU_OVERHEADS_CSV) -> list[SetupGrowth]:
    """Per (model, TP), the least-squares slope of the host parts' summed medians over the
    batch size, in (model, TP) order."""
    host_ms: dict[tuple[str, int], dict[int, float]] = defaultdict(dict)
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            setup = (row["model_name"], int(row["tensor_parallel_degree"]))
            host_ms[setup][int(row["batch_size"])] = sum(float(row[part]) for part in HOST_PARTS_MS)
    growths = []
    for (model, tp), by_batch in sorted(host_ms.items()):
        batch_sizes = tuple(sorted(by_batch))
        slope_ms = np.polyfit(batch_sizes, [by_batch[size] for size in batch_sizes], 1)[0]
        growths.append(SetupGrowth(model, tp, float(slope_ms) * 1e-3, batch_sizes))
    return growths


def fit_sequence_host_term(growths: list[SetupGrowth]) -> SequenceHostTerm:
    """a and b minimising sum((a + b log2(tp) - growth)^2), each setup counted once."""
    design = np.array([[1.0, math.log2(growth.tp)] for growth in growths])
    target = np.array([growth.per_sequence_s for growth in growths])
    (per_sequence_s, per_tp_doubling_s), *_ = np.linalg.lstsq(design, target, rcond=None)
    return SequenceHostTerm(float(per_sequence_s), float(per_tp_doubling_s))
