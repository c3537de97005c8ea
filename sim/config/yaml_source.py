"""Reading scenario YAML safely (`extends:` bases, `--set` overrides, line numbers by path) and
writing resolved configs back as YAML."""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sim.costmodel import is_config_path
from sim.errors import InputError

# libyaml's emitter where PyYAML was built with it: the same text as the pure-Python one on every
# shipped scenario and sweep (tests/config/test_yaml_source.py), a third of its time (a run
# writes its resolved config; the pure-Python dump was ~2 % of a 1,000-request replay).
_SAFE_DUMPER: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def yaml_text(document: Any, *, dumper: type[yaml.SafeDumper] = _SAFE_DUMPER) -> str:
    """`document` as block YAML, keys in their order (yaml.safe_dump with sort_keys=False)."""
    return yaml.dump(document, Dumper=dumper, sort_keys=False)


MAX_EXTENDS_DEPTH = 16
# Scenario files are small and shallow; these bounds refuse pathological input (deep nesting,
# recursive anchors, alias "bombs") with a clear error instead of a crash or a hang.
MAX_NESTING_DEPTH = 64
MAX_NUM_NODES = 100_000
MAX_YAML_BYTES = 16 * 2**20
# Python refuses to convert longer decimal integers from text (sys.get_int_max_str_digits()).
MAX_INT_CHARS = 4000
_CONVERTED_SCALARS = frozenset({"bool", "int", "float", "timestamp"})


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


class _NodeWalk:
    """Records the line of every dotted path; refuses duplicate keys and runaway aliases."""

    def __init__(self, source: str, loader: yaml.SafeLoader) -> None:
        self.source = source
        self.loader = loader
        self.locations: dict[str, tuple[str, int | None]] = {}
        self.num_nodes = 0
        self.open_node_ids: set[int] = set()

    def fail(self, message: str, node: yaml.Node) -> InputError:
        return InputError(message, source=self.source, line=node.start_mark.line + 1)

    def visit(self, node: yaml.Node, prefix: str, depth: int = 0) -> None:
        self.num_nodes += 1
        if self.num_nodes > MAX_NUM_NODES:
            raise self.fail(
                f"more than {MAX_NUM_NODES} values once aliases are expanded; "
                "a scenario needs far fewer (an alias bomb?)",
                node,
            )
        if depth > MAX_NESTING_DEPTH:
            raise self.fail(f"nested deeper than {MAX_NESTING_DEPTH} levels", node)
        if id(node) in self.open_node_ids:
            raise self.fail("an alias refers to a mapping or list that contains it", node)
        if isinstance(node, yaml.ScalarNode):
            self._check_scalar(node)
            return
        self.open_node_ids.add(id(node))
        if isinstance(node, yaml.MappingNode):
            self._visit_mapping(node, prefix, depth)
        else:
            for index, item in enumerate(node.value):
                key = f"{prefix}.{index}" if prefix else str(index)
                self.locations[key] = (self.source, item.start_mark.line + 1)
                self.visit(item, key, depth + 1)
        self.open_node_ids.discard(id(node))

    def _check_scalar(self, node: yaml.ScalarNode) -> None:
        kind = node.tag.rsplit(":", 1)[-1]
        if kind == "int" and len(node.value) > MAX_INT_CHARS:
            raise self.fail(
                f"an integer written with {len(node.value)} characters; "
                f"at most {MAX_INT_CHARS} are read",
                node,
            )
        if kind in _CONVERTED_SCALARS:
            # An explicit tag (`!!int name`) makes PyYAML's converters fail with plain errors.
            try:
                self.loader.construct_object(node)
            except (ValueError, TypeError, KeyError, IndexError, AttributeError):
                raise self.fail(f"{node.value!r} is not a valid YAML {kind}", node) from None

    def _visit_mapping(self, node: yaml.MappingNode, prefix: str, depth: int) -> None:
        first_lines: dict[tuple[str, str], int] = {}
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if isinstance(key_node, yaml.ScalarNode):
                identity = (key_node.tag, key_node.value)
                if identity in first_lines:
                    raise InputError(
                        f"duplicate key {key_node.value!r} (first set on line "
                        f"{first_lines[identity]}); each key may appear once per mapping",
                        source=self.source,
                        line=line,
                    )
                first_lines[identity] = line
                key = f"{prefix}.{key_node.value}" if prefix else str(key_node.value)
                self.locations[key] = (self.source, line)
            else:
                key = prefix
            self.visit(key_node, key, depth + 1)
            self.visit(value_node, key, depth + 1)


