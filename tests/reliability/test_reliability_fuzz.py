"""Property-based fuzzing of the scenario loader and the replay harnesses: whatever the input, the
only error that escapes is a one-line InputError (or the input is accepted).

Inputs: random bytes, YAML-shaped text, random documents, a valid scenario with fields replaced
or removed, random `--set` assignments; for replays, random op scripts and the fidelity
scripts with one field broken. Integers stay small where the input sizes work (pool size, step
counts): huge-but-valid sizes are slow, not wrong.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.config import load_scenario
from sim.errors import InputError
from sim.kvcache import HASH_ALGOS
from sim.replay.cache_replay import replay_cache
from sim.replay.engine_replay import replay_engine

FIDELITY_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "fidelity"
FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

SEED_SCENARIO: dict[str, Any] = {
    "name": "fuzz-case",
    "description": "every section set, so mutations reach every model",
    "seed": 3,
    "duration_s": 30.0,
    "warmup_s": 5.0,
    "engine": {
        "block_size": 16,
        "num_gpu_blocks": 4000,
        "max_num_batched_tokens": 2048,
        "max_num_seqs": 64,
        "hash_algo": "xxhash",
    },
    "deployment": {"model": "llama-3.1-8b", "gpu": "h100", "tp": 1},
    "cost_model": "constant:0.01",
    "workload": {
        "source": {
            "kind": "mix",
            "components": [
                {
                    "weight": 2.0,
                    "source": {
                        "kind": "chat",
                        "turns_per_session": {"dist": "uniform", "low": 1.0, "high": 4.0},
                        "common": {"system_prompt_tokens": 512},
                        "tenants": [{"name": "acme", "cache_salt": "acme"}, {"name": "globex"}],
                    },
                },
                {
                    "weight": 1.0,
                    "source": {
                        "kind": "rag",
                        "top_k": 3,
                        "document_tokens": {"dist": "lognormal", "median": 300.0, "sigma": 0.5},
                    },
                },
            ],
        },
        "arrivals": {
            "process": "piecewise",
            "pieces": [
                {"duration_s": 10.0, "rate_per_s": 2.0},
                {"duration_s": 5.0, "rate_per_s": 0.0},
            ],
        },
        "num_arrivals": 100,
    },
    "outputs": {"events": False, "scrape_interval_s": 2.0},
}

# Values YAML can write that are wrong somewhere: edges, YAML 1.1 look-alikes, paths, structures.
yaml_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 70),
    st.sampled_from([2**63, -(2**63), 10**40]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["1e3", "no", "yes", "../up", "a/b", "", "auto", "chat", "trace", "fixed"]),
    st.text(max_size=8),
)
yaml_values = st.recursive(
    yaml_scalars,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(["kind", "dist", "process", "name", "x"]), children)
    ),
    max_leaves=8,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path (dict keys and list indexes) in a document."""
    found: list[tuple[Any, ...]] = []
    children = node.items() if isinstance(node, dict) else enumerate(node)
    for key, child in children:
        found.append((*prefix, key))
        if isinstance(child, dict | list):
            found.extend(_paths(child, (*prefix, key)))
    return found


SEED_PATHS = _paths(SEED_SCENARIO)


@st.composite
def mutated_scenario(draw) -> dict[str, Any]:
    """The seed scenario with one to three fields replaced, removed or given an unknown sibling."""
    document = copy.deepcopy(SEED_SCENARIO)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(SEED_PATHS))
        parent = document
        try:
            for key in path[:-1]:
                parent = parent[key]
            parent[path[-1]]  # noqa: B018 - an earlier mutation may have removed the path
        except (KeyError, IndexError, TypeError):
            continue
        action = draw(st.sampled_from(["replace", "remove", "add_unknown"]))
        if action == "replace":
            parent[path[-1]] = draw(yaml_values)
        elif action == "remove":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=6))] = draw(yaml_values)
    return document


