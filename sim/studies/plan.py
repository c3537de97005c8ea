"""Capacity planning: the largest arrival rate, or the fewest replicas or least KV memory per
replica, with which a deployment meets latency SLOs and stays stable.

Every probe is a full `run_scenario` of the scenario with one setting changed
(`workload.arrivals.rate_per_s`, `deployment.replicas` or `engine.kv_cache_memory_gib`),
event traces off. A probe is feasible when it is stable and meets every SLO:

- SLO: the summary.json percentile (measured requests only, after warm-up) is at most the
  limit; a percentile with no samples fails.
- Stable: summary.json's `stable`, the test every run gets (sim.metrics.stability): no growth
  of the request rate, waiting queue or TTFT over the measured window, and a drain within 10 %
  of the window once arrivals stop.

The search runs once per seed (`PlanSettings.seeds`, default the scenario's own). The answer is
the value every seed sustains (the smallest per-seed answer for rates, the largest for replicas
and KV memory); with two or more seeds the per-seed answers also give a 95 % Student-t
confidence interval on the mean answer. Feasibility is assumed monotone in the searched
setting; see sim.studies.plan_search.
"""

from __future__ import annotations

import math
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim.config import (
    GammaSettings,
    PoissonSettings,
    Scenario,
    ScenarioSource,
    load_scenario,
    validate_scenario_data,
)
from sim.costmodel import kv_bytes_per_token
from sim.errors import InputError
from sim.metrics import MIN_MEASURED_REQUESTS
from sim.runner import GIB, deployment_num_gpu_blocks, run_scenario
from sim.studies.intervals import mean_confidence_interval
from sim.studies.plan_search import (
    Bracket,
    largest_feasible,
    smallest_feasible,
    smallest_feasible_count,
)
from sim.sweep import is_sweep_file, load_sweep

# SLO metric names and the summary.json key (seconds) each one reads.
SLO_METRICS = {
    "ttft_p50": "ttft_p50_s",
    "ttft_p90": "ttft_p90_s",
    "ttft_p99": "ttft_p99_s",
    "e2e_p50": "e2e_p50_s",
    "e2e_p99": "e2e_p99_s",
    "itl_p50": "itl_p50_s",
    "itl_p99": "itl_p99_s",
    "queue_p50": "queue_p50_s",
    "queue_p99": "queue_p99_s",
}
_SLO_TEXT = re.compile(r"^\s*(\w+)\s*=\s*(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+)\s*(ms|s)\s*$")
_UNIT_SECONDS = {"s": 1.0, "ms": 1e-3}

FIND_MODES = ("rate", "replicas", "kv-memory")
_SEARCHED_PATHS = {
    "rate": "workload.arrivals.rate_per_s",
    "replicas": "deployment.replicas",
    "kv-memory": "engine.kv_cache_memory_gib",
}
_UNITS = {"rate": "arrivals/s", "replicas": "replicas", "kv-memory": "GiB"}


@dataclass(slots=True, frozen=True)
class Slo:
    """An upper limit on one latency percentile of the summary."""

    metric: str  # a key of SLO_METRICS
    limit_s: float

    @property
    def summary_key(self) -> str:
        """The summary.json key this SLO reads."""
        return SLO_METRICS[self.metric]


def parse_slo(text: str) -> Slo:
    """`metric=value` with a unit, e.g. `ttft_p99=2s` or `itl_p99=50ms`."""
    match = _SLO_TEXT.match(text)
    if match is None:
        raise InputError(
            f"--slo {text!r}: expected metric=value with a unit (s or ms), e.g. ttft_p99=2s"
        )
    metric, number, unit = match.groups()
    if metric not in SLO_METRICS:
        raise InputError(
            f"--slo {text!r}: unknown metric {metric!r}; allowed: {', '.join(SLO_METRICS)}"
        )
    limit_s = float(number) * _UNIT_SECONDS[unit]
    if not limit_s > 0:
        raise InputError(f"--slo {text!r}: the limit must be positive")
    return Slo(metric, limit_s)


def parse_slos(texts: Sequence[str]) -> list[Slo]:
    """Each `--slo` parsed (`parse_slo`); a metric limited twice is refused, since only one of
    its limits could hold."""
    slos: list[Slo] = []
    given: dict[str, str] = {}
    for text in texts:
        slo = parse_slo(text)
        if slo.metric in given:
            raise InputError(
                f"--slo {text!r}: {slo.metric} is limited already by --slo "
                f"{given[slo.metric]!r}; give each metric once"
            )
        given[slo.metric] = text
        slos.append(slo)
    return slos


