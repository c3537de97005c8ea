"""Workload kinds: the scenario's source models are derived from the workloads registry, and a
new kind is its module plus one registry line."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path
from typing import get_args

from sim.config import Scenario
from sim.config.workload import GENERATOR_SOURCES
from workloads.generators.builders import MIX_KIND
from workloads.generators.kinds import GENERATOR_KINDS

REPO_DIR = Path(__file__).resolve().parents[2]


def test_each_generator_kind_has_a_scenario_model_that_builds_its_config() -> None:
    names = [get_args(model.model_fields["kind"].annotation)[0] for model in GENERATOR_SOURCES]
    assert names == [kind.name for kind in GENERATOR_KINDS]
    assert names[:3] == ["chat", "agent", "rag"]  # the shipped kinds come first
    assert [model.__name__ for model in GENERATOR_SOURCES[:3]] == [
        "ChatSource",
        "AgentSource",
        "RagSource",
    ]
    for model, kind in zip(GENERATOR_SOURCES, GENERATOR_KINDS, strict=True):
        assert type(model(kind=kind.name).build()) is kind.config
        assert model(kind=kind.name).build() == kind.config()
        # Sweeps send scenarios to worker processes: the derived models pickle by name.
        assert pickle.loads(pickle.dumps(model(kind=kind.name))) == model(kind=kind.name)


def test_the_schema_offers_the_generator_kinds_a_mix_and_a_trace() -> None:
    source = Scenario.model_json_schema()["$defs"]["WorkloadSettings"]["properties"]["source"]
    kinds = [kind.name for kind in GENERATOR_KINDS]
    assert sorted(source["discriminator"]["mapping"]) == sorted([*kinds, MIX_KIND, "trace"])


def test_a_config_field_becomes_an_optional_scenario_field_with_its_bounds() -> None:
    rag = Scenario.model_json_schema()["$defs"]["RagSource"]["properties"]
    assert rag["top_k"]["anyOf"][0] == {"minimum": 1, "type": "integer"}
    assert rag["top_k"]["description"] == "documents per request"
    assert rag["document_order"]["anyOf"][0]["enum"] == ["relevance", "canonical"]
    assert rag["document_tokens"]["description"].startswith("tokens per document: a number, or")
    assert rag["kind"]["description"] == (
        "RAG: top-k documents from a Zipf-popular corpus, before or after the question (layout)"
    )


# A kind of its own: one open-loop request per arrival, a fixed-size question after the
# system prompt, repeated `copies` times.
ECHO_KIND = """
from __future__ import annotations

from dataclasses import dataclass, field

from workloads.distributions import Distribution, Fixed
from workloads.generators.common import CommonSlots
from workloads.generators.kind import GeneratorKind, setting
from workloads.layout import PromptLayout
from workloads.prompt import Piece
from workloads.spec import RequestSpec
from workloads.tags import TenantSpec


@dataclass(slots=True, frozen=True)
class EchoConfig:
    name: str = "echo"
    question_tokens: Distribution = setting("tokens per question", Fixed(40), slot="question")
    copies: int = setting("question copies per prompt", 2, bounds={"ge": 1})
    answer_tokens: int = setting("output tokens per request", 3, bounds={"ge": 1})
    common: CommonSlots = field(default_factory=lambda: CommonSlots(system_prompt_tokens=32))
    layout: PromptLayout = PromptLayout("echo", ("system_prompt", "question"))
    tenants: tuple[TenantSpec, ...] = ()
    prompt_logprobs_fraction: float = 0.0


class EchoBuilder:
    def __init__(self, config, content_rng, tags_rng, tokens) -> None:
        self._config, self._tokens = config, tokens

    def build(self, arrival_index: int, arrival_at: float) -> list[RequestSpec]:
        config = self._config
        request_id = f"{config.name}-{arrival_index}"
        slots = config.common.pieces(config.name, 0, request_id, request_id)
        length = int(config.question_tokens.value)
        slots["question"] = [
            Piece("question", f"{config.name}/q/{arrival_index}/{copy}", "user", length)
            for copy in range(config.copies)
        ]
        output = self._tokens.output_tokens(f"{config.name}/a/{request_id}", config.answer_tokens)
        segments = self._tokens.render(config.layout.arrange(slots))
        return [RequestSpec.open_loop(request_id, arrival_at, segments, output)]


GENERATOR_KIND = GeneratorKind("echo", "questions said twice", EchoConfig, EchoBuilder)
"""
# The one registry line (workloads/generators/kinds.py), then the scenario layer as shipped.
ADD_AND_RUN = """
import json, sys
from pathlib import Path
import pyarrow.parquet as pq
sys.path.insert(0, sys.argv[1])
import echo_kind
from workloads.generators import kinds
kinds.GENERATOR_KINDS = (*kinds.GENERATOR_KINDS, echo_kind.GENERATOR_KIND)
from sim.cli.file_schema import file_json_schema
from sim.config import load_scenario
from sim.errors import InputError
from sim.runner import run_scenario
work = Path(sys.argv[1])
loaded = load_scenario(work / "echo.yaml")
result = run_scenario(loaded.scenario, work, run_dir=work / "run")
echo = file_json_schema()["$defs"]["EchoSource"]["properties"]
(work / "bad.yaml").write_text((work / "echo.yaml").read_text().replace("copies: 3", "copies: 0"))
try:
    load_scenario(work / "bad.yaml")
except InputError as error:
    bad = str(error)
print(json.dumps({
    "requests": result.summary["num_requests"],
    "prompt_tokens": sorted(set(pq.read_table(work / "run" / "requests.parquet")
                                ["num_prompt_tokens"].to_pylist())),
    "copies": echo["copies"]["description"],
    "bad": bad,
}))
"""


def test_a_new_kind_is_its_module_and_one_registry_line(tmp_path: Path) -> None:
    (tmp_path / "echo_kind.py").write_text(ECHO_KIND)
    (tmp_path / "echo.yaml").write_text(
        "name: echo\nseed: 1\nduration_s: 10\nwarmup_s: 0\n"
        "deployment: {model: llama-3.1-8b, gpu: h100}\n"
        "workload:\n  source: {kind: echo, copies: 3}\n"
        "  arrivals: {process: poisson, rate_per_s: 2}\n  num_arrivals: 5\n"
        "outputs: {events: false}\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", ADD_AND_RUN, str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=REPO_DIR,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    outcome = json.loads(completed.stdout)
    # Five requests of a 32-token system prompt and three 40-token questions.
    assert outcome["requests"] == 5
    assert outcome["prompt_tokens"] == [32 + 3 * 40]
    assert outcome["copies"] == "question copies per prompt"
    assert outcome["bad"].endswith(
        "bad.yaml:7: workload.source.copies: 0 is not allowed: Input should be greater than or "
        "equal to 1"
    )
