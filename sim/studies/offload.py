"""How much host memory for vLLM's CPU KV offload tier is worth buying (spec §13).

`offload_study` runs the scenario without the tier, then with `kv_offloading_size` doubling
from a start size (default: the GPU KV cache's size, since the tier is inclusive and a smaller
one mostly repeats what the GPU holds) until the token hit rate (GPU plus CPU tier, vLLM's
`(prefix_cache_hits + external_prefix_cache_hits) / prefix_cache_queries`) grows by at most
`growth_tol` in two doublings running: that plateau is the unbounded-cache hit rate. The answer
is the smallest size whose hit rate reaches `target_fraction` of it, found by bisecting (in
ratio) the bracket the doubling left, with the TTFT p50/p99 it gives. Every probe is a full
`run_scenario` with the same seed and event traces off.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sim.config import Scenario
from sim.costmodel import kv_bytes_per_token
from sim.errors import InputError
from sim.runner import GIB, run_scenario, scheduler_config
from sim.studies.plan import with_setting
from sim.studies.plan_search import smallest_feasible


@dataclass(slots=True, frozen=True)
class OffloadSettings:
    """The goal and the sweep's rules."""

    target_fraction: float = 0.9
    start_gib: float | None = None  # default: one replica's GPU KV cache size
    growth_tol: float = 0.002  # hit-rate growth per doubling below which the rate has plateaued
    max_doublings: int = 14
    rel_tol: float = 0.1  # bisection stops when the bracket is this narrow (in ratio)


@dataclass(slots=True, frozen=True)
class OffloadPoint:
    """One run at one offload size (0: no CPU tier)."""

    size_gib: float
    hit_rate: float | None  # GPU plus CPU tier
    hit_rate_cpu: float | None
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    num_requests: int
    stable: bool  # summary.json's steady-state verdict (sim.metrics.stability)
    unstable_reason: str | None = None


@dataclass(slots=True)
class OffloadResult:
    """Every run, the plateau hit rate and the smallest size that reaches the goal."""

    scenario: str
    settings: OffloadSettings
    gpu_kv_gib: float
    points: list[OffloadPoint] = field(default_factory=list)
    unbounded_hit_rate: float | None = None
    answer_gib: float | None = None

    @property
    def goal_hit_rate(self) -> float | None:
        """target_fraction x the unbounded-cache hit rate."""
        if self.unbounded_hit_rate is None:
            return None
        return self.settings.target_fraction * self.unbounded_hit_rate

    @property
    def answer(self) -> OffloadPoint | None:
        """The run at the answer size."""
        return next((p for p in self.points if p.size_gib == self.answer_gib), None)

    def sorted_points(self) -> list[OffloadPoint]:
        """The runs by size."""
        return sorted(self.points, key=lambda point: point.size_gib)

    def unstable_points(self) -> list[OffloadPoint]:
        """The runs that reached no steady state, by size."""
        return [point for point in self.sorted_points() if not point.stable]

    def unstable_warning(self) -> str | None:
        """A loud line when runs reached no steady state (their TTFTs are not the deployment's)."""
        unstable = self.unstable_points()
        if not unstable:
            return None
        sizes = ", ".join(_gib(point.size_gib) for point in unstable)
        return (
            f"WARNING: UNSTABLE - {len(unstable)} of {len(self.points)} runs reached no steady "
            f"state ({sizes}; e.g. {unstable[0].unstable_reason}): their TTFTs describe the "
            "run's length, not the deployment; the hit rates still compare the sizes."
        )

    def as_dict(self) -> dict[str, Any]:
        """The result as offload.json holds it."""
        return {
            "scenario": self.scenario,
            "settings": asdict(self.settings),
            "gpu_kv_gib": self.gpu_kv_gib,
            "unbounded_hit_rate": self.unbounded_hit_rate,
            "goal_hit_rate": self.goal_hit_rate,
            "answer_gib": self.answer_gib,
            "unstable_warning": self.unstable_warning(),
            "points": [asdict(point) for point in self.sorted_points()],
        }

    def to_markdown(self) -> str:
        """The answer and the table of runs."""
        lines = [f"# How much host memory for KV offload: {self.scenario}", ""]
        percent = f"{100 * self.settings.target_fraction:g} %"
        answer = self.answer
        if answer is None or self.goal_hit_rate is None:
            lines.append(f"No offload size probed reaches {percent} of the plateau hit rate.")
        else:
            lines.append(
                f"**{_gib(answer.size_gib)} of host memory** per replica reaches {percent} of the "
                f"unbounded-cache hit rate ({_pct(answer.hit_rate)} of "
                f"{_pct(self.unbounded_hit_rate)}), with TTFT p50 {_ms(answer.ttft_p50_s)} and "
                f"p99 {_ms(answer.ttft_p99_s)}."
            )
        warning = self.unstable_warning()
        if warning is not None:
            lines += ["", f"**{warning}**"]
        lines += [
            "",
            f"GPU KV cache per replica: {_gib(self.gpu_kv_gib)}. Hit rate = tokens served from "
            "the GPU prefix cache or the CPU tier / prompt tokens looked up.",
            "",
            "| host memory | hit rate | from CPU tier | TTFT p50 | TTFT p99 | requests | steady |",
            "|---|---|---|---|---|---|---|",
        ]
        for point in self.sorted_points():
            mark = " **(answer)**" if point.size_gib == self.answer_gib else ""
            lines.append(
                f"| {_gib(point.size_gib)}{mark} | {_pct(point.hit_rate)} | "
                f"{_pct(point.hit_rate_cpu)} | {_ms(point.ttft_p50_s)} | "
                f"{_ms(point.ttft_p99_s)} | {point.num_requests} | "
                f"{'yes' if point.stable else '**no**'} |"
            )
        return "\n".join(lines) + "\n"