@dataclass(slots=True, frozen=True)
class PlanSettings:
    """What to search and the rules of the search."""

    find: str = "rate"  # one of FIND_MODES
    rate_per_s: float | None = None  # fixed arrival rate (replicas, kv-memory) or search start
    rel_tol: float = 0.05
    max_replicas: int = 64
    seeds: tuple[int, ...] = ()  # one search per seed; empty: the scenario's seed


@dataclass(slots=True)
class Probe:
    """One simulated run at one value of the searched setting."""

    value: float
    seed: int
    metrics_s: dict[str, float | None]  # SLO metric -> measured value
    num_requests: int
    drain_s: float
    stable: bool
    unstable_reason: str | None
    meets_slos: bool

    @property
    def feasible(self) -> bool:
        """Stable and within every SLO."""
        return self.stable and self.meets_slos


@dataclass(slots=True)
class PlanResult:
    """The answer every seed sustains, the infeasible value next to it, each seed's bracket,
    and every probe in the order run."""

    scenario: str
    settings: PlanSettings
    slos: list[Slo]
    answer: float | None
    infeasible_bound: float | None
    brackets: dict[int, Bracket] = field(default_factory=dict)  # per seed
    probes: list[Probe] = field(default_factory=list)

    @property
    def unit(self) -> str:
        """The unit of the searched value."""
        return _UNITS[self.settings.find]

    @property
    def answer_interval(self) -> tuple[float, float, float] | None:
        """(mean, low, high) of the per-seed answers at 95 % (Student's t), the low end no less
        than 0: no capacity is negative, yet a t interval over two or three seeds can reach
        below it. None with fewer than two answers."""
        answers = [bracket.feasible for bracket in self.brackets.values()]
        if len(answers) < 2 or any(answer is None for answer in answers):
            return None
        mean, low, high = mean_confidence_interval([float(answer) for answer in answers if answer])
        return mean, max(low, 0.0), high

    def stability_note(self) -> str | None:
        """A loud line when no probe failed an SLO yet some were refused as unstable: then the
        steady-state test, not the SLOs, placed the answer, and a run too short for its traffic
        (sessions still accumulating) would place it there too. None otherwise."""
        unstable = [probe for probe in self.probes if not probe.stable]
        if not unstable or any(not probe.meets_slos for probe in self.probes):
            return None
        # The unstable probe next to the answer: the lowest rate, the most memory or replicas.
        sign = 1 if self.settings.find == "rate" else -1
        first = min(unstable, key=lambda probe: (sign * probe.value, probe.seed))
        return (
            "WARNING: every probe met the SLOs: the answer is where runs stopped reaching a "
            "steady state, not where an SLO fails (first at "
            f"{format_quantity(first.value, self.settings.find)}, seed {first.seed}: "
            f"{first.unstable_reason})"
        )

    def to_json(self) -> dict[str, Any]:
        """plan.json's document."""
        settings = self.settings
        return {
            "scenario": self.scenario,
            "find": settings.find,
            "searched": _SEARCHED_PATHS[settings.find],
            "unit": self.unit,
            "answer": self.answer,
            "infeasible_bound": self.infeasible_bound,
            "slos": {slo.metric: slo.limit_s for slo in self.slos},
            "rate_per_s": settings.rate_per_s,
            "rel_tol": settings.rel_tol,
            "seeds": sorted(self.brackets),
            "per_seed": {
                str(seed): {"answer": bracket.feasible, "infeasible_bound": bracket.infeasible}
                for seed, bracket in self.brackets.items()
            },
            "answer_ci95": (
                None
                if self.answer_interval is None
                else dict(zip(("mean", "low", "high"), self.answer_interval, strict=True))
            ),
            "probes": [
                {
                    "value": probe.value,
                    "seed": probe.seed,
                    "feasible": probe.feasible,
                    "stable": probe.stable,
                    "unstable_reason": probe.unstable_reason,
                    "meets_slos": probe.meets_slos,
                    "drain_s": probe.drain_s,
                    "num_requests": probe.num_requests,
                    "metrics_s": probe.metrics_s,
                }
                for probe in self.probes
            ],
        }