# Pieces of YAML syntax, so random text reaches the parser's corners, not just its first check.
YAML_PIECES = (
    "name: a\n",
    "duration_s: 1.0\n",
    "engine:\n",
    "  block_size: 16\n",
    "workload:\n",
    "  arrivals: {process: poisson, rate_per_s: 1.0}\n",
    "- ",
    ": ",
    "{",
    "}",
    "[",
    "]",
    ", ",
    "\n",
    "\n  ",
    "\t",
    "'",
    '"',
    "&a ",
    "*a ",
    "<<: *a\n",
    "!!python/object/apply:os.system [x]",
    "!!binary ",
    "!!int ",
    "? ",
    "|\n",
    ">-\n",
    "---\n",
    "...\n",
    "%YAML 1.1\n",
    "# c\n",
    "1e3",
    ".nan",
    ".inf",
    "~",
    "0x1f",
    "1_000",
    "12:30",
    "extends: x.yaml\n",
    "\x00",
    "\ufeff",
)
yaml_like_text = st.lists(st.sampled_from(YAML_PIECES), max_size=20).map("".join)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("config_fuzz")


def _load(path: Path, overrides: list[str] | None = None) -> None:
    """Load a scenario; accepted, or a one-line InputError."""
    try:
        load_scenario(path, overrides or [])
    except InputError as error:
        assert "\n" not in str(error)


def test_seed_scenario_is_valid(tmp_path):
    """The fuzzers start from a scenario that loads, so their mutations are what fails."""
    path = tmp_path / "seed.yaml"
    path.write_text(yaml.safe_dump(SEED_SCENARIO))
    assert load_scenario(path).scenario.workload.num_arrivals == 100


# What the loader is fed, as file bytes: any bytes; random sequences of YAML syntax (anchors,
# tags, flow collections, documents, tabs); any YAML document (scalars, lists, mappings at the
# top level); a valid scenario with fields replaced by wrong values, removed, or unknown keys.
LOADER_FILES = {
    "bytes": st.binary(max_size=300),
    "text": yaml_like_text.map(str.encode),
    "document": yaml_values.map(lambda document: yaml.safe_dump(document).encode()),
    "mutated": mutated_scenario().map(
        lambda document: yaml.safe_dump(document, allow_unicode=True).encode()
    ),
}


@pytest.mark.parametrize("kind", sorted(LOADER_FILES))
@FUZZ
@given(data=st.data())
def test_scenario_loader_fuzzed_file(kind, data, scratch):
    """A fuzzed scenario file of each kind: it loads, or fails with one InputError line."""
    path = scratch / f"{kind}.yaml"
    path.write_bytes(data.draw(LOADER_FILES[kind]))
    _load(path)


set_assignments = st.one_of(
    st.text(max_size=20),
    st.tuples(
        st.sampled_from(SEED_PATHS).map(lambda path: ".".join(map(str, path))),
        st.sampled_from(["=", "==", ".x=", "."]),
        yaml_like_text,
    ).map("".join),
)


@FUZZ
@given(assignments=st.lists(set_assignments, max_size=3))
def test_scenario_loader_random_set_overrides(assignments, scratch):
    """`--set` assignments of any text, or of YAML pieces to real paths, on a valid scenario."""
    path = scratch / "base.yaml"
    if not path.exists():
        path.write_text(yaml.safe_dump(SEED_SCENARIO))
    _load(path, assignments)


# Replay values: wrong types and edges, but no huge sizes (a 2**63-block pool is slow, not wrong).
replay_junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
    st.lists(st.integers(-2, 70), max_size=4),
    st.dictionaries(st.sampled_from(["name", "id", "path", "x"]), st.integers(-1, 3) | st.text()),
)
request_ids = st.sampled_from(["A", "B", "C"])
tokens = st.lists(st.integers(0, 40), max_size=48)

