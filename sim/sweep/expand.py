"""Reading a sweep file and expanding it into validated scenarios, one per run."""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.config import (
    DEFAULT_MAX_RUNS,
    Scenario,
    ScenarioSource,
    apply_overrides,
    check_sweep_size,
    load_source,
    validate_scenario_data,
    yaml_text,
)
from sim.errors import InputError
from sim.sweep.spec import SweepSpec, parse_sweep_spec


@dataclass(slots=True)
class SweepRun:
    """One run of a sweep: its scenario and the swept settings that made it."""

    run_id: str
    variant: str
    seed: int
    parameters: tuple[tuple[str, Any], ...]
    scenario: Scenario


@dataclass(slots=True)
class SweepPlan:
    """A loaded sweep: the base document, its spec and the runs in expansion order."""

    name: str
    base_dir: Path
    base_data: dict[str, Any]
    spec: SweepSpec
    runs: list[SweepRun]

    def resolved_yaml(self) -> str:
        """The base scenario (extends and --set applied) with the checked `sweep:` spec."""
        document = {**self.base_data, "sweep": self.spec.as_data()}
        return yaml_text(document)


def format_value(value: Any) -> str:
    """A swept value as text: strings as written, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def format_variant(parameters: tuple[tuple[str, Any], ...]) -> str:
    """`path=value,path=value` in sweep-spec order (the seed is not part of a variant)."""
    return ",".join(f"{path}={format_value(value)}" for path, value in parameters)


def _set_dotted(data: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    target: Any = data
    for position, part in enumerate(parts):
        last = position == len(parts) - 1
        if isinstance(target, list):
            # isdecimal, as --set reads an index: isdigit() also takes digits int() refuses ('²').
            if not part.isdecimal() or int(part) >= len(target):
                raise ValueError(f"{part!r} is not an index of a {len(target)}-item list")
            if last:
                target[int(part)] = copy.deepcopy(value)
            else:
                target = target[int(part)]
        elif isinstance(target, dict):
            if last:
                target[part] = copy.deepcopy(value)
            else:
                target = target.setdefault(part, {})
        else:
            raise ValueError(f"{parts[position - 1]!r} is {target!r}, not a mapping")


def _strip_location(error: InputError) -> str:
    text = str(error)
    if error.source is None:
        return text
    prefix = f"{error.source}:{error.line}: " if error.line is not None else f"{error.source}: "
    return text.removeprefix(prefix)


def _variant_scenario(
    source: ScenarioSource,
    spec: SweepSpec,
    parameters: tuple[tuple[str, Any], ...],
    seed: int | None,
) -> Scenario:
    data = copy.deepcopy(source.data)
    locations = dict(source.locations)
    section_of = {path: axis.section for axis in spec.axes for path in axis.paths}
    for path, value in parameters:
        where = f"sweep.{section_of[path]}.{path}"
        try:
            _set_dotted(data, path, value)
        except ValueError as problem:
            file_name, line = source.location(where)
            raise InputError(f"{where}: {problem}", source=file_name, line=line) from None
        locations[path] = source.location(where)
    if seed is not None:
        data["seed"] = seed
        locations["seed"] = source.location("sweep.seeds")
    return validate_scenario_data(ScenarioSource(data, source.path, locations))


def count_runs(spec: SweepSpec) -> int:
    """How many runs the spec expands to, without expanding it."""
    count = len(spec.seeds or (None,))
    for axis in spec.axes:
        count *= len(axis.points)
    return count


def expand_sweep(
    source: ScenarioSource, spec: SweepSpec, max_runs: int = DEFAULT_MAX_RUNS
) -> list[SweepRun]:
    """Every run of the sweep, validated; the first invalid variant is reported with its values."""
    sizes = [str(len(axis.points)) for axis in spec.axes] + [str(len(spec.seeds or (None,)))]
    try:
        check_sweep_size(count_runs(spec), max_runs, f"sweep: {' x '.join(sizes)} (seeds last)")
    except InputError as error:
        file_name, line = source.location("sweep")
        raise InputError(str(error), source=file_name, line=line) from None
    runs: list[SweepRun] = []
    variant_of_run: dict[str, str] = {}
    for combination in itertools.product(*(axis.points for axis in spec.axes)):
        parameters = tuple(pair for point in combination for pair in point)
        variant = format_variant(parameters)
        for seed in spec.seeds or (None,):
            label = (variant or "base") + ("" if seed is None else f", seed {seed}")
            try:
                scenario = _variant_scenario(source, spec, parameters, seed)
            except InputError as error:
                raise InputError(
                    f"sweep variant {label}: {_strip_location(error)}",
                    source=error.source,
                    line=error.line,
                ) from None
            run_id = scenario.run_id()
            if run_id in variant_of_run:
                file_name, line = source.location("sweep")
                raise InputError(
                    f"sweep variants {variant_of_run[run_id]} and {label} resolve to the same "
                    f"config (run id {run_id}); remove one of the values",
                    source=file_name,
                    line=line,
                )
            variant_of_run[run_id] = label
            runs.append(SweepRun(run_id, variant, scenario.seed, parameters, scenario))
    return runs


def is_sweep_file(path: Path) -> bool:
    """True when `path` holds a top-level `sweep:` mapping (after `extends:`)."""
    return "sweep" in load_source(path).data


def load_sweep(
    path: Path,
    overrides: list[str] | tuple[str, ...] = (),
    max_runs: int = DEFAULT_MAX_RUNS,
    *,
    base_only: bool = False,
) -> SweepPlan:
    """Read a sweep file (`extends:` resolved, `--set` applied to the base) and expand it;
    more than `max_runs` runs are refused before expanding. A `--set` on a path the sweep
    varies is refused, unless the caller reads the base alone (`base_only`: a plan)."""
    source = load_source(path)
    if "sweep" not in source.data:
        raise InputError(
            "no 'sweep:' mapping; a sweep file is a scenario plus "
            "sweep: {grid: {path: [values]}, zip: {path: [values]}, seeds: [ints]}",
            source=str(path),
        )
    sweep_data = source.data.pop("sweep")
    apply_overrides(source, list(overrides))
    if "sweep" in source.data:
        raise InputError("--set applies to the base scenario; edit the file's sweep: mapping")
    spec = parse_sweep_spec(source, sweep_data)
    if not base_only:
        _check_overrides_not_swept(overrides, spec)
    runs = expand_sweep(source, spec, max_runs)
    return SweepPlan(runs[0].scenario.name, path.resolve().parent, source.data, spec, runs)


def _check_overrides_not_swept(overrides: Sequence[str], spec: SweepSpec) -> None:
    """Refuse a `--set` on a swept path (or inside one): every run's own value would replace
    it, so it would change nothing."""
    swept = {path: f"sweep.{axis.section}" for axis in spec.axes for path in axis.paths}
    if spec.seeds is not None:
        swept["seed"] = "sweep.seeds"
    for assignment in overrides:
        dotted = assignment.partition("=")[0]
        for path, section in swept.items():
            if dotted == path or dotted.startswith(path + "."):
                raise InputError(
                    f"--set {assignment!r}: {path} is swept by {section}, whose values replace "
                    "it in every run; change the sweep's values instead"
                )
