"""Scenario files: `extends:` merging, `--set` overrides, run ids, JSON Schema, YAML 1.1 hints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic_core import PydanticCustomError

from sim.cli import main
from sim.config import DeploymentSettings, EngineSettings, Scenario, StrictModel, load_scenario
from sim.config.workload import accepted_by_workloads
from sim.errors import InputError
from workloads.api import WorkloadError

BASE = """\
name: base-chat
seed: 1
duration_s: 60
engine: {block_size: 16, max_num_seqs: 64}
deployment: {model: llama-3.1-8b, gpu: h100}
workload:
  source: {kind: chat, tenants: [{name: a}, {name: b}]}
  arrivals: {process: poisson, rate_per_s: 2}
"""


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(text)
    return path


def test_extends_merges_mappings_and_replaces_lists(tmp_path: Path) -> None:
    # The child changes one engine field and the tenants list; everything else comes from base.
    write(tmp_path, "base.yaml", BASE)
    child = write(
        tmp_path,
        "child.yaml",
        "extends: base.yaml\nname: child\nengine: {block_size: 32}\n"
        "workload:\n  source: {kind: chat, tenants: [{name: c}]}\n",
    )
    scenario = load_scenario(child).scenario
    assert scenario.name == "child"
    assert (scenario.engine.block_size, scenario.engine.max_num_seqs) == (32, 64)
    assert [tenant.name for tenant in scenario.workload.source.tenants] == ["c"]
    assert scenario.workload.arrivals.rate_per_s == 2.0


def test_set_overrides_parse_yaml_scalars_and_list_indexes(tmp_path: Path) -> None:
    path = write(tmp_path, "base.yaml", BASE)
    scenario = load_scenario(
        path,
        ["engine.block_size=64", "workload.source.tenants.1.name=z", "engine.policy=priority"],
    ).scenario
    assert scenario.engine.block_size == 64  # an int, not the string "64"
    assert scenario.engine.policy == "priority"
    assert [tenant.name for tenant in scenario.workload.source.tenants] == ["a", "z"]


def test_run_id_is_a_hash_of_the_resolved_config(tmp_path: Path) -> None:
    path = write(tmp_path, "base.yaml", BASE)
    first = load_scenario(path).scenario
    assert first.run_id() == load_scenario(path).scenario.run_id()
    assert len(first.run_id()) == 12
    # Writing a default explicitly resolves to the same config, so to the same run.
    assert load_scenario(path, ["engine.watermark=0.0"]).scenario.run_id() == first.run_id()
    assert load_scenario(path, ["engine.watermark=0.1"]).scenario.run_id() != first.run_id()


def test_cuda_graphs_is_in_the_run_id_only_when_turned_off(tmp_path: Path) -> None:
    """`deployment.cuda_graphs` (default true) came later: at its default it stays out of the
    resolved config, so older scenarios keep their run ids; false is a different run."""
    path = write(tmp_path, "base.yaml", BASE)
    first = load_scenario(path).scenario
    assert "cuda_graphs" not in first.resolved()["deployment"]
    explicit = load_scenario(path, ["deployment.cuda_graphs=true"]).scenario
    assert explicit.run_id() == first.run_id()
    eager = load_scenario(path, ["deployment.cuda_graphs=false"]).scenario
    assert eager.resolved()["deployment"]["cuda_graphs"] is False
    assert eager.run_id() != first.run_id()


def test_an_error_in_a_base_file_names_that_file_and_line(tmp_path: Path) -> None:
    # Line 4 of base.yaml has an unknown engine key; the child that extends it is what was run.
    write(tmp_path, "base.yaml", BASE.replace("max_num_seqs: 64", "max_num_sequences: 64"))
    child = write(tmp_path, "child.yaml", "extends: base.yaml\nname: child\n")
    with pytest.raises(InputError) as raised:
        load_scenario(child)
    message = str(raised.value)
    assert f"{tmp_path / 'base.yaml'}:4:" in message
    assert "max_num_sequences" in message and "max_num_seqs" in message


def test_yaml_1_1_exponent_without_a_dot_is_explained(tmp_path: Path) -> None:
    # YAML 1.1 reads 1e3 as the string "1e3", so an integer field gets text.
    path = write(tmp_path, "base.yaml", BASE.replace("max_num_seqs: 64", "max_num_seqs: 1e3"))
    with pytest.raises(InputError, match="YAML 1.1"):
        load_scenario(path)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        # 1e400 is text in YAML 1.1 too, but its float is inf, which no field takes: the hint
        # says it is too large instead of suggesting `inf`.
        (
            "duration_s=1e400",
            "--set duration_s=1e400: duration_s: '1e400' is not allowed: expected a number "
            "('1e400' is beyond the largest number a float holds, about 1.8e308)",
        ),
        # 1e300 GiB: its byte count overflowed the tier's sizing (a traceback); now its bound.
        (
            "engine.kv_offloading_size=1.0e+300",
            "--set engine.kv_offloading_size=1.0e+300: engine.kv_offloading_size: 1e+300 is not "
            "allowed: Input should be less than or equal to 1048576",
        ),
    ],
)
def test_a_number_past_what_a_field_takes_is_one_clear_line(
    tmp_path: Path, override: str, message: str
) -> None:
    path = write(tmp_path, "base.yaml", BASE)
    with pytest.raises(InputError) as raised:
        load_scenario(path, [override])
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("distribution", "message"),
    [
        # The number branch of the union refuses the mapping by its type alone; the lognormal
        # branch, which took it, names the field inside that is wrong.
        (
            "{dist: lognormal, median: -1, sigma: 0.5}",
            "base.yaml:7: workload.source.user_message_tokens.median: -1 is not allowed: Input "
            "should be greater than 0",
        ),
        (
            "{dist: exponential, mean: 0}",
            "base.yaml:7: workload.source.user_message_tokens.mean: 0 is not allowed: Input "
            "should be greater than 0",
        ),
        # Neither branch takes a string: both types are named.
        ("lots", "workload.source.user_message_tokens: 'lots' is not allowed: expected"),
    ],
)
def test_a_bad_distribution_names_the_field_inside_it(
    tmp_path: Path, distribution: str, message: str
) -> None:
    source = "{kind: chat, user_message_tokens: " + distribution + "}"
    text = BASE.replace("{kind: chat, tenants: [{name: a}, {name: b}]}", source)
    path = write(tmp_path, "base.yaml", text)
    with pytest.raises(InputError) as raised:
        load_scenario(path)
    assert message in str(raised.value)
    assert "more problem" not in str(raised.value)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["deployment.tp=3"],
            "deployment.tp: 3 is not allowed for Llama-3.1-8B (32 attention heads, 8 KV heads): "
            "vLLM needs tp to divide the 32 attention heads and the MLP width 14336, and to "
            "divide the 8 KV heads or be a multiple of 8; allowed: 1, 2, 4, 8, 16, 32",
        ),
        (
            ["deployment.tp=64"],
            "deployment.tp: 64 is not allowed for Llama-3.1-8B (32 attention heads, 8 KV heads)",
        ),
        (
            ["deployment.model=llama-3.1-70b", "deployment.tp=3"],
            "deployment.tp: 3 is not allowed for Llama-3.1-70B (64 attention heads, 8 KV heads): "
            "vLLM needs tp to divide the 64 attention heads and the MLP width 28672, and to "
            "divide the 8 KV heads or be a multiple of 8; allowed: 1, 2, 4, 8, 16, 32, 64",
        ),
        (
            ["engine.block_size=17"],
            "engine.block_size: 17 is not allowed: vLLM's GPU attention kernels page the KV "
            "cache in multiples of 16 tokens; allowed: 16, 32, 48, ... up to 1024",
        ),
        (
            ["engine.max_model_len=200000"],
            "engine.max_model_len: 200,000 is more than Llama-3.1-8B's context of 131,072 tokens "
            "(max_position_embeddings in its config), which vLLM refuses; allowed: 2 to 131,072",
        ),
        (
            ["deployment.model=llama-2-7b", "engine.max_model_len=8192"],
            "engine.max_model_len: 8,192 is more than Llama-2-7B's context of 4,096 tokens",
        ),
    ],
)
def test_shapes_vllm_refuses_are_one_line_naming_the_field(
    tmp_path: Path, overrides: list[str], message: str
) -> None:
    path = write(tmp_path, "base.yaml", BASE)
    with pytest.raises(InputError) as raised:
        load_scenario(path, overrides)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_tp_degrees_vllm_accepts_load(tmp_path: Path) -> None:
    path = write(tmp_path, "base.yaml", BASE)
    for tp in (1, 2, 4, 8, 16, 32):
        assert load_scenario(path, [f"deployment.tp={tp}"]).scenario.deployment.tp == tp
    # 8 KV heads over 16 GPUs: each replicated on 2, as vLLM does.
    assert load_scenario(path, ["deployment.model=llama-3.1-70b", "deployment.tp=16"])


def test_settings_built_in_python_get_the_defaults_a_file_gets() -> None:
    """An EngineSettings or DeploymentSettings instance fills in like the mapping it stands for:
    the same max_model_len (the model's context) and run id."""
    base = {
        "name": "api",
        "duration_s": 10,
        "workload": {
            "source": {"kind": "chat"},
            "arrivals": {"process": "poisson", "rate_per_s": 1},
        },
    }
    built = Scenario.model_validate({**base, "engine": EngineSettings(block_size=16)})
    written = Scenario.model_validate({**base, "engine": {"block_size": 16}})
    assert built.engine.max_model_len == written.engine.max_model_len == 131072
    assert built.run_id() == written.run_id()
    llama2 = Scenario.model_validate({**base, "deployment": DeploymentSettings(model="llama-2-7b")})
    assert llama2.engine.max_model_len == 4096


def test_max_model_len_defaults_to_the_model_context(tmp_path: Path) -> None:
    """An unwritten max_model_len is the model's context, as vLLM starts it (131,072 for
    Llama-3.1-8B, 4,096 for Llama-2-7B), so it never trips the model-context check."""
    path = write(tmp_path, "base.yaml", BASE)
    assert load_scenario(path).scenario.engine.max_model_len == 131072
    llama2 = load_scenario(path, ["deployment.model=llama-2-7b"]).scenario
    assert llama2.engine.max_model_len == 4096
    explicit = load_scenario(path, ["deployment.model=llama-2-7b", "engine.max_model_len=4096"])
    assert explicit.scenario.run_id() == llama2.run_id()
    # BLOOM's config names no context length: vLLM assumes 2048 where none is given, and takes
    # any length given (nothing to check it against).
    bloom = ["deployment.model=bloom-176b", "deployment.tp=8"]
    assert load_scenario(path, bloom).scenario.engine.max_model_len == 2048
    longer = [*bloom, "engine.max_model_len=100000"]
    assert load_scenario(path, longer).scenario.engine.max_model_len == 100000


def test_a_state_space_config_is_exit_2_and_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = {
        "architectures": ["JambaForCausalLM"],
        "model_type": "jamba",
        "attn_layer_period": 8,
        "attn_layer_offset": 4,
        "mamba_d_state": 16,
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "vocab_size": 65536,
    }
    (tmp_path / "jamba.json").write_text(json.dumps(config))
    path = write(tmp_path, "base.yaml", BASE.replace("llama-3.1-8b", "jamba.json"))
    with pytest.raises(SystemExit) as done:
        main(["validate", str(path)])
    assert done.value.code == 2
    error = capsys.readouterr().err.strip()
    assert error == (
        f"error: {path}:5: deployment.model: {tmp_path / 'jamba.json'}: model config field "
        "attn_layer_period = 8: state-space or hybrid (Mamba, RWKV, ...) layers are not "
        "supported; only attention decoders (dense or MoE, GQA) are supported"
    )


def test_a_sweep_file_given_as_a_scenario_says_so(tmp_path: Path) -> None:
    """`prefixsim run` (and eviction, offload) on a sweep file: the `sweep:` key is not a typo of
    `seed` but another kind of file, named at its line."""
    path = write(tmp_path, "sweep.yaml", BASE + "sweep:\n  seeds: [1, 2]\n")
    with pytest.raises(InputError) as raised:
        load_scenario(path)
    assert str(raised.value) == (
        f"{path}:9: sweep: this is a sweep file (a scenario per run); give one scenario, or run "
        "the sweep with `prefixsim sweep`"
    )


class _Source(StrictModel):
    """Settings with a `name` field whose workloads object refuses itself with `problem`."""

    name: str = "x"
    problem: str = ""

    def build(self) -> None:
        raise WorkloadError(self.problem)


@pytest.mark.parametrize(
    ("problem", "at_field"),
    [
        ("ChatConfig.name: 'a/b' is not allowed", True),  # the object's own field
        ("name: 'a/b' is not allowed", True),  # a message naming the field alone
        ("TenantSpec.name: '' is not allowed", False),  # a nested object's field of that name
    ],
)
def test_a_workloads_problem_is_placed_at_a_field_of_its_own_object_only(
    problem: str, at_field: bool
) -> None:
    settings = _Source.model_construct(problem=problem)
    with pytest.raises(Exception) as raised:
        accepted_by_workloads(settings, "ChatConfig")
    assert isinstance(raised.value, PydanticCustomError) is at_field


def test_a_base_files_relative_paths_are_its_own(tmp_path: Path) -> None:
    """common/base.yaml names trace.jsonl beside it; runs/child.yaml extends it from another
    folder. The trace is the base's (it was looked for beside the child, and the error named
    the base's line for a file the base never meant)."""
    common, runs = tmp_path / "common", tmp_path / "runs"
    common.mkdir()
    runs.mkdir()
    line = '{"timestamp": 0, "input_length": 20, "output_length": 4, "hash_ids": [1]}\n'
    (common / "trace.jsonl").write_text(line)
    write(
        common,
        "base.yaml",
        "name: base\nengine: {num_gpu_blocks: 400, max_model_len: 4096}\n"
        "workload:\n  source: {kind: trace, path: trace.jsonl, format: mooncake}\n",
    )
    child = write(runs, "child.yaml", "extends: ../common/base.yaml\nname: child\n")
    loaded = load_scenario(child)
    assert loaded.scenario.workload.source.path == "../common/trace.jsonl"
    assert (loaded.base_dir / loaded.scenario.workload.source.path).resolve() == (
        common / "trace.jsonl"
    ).resolve()
