"""Weighted mixes: each arrival goes to one component, chosen by weight.

Each component draws its contents and tags from child streams of its own, and the choice of
component from another, so changing one component's settings does not reshuffle the others'.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from workloads.errors import WorkloadError
from workloads.generators import kinds
from workloads.generators.kind import GeneratorConfig, UnitBuilder, build_arrivals
from workloads.spec import RequestSpec
from workloads.validation import require_number


@dataclass(slots=True, frozen=True)
class MixComponent:
    """One workload of a mix and its share of the arrivals."""

    weight: float
    source: GeneratorConfig

    def __post_init__(self) -> None:
        require_number("MixComponent", "weight", self.weight, 0.0)
        problem = kinds.config_problem("MixComponent.source", self.source)
        if problem is not None:
            raise problem


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
        return self.build_many([(arrival_index, arrival_at)])[0]

    def build_many(self, arrivals: Sequence[tuple[int, float]]) -> list[list[RequestSpec]]:
        """Each arrival's requests from its chosen component; a component builds its arrivals
        together (its random streams are its own, so their order among components is free)."""
        by_component: list[list[int]] = [[] for _ in self._builders]
        for position in range(len(arrivals)):
            chosen = int(self._rng.choice(len(self._builders), p=self._probabilities))
            by_component[chosen].append(position)
        built: list[list[RequestSpec]] = [[] for _ in arrivals]
        for builder, positions in zip(self._builders, by_component, strict=True):
            if positions:
                made = build_arrivals(builder, [arrivals[position] for position in positions])
                for position, specs in zip(positions, made, strict=True):
                    built[position] = specs
        return built
