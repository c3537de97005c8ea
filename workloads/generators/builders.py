"""From a generator config to the builder that makes its requests (kinds: generators/kinds.py)."""

from __future__ import annotations

import numpy as np

from workloads.errors import WorkloadError
from workloads.generators import kinds
from workloads.generators.kind import GeneratorConfig, UnitBuilder
from workloads.generators.mix import MixBuilder, MixConfig
from workloads.prompt import TokenMode

SourceConfig = GeneratorConfig | MixConfig
# A mix combines registered kinds; it is a kind of its own, built from its components' builders.
MIX_KIND = "mix"


def source_config_problem(where: str, source: object) -> WorkloadError | None:
    """The error for a source that is no registered generator config nor a mix, or None."""
    return kinds.config_problem(where, source, MixConfig)


def make_builder(
    source: SourceConfig,
    content_rng: np.random.Generator,
    tags_rng: np.random.Generator,
    tokens: TokenMode,
) -> UnitBuilder:
    """The builder for `source`; a mix gives each component child streams of its own."""
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
    kind = kinds.kind_of_config(source)
    if kind is None:
        problem = source_config_problem("workload source", source)
        assert problem is not None
        raise problem
    return kind.builder(source, content_rng, tags_rng, tokens)