def plan_base(
    path: Path, overrides: list[str] | tuple[str, ...] = ()
) -> tuple[Scenario, Path, tuple[int, ...]]:
    """The scenario to plan on, its base directory and default seeds (none: the scenario's). A
    sweep file gives its base scenario (its settings as written outside `sweep:`) and its seeds,
    so a plan and a sweep of one file answer the same question."""
    if not is_sweep_file(path):
        loaded = load_scenario(path, overrides)
        return loaded.scenario, loaded.base_dir, ()
    sweep = load_sweep(path, overrides, base_only=True)
    scenario = validate_scenario_data(ScenarioSource(sweep.base_data, path))
    return scenario, sweep.base_dir, tuple(sweep.spec.seeds or ())


def with_setting(
    scenario: Scenario, dotted_path: str, value: Any, base_dir: Path = Path()
) -> Scenario:
    """The scenario with one setting replaced, validated like a scenario file in `base_dir`
    (where its relative paths, e.g. a trace's, resolve)."""
    data = scenario.resolved()
    *parents, last = dotted_path.split(".")
    target = data
    for part in parents:
        target = target[part]
    target[last] = value
    return validate_scenario_data(ScenarioSource(data, base_dir / f"<{dotted_path}={value}>"))


def kv_memory_range_gib(scenario: Scenario) -> tuple[float, float]:
    """Per-GPU KV memory from the least vLLM accepts (one max_model_len sequence plus the null
    block) to all the GPU leaves after weights and activations."""
    engine, deployment = scenario.engine, scenario.deployment
    if engine.num_gpu_blocks is not None:
        raise InputError(
            "engine.num_gpu_blocks fixes the KV cache size; remove it to search kv-memory"
        )
    block_bytes = engine.block_size * kv_bytes_per_token(deployment.model_spec, deployment.tp)
    least_blocks = math.ceil(engine.max_model_len / engine.block_size) + 1
    most_blocks = deployment_num_gpu_blocks(engine, deployment, use_overrides=False)
    if most_blocks < least_blocks:
        raise InputError(
            f"the GPU's KV cache ({most_blocks - 1} blocks) cannot hold one max_model_len "
            f"({engine.max_model_len}) sequence; lower engine.max_model_len"
        )
    return least_blocks * block_bytes / GIB, most_blocks * block_bytes / GIB


def check_plan_inputs(scenario: Scenario, settings: PlanSettings) -> None:
    """Reject settings a plan cannot run with (before any probe), as one-line InputErrors."""
    if settings.find not in FIND_MODES:
        raise InputError(f"--find {settings.find!r}: allowed: {', '.join(FIND_MODES)}")
    if scenario.duration_s is None:
        raise InputError(
            "plan needs duration_s in the scenario: every probe must see the same arrival window"
        )
    rate_needed = settings.find == "rate" or settings.rate_per_s is not None
    if rate_needed and not isinstance(scenario.workload.arrivals, PoissonSettings | GammaSettings):
        raise InputError(
            "workload.arrivals: changing the arrival rate needs a poisson or gamma process "
            "(rate_per_s); piecewise arrivals and traces have no single rate"
        )
    if settings.rate_per_s is not None and not settings.rate_per_s > 0:
        raise InputError(f"--rate {settings.rate_per_s}: must be a positive number of arrivals/s")
    if not 0 < settings.rel_tol < 1:
        raise InputError(f"--tolerance {settings.rel_tol}: must be in (0, 1)")
    if settings.max_replicas < 1:
        raise InputError(f"--max-replicas {settings.max_replicas}: must be >= 1")
    if settings.find == "kv-memory":
        kv_memory_range_gib(scenario)


