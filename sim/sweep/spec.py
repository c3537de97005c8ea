"""The `sweep:` mapping of a sweep file: grid and zip axes over dotted paths, and seeds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sim.config import MAX_SEED, ScenarioSource
from sim.errors import InputError

SECTIONS = ("grid", "zip", "seeds")
# Fields that cannot be an axis, and why.
RESERVED_PATHS = {
    "name": "it names the sweep's output directory",
    "seed": "list seeds under sweep.seeds",
}


@dataclass(slots=True, frozen=True)
class SweepAxis:
    """One independent axis: a grid path, or a zip block whose paths move together.

    `points[i]` is the i-th setting of the axis as (dotted path, value) pairs.
    """

    section: str
    paths: tuple[str, ...]
    points: tuple[tuple[tuple[str, Any], ...], ...]


@dataclass(slots=True, frozen=True)
class SweepSpec:
    """Axes in the order they are written (crossed, last fastest), then seeds (innermost)."""

    axes: tuple[SweepAxis, ...]
    seeds: tuple[int, ...] | None

    @property
    def paths(self) -> tuple[str, ...]:
        """Every swept dotted path except `seed`, in sweep-spec order."""
        return tuple(path for axis in self.axes for path in axis.paths)

    def as_data(self) -> dict[str, Any]:
        """The spec as a `sweep:` mapping (for sweep.resolved.yaml)."""
        data: dict[str, Any] = {}
        for axis in self.axes:
            section = data.setdefault(axis.section, {})
            for index, path in enumerate(axis.paths):
                section[path] = [point[index][1] for point in axis.points]
        if self.seeds is not None:
            data["seeds"] = list(self.seeds)
        return data


def _fail(source: ScenarioSource, dotted: str, message: str) -> InputError:
    file_name, line = source.location(dotted)
    return InputError(f"{dotted}: {message}", source=file_name, line=line)


def _check_path(source: ScenarioSource, section: str, path: Any) -> str:
    where = f"sweep.{section}"
    if not isinstance(path, str) or any(not part for part in path.split(".")):
        raise _fail(source, where, f"{path!r} is not a dotted path like engine.block_size")
    root = path.split(".")[0]
    if root in RESERVED_PATHS:
        raise _fail(source, f"{where}.{path}", f"{root!r} cannot be swept; {RESERVED_PATHS[root]}")
    return path


def _check_values(source: ScenarioSource, section: str, path: str, values: Any) -> list[Any]:
    if not isinstance(values, list) or not values:
        shown = type(values).__name__ if isinstance(values, dict) else repr(values)
        raise _fail(source, f"sweep.{section}.{path}", f"{shown} is not a non-empty list of values")
    return values


def _section_mapping(source: ScenarioSource, section: str, value: Any) -> dict[Any, Any]:
    if not isinstance(value, dict) or not value:
        raise _fail(source, f"sweep.{section}", "expected a mapping of dotted.path: [values, ...]")
    return value


def _grid_axes(source: ScenarioSource, value: Any) -> list[SweepAxis]:
    axes = []
    for path, values in _section_mapping(source, "grid", value).items():
        checked = _check_path(source, "grid", path)
        points = tuple(((checked, item),) for item in _check_values(source, "grid", path, values))
        axes.append(SweepAxis("grid", (checked,), points))
    return axes


def _zip_axis(source: ScenarioSource, value: Any) -> SweepAxis:
    mapping = _section_mapping(source, "zip", value)
    columns = {
        _check_path(source, "zip", path): _check_values(source, "zip", path, values)
        for path, values in mapping.items()
    }
    lengths = {path: len(values) for path, values in columns.items()}
    if len(set(lengths.values())) > 1:
        shown = ", ".join(f"{path} has {length}" for path, length in lengths.items())
        raise _fail(source, "sweep.zip", f"all lists must have the same length; {shown}")
    paths = tuple(columns)
    num_points = next(iter(lengths.values()))
    points = tuple(
        tuple((path, columns[path][index]) for path in paths) for index in range(num_points)
    )
    return SweepAxis("zip", paths, points)


def _seeds(source: ScenarioSource, value: Any) -> tuple[int, ...]:
    valid = (
        isinstance(value, list)
        and value
        and all(
            isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed <= MAX_SEED
            for seed in value
        )
    )
    if not valid:
        raise _fail(
            source,
            "sweep.seeds",
            f"{value!r} is not a non-empty list of integers from 0 to {MAX_SEED} (2**63 - 1)",
        )
    if len(set(value)) != len(value):
        raise _fail(source, "sweep.seeds", f"{value!r} repeats a seed")
    return tuple(value)


def _check_disjoint(source: ScenarioSource, axes: list[SweepAxis]) -> None:
    seen: dict[str, str] = {}
    for axis in axes:
        for path in axis.paths:
            for other, section in seen.items():
                if path == other or path.startswith(f"{other}.") or other.startswith(f"{path}."):
                    raise _fail(
                        source,
                        f"sweep.{axis.section}.{path}",
                        f"overlaps sweep.{section}.{other}; each setting is swept once",
                    )
            seen[path] = axis.section


def parse_sweep_spec(source: ScenarioSource, value: Any) -> SweepSpec:
    """Check the `sweep:` mapping; problems are one-line InputErrors naming its file and line."""
    if not isinstance(value, dict) or not value:
        raise _fail(source, "sweep", f"expected a mapping with any of: {', '.join(SECTIONS)}")
    unknown = [str(key) for key in value if key not in SECTIONS]
    if unknown:
        raise _fail(source, f"sweep.{unknown[0]}", f"unknown key; allowed: {', '.join(SECTIONS)}")
    axes: list[SweepAxis] = []
    seeds = None
    for section, section_value in value.items():
        if section == "grid":
            axes.extend(_grid_axes(source, section_value))
        elif section == "zip":
            axes.append(_zip_axis(source, section_value))
        else:
            seeds = _seeds(source, section_value)
    _check_disjoint(source, axes)
    return SweepSpec(tuple(axes), seeds)
