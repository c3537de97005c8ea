"""Weighted mixes: each arrival goes to one component, chosen by weight.

Each component draws its contents and tags from child streams of its own, and the choice of
component from another, so changing one component's settings does not reshuffle the others'.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from workloads.errors import WorkloadError
from workloads.generators.agent import AgentConfig
from workloads.generators.chat import ChatConfig
from workloads.generators.rag import RagConfig
from workloads.spec import RequestSpec
from workloads.validation import require_number


class UnitBuilder(Protocol):
    """Builds the requests of one arrival: a whole session, or one open-loop request."""

    def build(self, arrival_index: int, arrival_at: float) -> list[RequestSpec]:
        """The requests started by arrival number `arrival_index` at `arrival_at`."""
        ...


@dataclass(slots=True, frozen=True)
class MixComponent:
    """One workload of a mix and its share of the arrivals."""

    weight: float
    source: ChatConfig | AgentConfig | RagConfig

    def __post_init__(self) -> None:
        require_number("MixComponent", "weight", self.weight, 0.0)
        if not isinstance(self.source, ChatConfig | AgentConfig | RagConfig):
            raise WorkloadError(
                f"MixComponent.source: {self.source!r} is not allowed; use a ChatConfig, "
                "AgentConfig or RagConfig"
            )


@dataclass(slots=True, frozen=True)
class MixConfig:
    """Components whose weights split the arrivals."""

    components: tuple[MixComponent, ...]

    def __post_init__(self) -> None:
        if not self.components:
            raise WorkloadError("MixConfig.components: empty; give at least one component")
        if sum(component.weight for component in self.components) <= 0:
            raise WorkloadError("MixConfig.components: all weights are 0; one must be > 0")


class MixBuilder:
    """Sends each arrival to a component drawn by weight."""

    def __init__(
        self, config: MixConfig, builders: Sequence[UnitBuilder], choice_rng: np.random.Generator
    ) -> None:
        total = sum(component.weight for component in config.components)
        self._probabilities = [component.weight / total for component in config.components]
        self._builders = list(builders)
        self._rng = choice_rng

    def build(self, arrival_index: int, arrival_at: float) -> list[RequestSpec]:
        """The requests of the chosen component for this arrival."""
        chosen = int(self._rng.choice(len(self._builders), p=self._probabilities))
        return self._builders[chosen].build(arrival_index, arrival_at)
