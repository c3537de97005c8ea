"""From a generator config to the builder that makes its requests, with its own random streams."""

from __future__ import annotations

import numpy as np

from workloads.errors import WorkloadError
from workloads.generators.agent import AgentBuilder, AgentConfig
from workloads.generators.chat import ChatBuilder, ChatConfig
from workloads.generators.mix import MixBuilder, MixConfig, UnitBuilder
from workloads.generators.rag import RagBuilder, RagConfig
from workloads.prompt import TokenMode

SourceConfig = ChatConfig | AgentConfig | RagConfig | MixConfig


def make_builder(
    source: SourceConfig,
    content_rng: np.random.Generator,
    tags_rng: np.random.Generator,
    tokens: TokenMode,
) -> UnitBuilder:
    """The builder for `source`; a mix gives each component child streams of its own."""
    if isinstance(source, ChatConfig):
        return ChatBuilder(source, content_rng, tags_rng, tokens)
    if isinstance(source, AgentConfig):
        return AgentBuilder(source, content_rng, tags_rng, tokens)
    if isinstance(source, RagConfig):
        return RagBuilder(source, content_rng, tags_rng, tokens)
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
    raise WorkloadError(
        f"workload source: {source!r} is not allowed; use ChatConfig, AgentConfig, RagConfig or "
        "MixConfig"
    )
