"""Reading scenario YAML safely: `extends:` bases, `--set` overrides, and line numbers by path."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sim.errors import InputError

MAX_EXTENDS_DEPTH = 16


@dataclass(slots=True)
class ScenarioSource:
    """A merged scenario document and where each dotted path was written (file, line)."""

    data: dict[str, Any]
    path: Path
    locations: dict[str, tuple[str, int | None]] = field(default_factory=dict)

    def location(self, dotted_path: str) -> tuple[str, int | None]:
        """The file and line of the closest written ancestor of `dotted_path`."""
        parts = dotted_path.split(".") if dotted_path else []
        while parts:
            key = ".".join(parts)
            if key in self.locations:
                return self.locations[key]
            parts.pop()
        return str(self.path), None


def _node_locations(
    node: yaml.Node, source: str, prefix: str, out: dict[str, tuple[str, int | None]]
) -> None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = f"{prefix}.{key_node.value}" if prefix else str(key_node.value)
            out[key] = (source, key_node.start_mark.line + 1)
            _node_locations(value_node, source, key, out)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            key = f"{prefix}.{index}" if prefix else str(index)
            out[key] = (source, item.start_mark.line + 1)
            _node_locations(item, source, key, out)


def _read_yaml(path: Path) -> tuple[Any, dict[str, tuple[str, int | None]]]:
    source = str(path)
    if path.is_dir():
        raise InputError("is a directory; expected a YAML file", source=source)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("file not found", source=source) from None
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text; expected YAML", source=source) from None
    except OSError as error:
        raise InputError(f"cannot read: {error.strerror}", source=source) from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        line = mark.line + 1 if mark is not None else None
        raise InputError(f"invalid YAML: {error.problem}", source=source, line=line) from None
    except yaml.YAMLError as error:
        raise InputError(f"invalid YAML: {error}", source=source) from None
    locations: dict[str, tuple[str, int | None]] = {}
    if node is not None:
        _node_locations(node, source, "", locations)
    return data, locations


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """`override` on top of `base`: mappings merge key by key, anything else replaces."""
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def load_source(path: Path, _depth: int = 0) -> ScenarioSource:
    """Load a scenario file, resolving `extends:` (a path relative to the file) recursively."""
    if _depth > MAX_EXTENDS_DEPTH:
        raise InputError(
            f"'extends' nests deeper than {MAX_EXTENDS_DEPTH} files (a cycle?)", source=str(path)
        )
    data, locations = _read_yaml(path)
    if data is None:
        raise InputError("empty file; expected a YAML mapping of scenario fields", source=str(path))
    if not isinstance(data, dict):
        raise InputError(
            f"top level is a {type(data).__name__}; expected a mapping of scenario fields",
            source=str(path),
            line=1,
        )
    extends = data.pop("extends", None)
    if extends is None:
        return ScenarioSource(data, path, locations)
    if not isinstance(extends, str) or not extends:
        line = locations.get("extends", (str(path), None))[1]
        raise InputError(
            f"'extends' must be a file path, got {extends!r}", source=str(path), line=line
        )
    base_path = (path.parent / extends).resolve()
    base = load_source(base_path, _depth + 1)
    locations.pop("extends", None)
    return ScenarioSource(deep_merge(base.data, data), path, {**base.locations, **locations})


def apply_overrides(source: ScenarioSource, assignments: list[str]) -> None:
    """Apply `a.b.c=value` assignments; values are parsed as YAML scalars (so 2 is an int)."""
    for assignment in assignments:
        dotted, separator, raw_value = assignment.partition("=")
        if not separator or not dotted or any(not part for part in dotted.split(".")):
            raise InputError(
                f"--set {assignment!r}: expected dotted.path=value, e.g. engine.block_size=32"
            )
        try:
            value = yaml.safe_load(raw_value) if raw_value else ""
        except yaml.YAMLError:
            value = raw_value
        parts = dotted.split(".")
        target: Any = source.data
        for position, part in enumerate(parts):
            last = position == len(parts) - 1
            if isinstance(target, list):
                if not part.isdigit() or int(part) >= len(target):
                    raise InputError(
                        f"--set {assignment!r}: {part!r} is not an index of a "
                        f"{len(target)}-item list"
                    )
                if last:
                    target[int(part)] = value
                else:
                    target = target[int(part)]
            elif isinstance(target, dict):
                if last:
                    target[part] = value
                else:
                    target = target.setdefault(part, {})
            else:
                raise InputError(f"--set {assignment!r}: {parts[position - 1]!r} is not a mapping")
        source.locations[dotted] = (f"--set {assignment}", None)
