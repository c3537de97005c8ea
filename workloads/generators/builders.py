"""The workload-kind registry: from a generator config to the builder that makes its requests.

Adding a kind: a module with its config dataclass and builder, and one `GeneratorKind` line in
`GENERATOR_KINDS`; the scenario schema (sim/config/workload.py) checks its source models
against these names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from workloads.errors import WorkloadError
from workloads.generators.agent import AgentBuilder, AgentConfig
from workloads.generators.chat import ChatBuilder, ChatConfig
from workloads.generators.mix import MixBuilder, MixConfig, UnitBuilder
from workloads.generators.rag import RagBuilder, RagConfig
from workloads.prompt import TokenMode

SourceConfig = ChatConfig | AgentConfig | RagConfig | MixConfig


@dataclass(frozen=True, slots=True)
class GeneratorKind:
    """One workload kind: its name in scenarios, its config class, and its builder."""

    name: str
    config: type
    builder: Callable[[Any, np.random.Generator, np.random.Generator, TokenMode], UnitBuilder]


GENERATOR_KINDS = (
    GeneratorKind("chat", ChatConfig, ChatBuilder),
    GeneratorKind("agent", AgentConfig, AgentBuilder),
    GeneratorKind("rag", RagConfig, RagBuilder),
)
_KIND_OF_CONFIG = {kind.config: kind for kind in GENERATOR_KINDS}
# A mix combines registered kinds; it is a kind of its own, built from its components' builders.
MIX_KIND = "mix"
SOURCE_CONFIGS: tuple[type, ...] = (*_KIND_OF_CONFIG, MixConfig)


def source_config_problem(where: str, source: object) -> WorkloadError | None:
    """The error for a source that is no registered generator config, or None."""
    if isinstance(source, SOURCE_CONFIGS):
        return None
    allowed = ", ".join(config.__name__ for config in SOURCE_CONFIGS)
    return WorkloadError(f"{where}: {source!r} is not allowed; use one of {allowed}")


def make_builder(
    source: SourceConfig,
    content_rng: np.random.Generator,
    tags_rng: np.random.Generator,
    tokens: TokenMode,
) -> UnitBuilder:
    """The builder for `source`; a mix gives each component child streams of its own."""
    kind = _KIND_OF_CONFIG.get(type(source))
    if kind is not None:
        return kind.builder(source, content_rng, tags_rng, tokens)
    if isinstance(source, MixConfig):
        count = len(source.components)
        choice_rng, *content_rngs = content_rng.spawn(count + 1)
        tags_rngs = tags_rng.spawn(count)
        builders = [
            make_builder(component.source, component_content, component_tags, tokens)
            for component, component_content, component_tags in zip(
                source.components, content_rngs, tags_rngs, strict=True
            )
        ]
        return MixBuilder(source, builders, choice_rng)
    problem = source_config_problem("workload source", source)
    assert problem is not None
    raise problem