def plan(
    scenario: Scenario,
    base_dir: Path,
    slos: list[Slo],
    settings: PlanSettings,
    *,
    scratch_dir: Path,
    on_probe: Callable[[Probe], None] | None = None,
) -> PlanResult:
    """Search the setting `settings.find` names; probe runs go to (and leave) `scratch_dir`."""
    if not slos:
        raise InputError("give at least one --slo, e.g. --slo ttft_p99=2s")
    check_plan_inputs(scenario, settings)
    duration_s = scenario.duration_s
    assert duration_s is not None  # check_plan_inputs requires it
    base = with_setting(scenario, "outputs", {"events": False, "scrape_interval_s": duration_s})
    if settings.rate_per_s is not None:
        base = with_setting(base, _SEARCHED_PATHS["rate"], settings.rate_per_s)
    result = PlanResult(
        scenario=scenario.name,
        settings=settings,
        slos=list(slos),
        answer=None,
        infeasible_bound=None,
    )
    searched_path = _SEARCHED_PATHS[settings.find]
    for seed in settings.seeds or (scenario.seed,):
        seeded = with_setting(base, "seed", seed)

        def is_feasible(value: float, seeded: Scenario = seeded, seed: int = seed) -> bool:
            probe_scenario = with_setting(seeded, searched_path, value)
            run_dir = scratch_dir / f"probe-{len(result.probes):03d}"
            summary = run_scenario(
                probe_scenario, base_dir, run_dir=run_dir, require_measured=False
            ).summary
            shutil.rmtree(run_dir, ignore_errors=True)
            if summary["num_requests"] < MIN_MEASURED_REQUESTS:
                raise InputError(
                    f"the probe at {searched_path} = {value:g} (seed {seed}) measured "
                    f"{summary['num_requests']} requests, too few to judge a steady state (at "
                    f"least {MIN_MEASURED_REQUESTS}); lengthen duration_s or raise the rate"
                )
            probe = _probe(value, seed, summary, slos)
            result.probes.append(probe)
            if on_probe is not None:
                on_probe(probe)
            return probe.feasible

        result.brackets[seed] = _search(seeded, settings, is_feasible)
    result.answer, result.infeasible_bound = _sustained_by_every_seed(
        list(result.brackets.values()), searching_maximum=settings.find == "rate"
    )
    return result


def _sustained_by_every_seed(
    brackets: list[Bracket], *, searching_maximum: bool
) -> tuple[float | None, float | None]:
    """The answer all seeds sustain and its infeasible partner: the bracket of the seed with the
    smallest answer (largest, when searching a minimum); no answer if any seed has none."""
    if any(bracket.feasible is None for bracket in brackets):
        worst = next(bracket for bracket in brackets if bracket.feasible is None)
        return None, worst.infeasible
    pick = min if searching_maximum else max
    worst = pick(brackets, key=lambda bracket: float(bracket.feasible or 0.0))
    return worst.feasible, worst.infeasible


def _search(
    base: Scenario, settings: PlanSettings, is_feasible: Callable[[float], bool]
) -> Bracket:
    if settings.find == "rate":
        arrivals = base.workload.arrivals
        assert isinstance(arrivals, PoissonSettings | GammaSettings)  # check_plan_inputs
        return largest_feasible(is_feasible, arrivals.rate_per_s, rel_tol=settings.rel_tol)
    if settings.find == "replicas":
        return smallest_feasible_count(is_feasible, max_count=settings.max_replicas)
    low_gib, high_gib = kv_memory_range_gib(base)
    return smallest_feasible(is_feasible, low_gib, high_gib, rel_tol=settings.rel_tol)


def _probe(value: float, seed: int, summary: dict[str, Any], slos: list[Slo]) -> Probe:
    metrics_s = {slo.metric: summary.get(slo.summary_key) for slo in slos}
    meets_slos = all(
        (measured := metrics_s[slo.metric]) is not None and measured <= slo.limit_s for slo in slos
    )
    return Probe(
        value=value,
        seed=seed,
        metrics_s=metrics_s,
        num_requests=summary["num_requests"],
        drain_s=summary["drain_s"],
        stable=summary["stable"],
        unstable_reason=summary["unstable_reason"],
        meets_slos=meets_slos,
    )


def format_value(value: float, find: str) -> str:
    """A searched value with sensible precision: 4.31 (arrivals/s), 6.64 (GiB), 3 (replicas)."""
    if find == "replicas":
        return f"{int(value)}"
    return f"{value:.2f}".rstrip("0").rstrip(".")


def format_quantity(value: float, find: str) -> str:
    """A searched value with its unit: '4.31 arrivals/s', '6.64 GiB', '1 replica'."""
    unit = _UNITS[find]
    if find == "replicas" and value == 1:
        unit = "replica"
    return f"{format_value(value, find)} {unit}"


def slo_slug(slos: list[Slo]) -> str:
    """A directory name for an SLO set: ttft_p99-1s_itl_p99-0.05s."""
    return "_".join(f"{slo.metric}-{slo.limit_s:g}s" for slo in slos)
