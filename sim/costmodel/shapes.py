"""Batch shapes to evaluate the kernel reference at: a training lattice, held-out random shapes."""

from __future__ import annotations

import numpy as np

from sim.costmodel.batch import BatchShape

# Fixed so the held-out set (and every figure computed on it) is the same on every run.
HELD_OUT_SEED = 20240611


def training_shapes() -> list[BatchShape]:
    """Lattice over the regimes a serving engine schedules (cost_model.md §5.1): prefill 1..32k
    new tokens on 0..16k cached, decode batches 1..1024 at 256..16k context, chunks mixed with
    decodes, and several prefills in one step."""
    shapes = [
        BatchShape([num_new], [num_cached], [])
        for num_new in (1, 16, 64, 256, 1024, 4096, 16384, 32768)
        for num_cached in (0, 1024, 4096, 16384)
    ]
    shapes += [
        BatchShape([num_new] * num_chunks, [0] * num_chunks, [])
        for num_chunks, num_new in ((2, 1024), (4, 512), (8, 256), (4, 2048))
    ]
    shapes += [
        BatchShape([], [], [context] * num_decodes)
        for num_decodes in (1, 4, 16, 64, 256)
        for context in (256, 1024, 4096, 16384)
    ]
    shapes += [BatchShape([], [], [context] * 1024) for context in (256, 1024)]
    shapes += [
        BatchShape([num_new], [num_cached], [context] * num_decodes)
        for num_new in (256, 1024, 2048)
        for num_cached in (0, 4096)
        for num_decodes, context in ((8, 1024), (32, 4096), (128, 2048))
    ]
    return shapes


def held_out_shapes(num_per_kind: int = 20) -> list[BatchShape]:
    """Random shapes (log-uniform sizes, uneven decode contexts) inside the training box, none on
    the lattice: `num_per_kind` prefill-only, decode-only and mixed steps."""
    rng = np.random.default_rng(np.random.SeedSequence(HELD_OUT_SEED))

    def log_uniform(low: int, high: int, size: int | None = None) -> np.ndarray:
        return np.exp(rng.uniform(np.log(low), np.log(high), size)).round().astype(int)

    def chunks(max_chunks: int, low: int, high: int) -> tuple[list[int], list[int]]:
        num_chunks = int(rng.integers(1, max_chunks + 1))
        new = [int(v) for v in log_uniform(low, high, num_chunks)]
        cached = [int(log_uniform(64, 16384)) if rng.random() < 0.6 else 0 for _ in new]
        return new, cached

    def decodes(low_batch: int, high_batch: int) -> list[int]:
        typical_context = int(log_uniform(256, 8192))
        num_decodes = int(log_uniform(low_batch, high_batch))
        contexts = log_uniform(typical_context // 2, typical_context * 2, num_decodes)
        return [int(context) for context in contexts]

    shapes = []
    for _ in range(num_per_kind):
        new, cached = chunks(2, 16, 24576)
        shapes.append(BatchShape(new, cached, []))
    shapes += [BatchShape([], [], decodes(1, 256)) for _ in range(num_per_kind)]
    for _ in range(num_per_kind):
        new, cached = chunks(2, 64, 4096)
        shapes.append(BatchShape(new, cached, decodes(4, 128)))
    return shapes
