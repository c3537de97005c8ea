"""The compiled step loop (sim/engine/compiled.py) writes the same result files as the Python loop.

Each scenario (30 simulated seconds on the H100 profile of Llama-3.1-8B, seed 3, events on)
runs twice on the native core through `run_scenario`: once with the replicas' step loops in C++
(the default where `compiled_loop_covers` says so) and once with EngineCore's Python loop, which
the test forces by patching `compiled_loop_covers`. Every result file must be byte-identical.
The scenarios cover what the compiled loop must order exactly like SimPy: several replicas
behind each router (their steps, finishes and block events interleave), chat sessions (a
finished turn releases the next one), async and sync scheduling, preemption, the front end's
queue limits (read at every submit), the front end on and off, and a trace replay on eight
replicas. The expected counts pin that each scenario reaches the situation it is named for.
"""

from __future__ import annotations

import warnings
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
import simpy
from engine_fakes import LINEAR, CollectingRecorder, linear_fitted_on
from engine_specs import RandomSpecs, engine_config, open_spec, random_specs, tokens
from hypothesis import given, settings
from hypothesis import strategies as st
from run_files import assert_same_run_files
from test_fast_path_equivalence import PROFILE, chat

import sim.engine.core as core_module
from sim.config import Scenario
from sim.costmodel import NO_FRONTEND, FrontEnd
from sim.engine import EngineCore, request_from_spec, simulate
from sim.engine.cluster import Cluster
from sim.engine.compiled import CompiledReplicas
from sim.routing import make_router
from sim.runner import RunResult, run_scenario
from workloads.spec import RequestSpec

REPO = Path(__file__).resolve().parents[2]
ARXIV = REPO / "tests" / "fixtures" / "traces" / "mooncake" / "arxiv_mooncake_trace_first1000.jsonl"


SCENARIOS: dict[str, dict[str, Any]] = {
    "four-replicas-round-robin": {
        "deployment": {"replicas": 4, "router": {"policy": "round_robin"}},
        "engine": {"num_gpu_blocks": 300, "max_model_len": 4096},
        "workload": chat(4.0),
    },
    "three-replicas-session-affinity": {
        "deployment": {"replicas": 3, "router": {"policy": "session_affinity"}},
        "engine": {"num_gpu_blocks": 300, "max_model_len": 4096},
        "workload": chat(3.0),
    },
    "preempting-no-frontend": {
        "frontend": "none",
        "engine": {"num_gpu_blocks": 140, "max_model_len": 2048},
        "workload": chat(2.0),
    },
    "queue-limits": {
        "engine": {
            "num_gpu_blocks": 600,
            "max_model_len": 8192,
            "max_num_queued_reqs": 16,
            "max_num_queued_tokens": 40000,
        },
        "workload": chat(2.0),
    },
    "trace-eight-replicas": {
        "duration_s": 20,
        "deployment": {"replicas": 8, "router": {"policy": "round_robin"}},
        "workload": {"source": {"kind": "trace", "format": "mooncake", "path": str(ARXIV)}},
    },
}

# (requests finished, preemptions, rejected) from summary.json, by scenario and async scheduling.
EXPECTED_COUNTS = {
    ("four-replicas-round-robin", True): (361, 77, 0),
    ("four-replicas-round-robin", False): (366, 72, 0),
    ("three-replicas-session-affinity", True): (275, 59, 0),
    ("preempting-no-frontend", True): (115, 49, 0),
    ("preempting-no-frontend", False): (116, 46, 0),
    ("queue-limits", True): (152, 23, 66),
    ("queue-limits", False): (151, 26, 66),
    # The arXiv trace's three prompts over 32k tokens fit Llama-3.1-8B's 131,072-token context.
    ("trace-eight-replicas", True): (114, 0, 0),
}