def _gib(size_gib: float) -> str:
    return "0 (off)" if size_gib == 0 else f"{size_gib:.3g} GiB"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{1000 * value:.1f} ms"


def gpu_kv_gib(scenario: Scenario) -> float:
    """One replica's GPU KV cache (all its GPUs) in GiB."""
    engine, deployment = scenario.engine, scenario.deployment
    block_bytes = (
        engine.block_size * kv_bytes_per_token(deployment.model_spec, deployment.tp) * deployment.tp
    )
    return (scheduler_config(scenario).num_gpu_blocks - 1) * block_bytes / GIB


def check_offload_settings(settings: OffloadSettings) -> None:
    """Reject settings the study cannot run with, as one-line InputErrors."""
    if not 0 < settings.target_fraction <= 1:
        raise InputError(f"--target {100 * settings.target_fraction:g}: must be in (0, 100]")
    if settings.start_gib is not None and not settings.start_gib > 0:
        raise InputError(f"--start-gib {settings.start_gib}: must be a positive number of GiB")
    if not settings.growth_tol > 0:
        raise InputError(f"--growth-tol {settings.growth_tol}: must be > 0")


def offload_study(
    scenario: Scenario,
    base_dir: Path,
    settings: OffloadSettings,
    *,
    scratch_dir: Path,
    on_point: Callable[[OffloadPoint], None] | None = None,
) -> OffloadResult:
    """Sweep the offload size and answer the smallest that reaches the goal (module doc)."""
    check_offload_settings(settings)
    base = with_setting(
        scenario,
        "outputs",
        {"events": False, "scrape_interval_s": scenario.duration_s or 60.0},
        base_dir,
    )
    result = OffloadResult(scenario.name, settings, gpu_kv_gib(base))
    by_size: dict[float, OffloadPoint] = {}

    def run(size_gib: float) -> OffloadPoint:
        if size_gib in by_size:
            return by_size[size_gib]
        probe = with_setting(base, "engine.kv_offloading_size", size_gib, base_dir)
        run_dir = scratch_dir / f"probe-{len(by_size):03d}"
        summary = run_scenario(probe, base_dir, run_dir=run_dir).summary
        shutil.rmtree(run_dir, ignore_errors=True)
        point = OffloadPoint(
            size_gib=size_gib,
            hit_rate=summary.get("hit_rate_gpu_and_cpu", summary["hit_rate"]),
            hit_rate_cpu=summary.get("hit_rate_cpu", 0.0),
            ttft_p50_s=summary["ttft_p50_s"],
            ttft_p99_s=summary["ttft_p99_s"],
            num_requests=summary["num_requests"],
            stable=summary["stable"],
            unstable_reason=summary["unstable_reason"],
        )
        by_size[size_gib] = point
        result.points.append(point)
        if on_point is not None:
            on_point(point)
        return point

    run(0.0)
    size = settings.start_gib or _round_gib(result.gpu_kv_gib)
    previous = run(size)
    flat_doublings = 0
    for _ in range(settings.max_doublings):
        size *= 2
        point = run(size)
        grew = (point.hit_rate or 0.0) - (previous.hit_rate or 0.0) > settings.growth_tol
        flat_doublings = 0 if grew else flat_doublings + 1
        if flat_doublings == 2:
            break
        previous = point
    result.unbounded_hit_rate = max((p.hit_rate or 0.0) for p in result.points)
    goal = result.goal_hit_rate or 0.0

    def reaches_goal(size_gib: float) -> bool:
        return (run(size_gib).hit_rate or 0.0) >= goal

    if reaches_goal(0.0):
        result.answer_gib = 0.0
        return result
    swept = sorted(s for s in by_size if s > 0)
    first = next(s for s in swept if reaches_goal(s))
    below = max((s for s in swept if s < first), default=first / 16)
    bracket = smallest_feasible(reaches_goal, below, first, rel_tol=settings.rel_tol)
    result.answer_gib = bracket.feasible
    return result


def _round_gib(size_gib: float) -> float:
    """`size_gib` to two significant digits (sizes people would buy), at least 1/64 GiB."""
    if size_gib <= 1 / 64:
        return 1 / 64
    digits = 1 - math.floor(math.log10(size_gib))
    return round(size_gib, digits)