CACHE_OP_FIELDS = {
    "config": {
        "num_blocks": st.integers(2, 64),
        "block_size": st.sampled_from([4, 16]),
        "hash_algo": st.sampled_from(HASH_ALGOS),
        "max_model_len": st.integers(16, 256),
    },
    "arrive": {"id": request_ids, "prompt": tokens, "max_tokens": st.integers(1, 16)},
    "schedule": {"id": request_ids, "num_new_tokens": st.none() | st.integers(0, 48)},
    "output": {"id": request_ids, "tokens": st.lists(st.integers(0, 40), max_size=4)},
    "run": {"id": request_ids, "outputs": st.lists(st.integers(0, 40), max_size=4)},
    "preempt": {"id": request_ids},
    "finish": {"id": request_ids},
    "reset_prefix_cache": {},
    "snapshot": {},
}
ENGINE_OP_FIELDS = {
    "config": {
        "num_blocks": st.integers(2, 64),
        "block_size": st.sampled_from([4, 16]),
        "max_num_batched_tokens": st.integers(8, 128),
        "max_num_seqs": st.integers(1, 8),
        "max_model_len": st.integers(16, 256),
        "policy": st.sampled_from(["fcfs", "priority"]),
        "enable_chunked_prefill": st.booleans(),
    },
    "add": {
        "id": request_ids,
        "prompt": tokens,
        "outputs": st.lists(st.integers(0, 40), max_size=6),
        "priority": st.integers(0, 3),
    },
    "step": {"n": st.integers(1, 4)},
    "run_until_idle": {"max_steps": st.integers(1, 200)},
    "abort": {"id": request_ids},
}


@st.composite
def op_line(draw, fields_of: dict[str, dict[str, st.SearchStrategy]]) -> str:
    """One op with plausible fields, maybe one broken; or an unknown op; or junk text."""
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.text(max_size=30).filter(lambda text: "\n" not in text and "\r" not in text))
    name = draw(st.sampled_from(sorted(fields_of)))
    op: dict[str, Any] = {"op": name if kind > 1 else draw(st.text(max_size=6))}
    op.update({key: draw(strategy) for key, strategy in fields_of[name].items()})
    if draw(st.booleans()):
        key = draw(st.sampled_from([*op, "unknown"]))
        op[key] = draw(replay_junk)
    return json.dumps(op)


def _replay(replay, path: Path) -> None:
    """Replay every line; accepted, or a one-line InputError naming the file."""
    try:
        for _ in replay(path):
            pass
    except InputError as error:
        assert error.source == str(path)
        assert "\n" not in str(error)


# Random op scripts of each harness: configs anywhere, unknown ids (aborts of unknown ids for
# the engine), broken fields, junk lines.
REPLAYS = {"cache": (replay_cache, CACHE_OP_FIELDS), "engine": (replay_engine, ENGINE_OP_FIELDS)}


@pytest.mark.parametrize("harness", sorted(REPLAYS))
@FUZZ
@given(data=st.data())
def test_replay_random_ops(harness, data, scratch):
    """A random op script for each replay harness: replayed, or one InputError line."""
    replay, fields_of = REPLAYS[harness]
    lines = data.draw(st.lists(op_line(fields_of), max_size=12))
    path = scratch / f"{harness}_ops.jsonl"
    path.write_text("\n".join(lines) + "\n")
    _replay(replay, path)


def _fidelity_scripts(folder: str) -> list[list[dict[str, Any]]]:
    return [
        [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        for path in sorted((FIDELITY_DIR / folder).glob("*.jsonl"))
    ]


@st.composite
def broken_script(draw, scripts: list[list[dict[str, Any]]]) -> str:
    """A fidelity script with one op's field replaced or removed, or one line dropped or
    repeated."""
    script = copy.deepcopy(draw(st.sampled_from(scripts)))
    index = draw(st.integers(0, len(script) - 1))
    action = draw(st.sampled_from(["replace", "remove", "drop_line", "repeat_line"]))
    op = script[index]
    if action == "replace":
        op[draw(st.sampled_from(sorted(op)))] = draw(replay_junk)
    elif action == "remove":
        del op[draw(st.sampled_from(sorted(op)))]
    elif action == "drop_line":
        del script[index]
    else:
        script.insert(index, copy.deepcopy(op))
    for line in script:
        if line.get("op") == "run_until_idle" and "max_steps" not in line:
            line["max_steps"] = 300
    return "\n".join(json.dumps(line) for line in script) + "\n"


@pytest.mark.parametrize(
    ("folder", "replay"), [("traces", replay_cache), ("workloads", replay_engine)]
)
def test_fidelity_scripts_with_one_fault(folder, replay, scratch):
    """The fidelity scripts, each with one fault: only InputError escapes."""
    scripts = _fidelity_scripts(folder)
    assert len(scripts) >= 5

    @FUZZ
    @given(text=broken_script(scripts))
    def check(text: str) -> None:
        path = scratch / f"broken_{folder}.jsonl"
        path.write_text(text)
        _replay(replay, path)

    check()