def run_with_loop(
    name: str,
    async_scheduling: bool,
    compiled: bool,
    run_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> RunResult:
    """Run scenario `name` with every replica on the compiled or the Python step loop."""
    taken_on: list[int] = []
    add = CompiledReplicas.add

    def counting_add(self: CompiledReplicas, *args: Any) -> int:
        taken_on.append(1)
        return add(self, *args)

    with monkeypatch.context() as patch:
        patch.setattr(CompiledReplicas, "add", counting_add)
        if not compiled:
            patch.setattr(core_module, "compiled_loop_covers", lambda *_args: False)
        scenario = SCENARIOS[name]
        data = {
            "name": name,
            "seed": 3,
            "duration_s": 30,
            "cost_model": PROFILE,
            "outputs": {"events": True},
            **scenario,
            "engine": {**scenario.get("engine", {}), "async_scheduling": async_scheduling},
        }
        result = run_scenario(Scenario.model_validate(data), run_dir, run_dir=run_dir)
    replicas = SCENARIOS[name].get("deployment", {}).get("replicas", 1)
    assert len(taken_on) == (replicas if compiled else 0)
    return result


@pytest.mark.parametrize(
    ("name", "async_scheduling"),
    [
        key
        if key in {("four-replicas-round-robin", True), ("queue-limits", False)}
        else pytest.param(*key, marks=pytest.mark.slow)
        for key in EXPECTED_COUNTS
    ],
)
def test_compiled_and_python_loops_write_identical_files(
    name: str, async_scheduling: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compiled = run_with_loop(name, async_scheduling, True, tmp_path / "compiled", monkeypatch)
    python = run_with_loop(name, async_scheduling, False, tmp_path / "python", monkeypatch)

    assert_same_run_files(compiled.run_dir, python.run_dir)
    summary = compiled.summary
    counts = (summary["num_requests"], summary["num_preemptions"], summary["num_rejected"])
    assert counts == EXPECTED_COUNTS[name, async_scheduling]


def test_ties_between_replicas_keep_the_python_loops_order() -> None:
    # Two replicas behind round robin get identical requests at the same instants, so their
    # steps end at exactly the same times: the recorder must see them in the order SimPy fires
    # the Python loop's events (replica 0 first: it was woken first), step for step.
    def run(compiled: bool) -> CollectingRecorder:
        recorder = CollectingRecorder()
        specs = [
            open_spec(f"r{index}", 0.5 * (index // 2), tokens(1000 * (index % 2), 40), 5)
            for index in range(8)
        ]
        original = core_module.compiled_loop_covers
        if not compiled:
            core_module.compiled_loop_covers = lambda *_args: False
        try:
            simulate(specs, engine_config(), LINEAR, recorder=recorder, num_replicas=2)
        finally:
            core_module.compiled_loop_covers = original
        return recorder

    compiled, python = run(True), run(False)
    assert [(s.replica, s.started_at) for s in compiled.steps] == [
        (s.replica, s.started_at) for s in python.steps
    ]
    assert list(compiled.requests) == list(python.requests)
    # 40 steps, 20 per replica, each ending at the same instant as the other replica's.
    ends = [step.started_at + step.duration_s for step in compiled.steps]
    assert (len(ends), len(set(ends))) == (40, 20)
    assert [step.replica for step in compiled.steps] == [0, 1] * 20


def test_out_of_range_warning_is_issued_once_with_the_models_text() -> None:
    # A model fitted on steps of at most 100 tokens sees a 40-token prefill and then a
    # 200-token one: the compiled loop warns once, with the model's own message.
    model = linear_fitted_on(num_tokens=(1, 100))
    specs = [open_spec("a", 0.0, tokens(0, 40), 2), open_spec("b", 1.0, tokens(100, 200), 2)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        simulate(specs, engine_config(), model, recorder=CollectingRecorder())
    messages = [str(warning.message) for warning in caught]
    assert messages == [
        "test profile: step outside the range it was fitted on (num_tokens=200 not in "
        "[1, 100]); the prediction is an extrapolation (warned once per model)"
    ]


def test_an_engine_fed_before_and_while_the_clock_runs_steps_as_the_python_loop() -> None:
    # One EngineCore (no cluster): two requests are submitted before env.run(), three more by
    # a process at 0.05 s, 0.05 s and 0.3 s, while a sync step is on the GPU or the engine idles.
    def run(compiled: bool) -> CollectingRecorder:
        env = simpy.Environment()
        recorder = CollectingRecorder()
        engine = EngineCore(env, engine_config(), LINEAR, recorder=recorder, compiled_loop=compiled)
        assert (engine._loop is not None) is compiled

        def submit(name: str, first_token: int) -> None:
            spec = open_spec(name, float(env.now), tokens(first_token, 40), 4)
            engine.submit(request_from_spec(spec, engine.hasher, float(env.now)))

        def later() -> Generator[simpy.Event, Any, None]:
            yield env.timeout(0.05)
            submit("c", 200)
            submit("d", 300)
            yield env.timeout(0.25)
            submit("e", 400)

        submit("a", 0)
        submit("b", 100)
        env.process(later())
        env.run()
        return recorder

    compiled, python = run(True), run(False)
    assert compiled.steps == python.steps
    assert compiled.requests == python.requests
    assert compiled.block_events == python.block_events
    assert (len(compiled.steps), len(compiled.requests)) == (11, 5)


@st.composite
def random_runs(draw: st.DrawFn) -> tuple[list[RequestSpec], dict[str, Any]]:
    """Open-loop requests and two-turn sessions on a coarse time grid (many same-time
    arrivals and step ends), prompts sharing prefixes, a cache small enough to preempt."""
    specs = random_specs(
        draw,
        RandomSpecs(
            num_first_turns=st.integers(1, 14),
            gaps_s=st.sampled_from([0.0, 0.0, 0.01, 0.02, 0.25]),
            prompt_lengths=st.sampled_from([16, 40, 90]),
            num_outputs=st.integers(1, 6),
            num_second_turn_outputs=st.just(2),
            think_times_s=st.sampled_from([0.0, 0.01]),
        ),
    )
    options = {
        "num_replicas": draw(st.integers(1, 3)),
        "router": draw(
            st.sampled_from(["round_robin", "least_loaded", "prefix_aware", "session_affinity"])
        ),
        "async_scheduling": draw(st.booleans()),
        "num_gpu_blocks": draw(st.sampled_from([12, 20, 65])),
        "max_num_seqs": draw(st.sampled_from([2, 256])),
    }
    return specs, options


def run_loop(
    specs: list[RequestSpec],
    options: dict[str, Any],
    compiled: bool,
    frontend: FrontEnd = NO_FRONTEND,
) -> CollectingRecorder:
    """simulate() with events on, on the compiled or the Python loop, behind `frontend`."""
    recorder = CollectingRecorder()
    config = engine_config(
        num_gpu_blocks=options["num_gpu_blocks"],
        max_model_len=160,
        max_num_seqs=options["max_num_seqs"],
        async_scheduling=options["async_scheduling"],
    )
    simulate(
        specs,
        config,
        LINEAR,
        recorder=recorder,
        num_replicas=options["num_replicas"],
        router=make_router(options["router"]),
        compiled_loop=compiled,
        frontend=frontend,
    )
    return recorder


@settings(max_examples=60, deadline=None)
@given(random_runs())
def test_compiled_and_python_loops_hand_the_recorder_the_same_hooks(
    run: tuple[list[RequestSpec], dict[str, Any]],
) -> None:
    specs, options = run
    assert_same_hooks(run_loop(specs, options, True), run_loop(specs, options, False))


def assert_same_hooks(first: CollectingRecorder, second: CollectingRecorder) -> None:
    """Two recorders were handed the same steps, request records and block events."""
    assert first.steps == second.steps
    assert list(first.requests.items()) == list(second.requests.items())
    assert first.block_events == second.block_events


# Ingress grows with the prompt, so a burst's requests wait for its slowest one.
BURSTY_FRONTEND = FrontEnd(request_s=0.004, per_prompt_token_s=5e-5, first_token_s=0.002)


@settings(max_examples=40, deadline=None)
@given(random_runs())
def test_front_end_bursts_held_in_cpp_run_as_simpys_own_events(
    run: tuple[list[RequestSpec], dict[str, Any]],
) -> None:
    # Same-time arrivals and turns released by finishes in one step reach the front end at one
    # instant: their burst's close and submit are held in C++ while the cluster drives the
    # clock (compiled or Python loop alike), and are SimPy events under env.run().
    specs, options = run
    driven = run_loop(specs, options, True, BURSTY_FRONTEND)
    python_loop = run_loop(specs, options, False, BURSTY_FRONTEND)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Cluster, "run_clock", lambda cluster: cluster.compiled_replicas.env.run())
        by_simpy = run_loop(specs, options, True, BURSTY_FRONTEND)
    for other in (python_loop, by_simpy):
        assert_same_hooks(driven, other)


def test_the_clock_run_by_the_cluster_and_by_simpy_write_identical_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # simulate() runs the clock itself (Cluster.run_clock: the compiled wakes run without a
    # SimPy event each); SimPy's own env.run() hands every wake to SimPy as an event instead.
    # Four replicas with chat sessions and the front end on: the same files either way.
    driven = run_with_loop(
        "four-replicas-round-robin", True, True, tmp_path / "driven", monkeypatch
    )
    with monkeypatch.context() as patch:
        patch.setattr(Cluster, "run_clock", lambda cluster: cluster.compiled_replicas.env.run())
        handed = run_with_loop(
            "four-replicas-round-robin", True, True, tmp_path / "handed", monkeypatch
        )

    assert_same_run_files(driven.run_dir, handed.run_dir)
    assert driven.summary["num_requests"] == 361