def _check_nesting(text: str, source: str) -> None:
    # The composer recurses per level, so a deep document must be refused before composing.
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_NESTING_DEPTH:
                raise InputError(
                    f"nested deeper than {MAX_NESTING_DEPTH} levels",
                    source=source,
                    line=event.start_mark.line + 1 if event.start_mark else None,
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _yaml_error(error: yaml.YAMLError, text: str, source: str) -> InputError:
    """A PyYAML error as one line at its line number."""
    line = None
    if isinstance(error, yaml.MarkedYAMLError):
        problem = str(error.problem)
        if error.problem_mark is not None:
            line = error.problem_mark.line + 1
        if problem.startswith("could not determine a constructor"):
            problem += "; only plain YAML is read (no tags that build objects)"
    elif isinstance(error, yaml.reader.ReaderError):
        problem = f"character {error.character!r} is not allowed in YAML"
        line = text.count("\n", 0, error.position) + 1
    else:
        problem = str(error)
    return InputError(f"invalid YAML: {' '.join(problem.split())}", source=source, line=line)


def _parse_yaml(text: str, source: str) -> tuple[Any, dict[str, tuple[str, int | None]]]:
    """The document in `text` and the line of each dotted path.

    Syntax errors are PyYAML's; structures no scenario needs are InputErrors.
    """
    _check_nesting(text, source)
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, {}
        walk = _NodeWalk(source, loader)
        walk.visit(node, "")
        return loader.construct_document(node), walk.locations
    finally:
        loader.dispose()


def _read_yaml(path: Path) -> tuple[Any, dict[str, tuple[str, int | None]]]:
    source = str(path)
    if path.is_dir():
        raise InputError("is a directory; expected a YAML file", source=source)
    if path.exists() and not path.is_file():
        # A device or a pipe could be read forever.
        raise InputError("is not a regular file; expected a YAML file", source=source)
    if path.is_file() and path.stat().st_size > MAX_YAML_BYTES:
        raise InputError(
            f"{path.stat().st_size:,} bytes is more than the {MAX_YAML_BYTES // 2**20} MiB a "
            "scenario file may have; is this the right file?",
            source=source,
        )
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("file not found", source=source) from None
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text; expected YAML", source=source) from None
    except OSError as error:
        raise InputError(f"cannot read: {error.strerror}", source=source) from None
    try:
        return _parse_yaml(text, source)
    except yaml.YAMLError as error:
        raise _yaml_error(error, text, source) from None


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """`override` on top of `base`: mappings merge key by key, anything else replaces."""
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def load_source(path: Path, _chain: tuple[Path, ...] = ()) -> ScenarioSource:
    """Load a scenario file, resolving `extends:` (a path relative to the file) recursively."""
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
    line = locations.pop("extends", (str(path), None))[1]
    if not isinstance(extends, str) or not extends:
        raise InputError(
            f"extends: {extends!r} is not allowed; expected the path of a base scenario file",
            source=str(path),
            line=line,
        )
    chain = (*_chain, path.resolve())
    base_path = (path.parent / extends).resolve()
    if base_path in chain:
        cycle = " -> ".join(link.name for link in (*chain[chain.index(base_path) :], base_path))
        raise InputError(
            f"extends: {extends!r} makes a cycle: {cycle}", source=str(path), line=line
        )
    if len(chain) > MAX_EXTENDS_DEPTH:
        raise InputError(
            f"extends: chains more than {MAX_EXTENDS_DEPTH} files", source=str(path), line=line
        )
    if not base_path.is_file():
        if base_path.is_dir():
            problem = "is a directory"
        else:
            problem = "is not a regular file" if base_path.exists() else "does not exist"
        raise InputError(
            f"extends: {extends!r} {problem}; expected a base scenario file "
            f"(looked at {base_path})",
            source=str(path),
            line=line,
        )
    base = load_source(base_path, chain)
    if base_path.parent != path.resolve().parent:
        rebase_relative_paths(base.data, base_path.parent, path.resolve().parent)
    return ScenarioSource(deep_merge(base.data, data), path, {**base.locations, **locations})


# The fields holding a file path, relative to the file that sets them: (dotted path, whether a
# value there is a path rather than a name).
_PATH_FIELDS: tuple[tuple[tuple[str, ...], Callable[[str, dict[str, Any]], bool]], ...] = (
    (("cost_model",), lambda value, _: value.endswith((".yaml", ".yml"))),
    (("deployment", "model"), lambda value, _: is_config_path(value)),
    (("workload", "source", "path"), lambda _, holder: holder.get("kind") == "trace"),
)


def rebase_relative_paths(data: dict[str, Any], from_dir: Path, to_dir: Path) -> None:
    """Rewrite the relative file paths a base file set (relative to `from_dir`, its folder) to
    be relative to `to_dir`, the folder of the file extending it, against which a scenario's
    paths are resolved."""
    for keys, is_path in _PATH_FIELDS:
        holder: Any = data
        for key in keys[:-1]:
            holder = holder.get(key) if isinstance(holder, dict) else None
        if not isinstance(holder, dict):
            continue
        value = holder.get(keys[-1])
        if isinstance(value, str) and is_path(value, holder) and not Path(value).is_absolute():
            holder[keys[-1]] = os.path.relpath(from_dir / value, to_dir)


def _override_value(raw_value: str, assignment: str) -> Any:
    """A `--set` value read as YAML (so 2 is an int), or the raw text when it is not YAML."""
    if not raw_value:
        return ""
    try:
        return _parse_yaml(raw_value, override_label(assignment))[0]
    except yaml.YAMLError:
        return raw_value


def override_label(assignment: str) -> str:
    """How errors name a `--set` assignment: as typed, or quoted if it spans lines."""
    return f"--set {assignment}" if assignment.isprintable() else f"--set {assignment!r}"


def apply_overrides(source: ScenarioSource, assignments: list[str]) -> None:
    """Apply `a.b.c=value` assignments; values are parsed as YAML scalars (so 2 is an int)."""
    for assignment in assignments:
        dotted, separator, raw_value = assignment.partition("=")
        if not separator or not dotted or any(not part for part in dotted.split(".")):
            raise InputError(
                f"--set {assignment!r}: expected dotted.path=value, e.g. engine.block_size=32"
            )
        value = _override_value(raw_value, assignment)
        parts = dotted.split(".")
        target: Any = source.data
        for position, part in enumerate(parts):
            last = position == len(parts) - 1
            if isinstance(target, list):
                index = int(part) if part.isdecimal() and len(part) < 10 else len(target)
                if index >= len(target):
                    raise InputError(
                        f"--set {assignment!r}: {part!r} is not an index of a "
                        f"{len(target)}-item list"
                    )
                if last:
                    target[index] = value
                else:
                    target = target[index]
            elif isinstance(target, dict):
                if last:
                    target[part] = value
                else:
                    target = target.setdefault(part, {})
            else:
                raise InputError(f"--set {assignment!r}: {parts[position - 1]!r} is not a mapping")
        source.locations[dotted] = (override_label(assignment), None)
