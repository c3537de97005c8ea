"""What a workload kind provides: its config dataclass, its builder, and how a scenario offers it.

A kind's module declares its `GeneratorKind`; the registry (workloads/generators/kinds.py) lists
them. The scenario layer derives each kind's source model from the config's fields: their types,
defaults and the `setting` metadata (a description, bounds, the prompt slot a length sizes).
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from workloads.distributions import Distribution, Fixed, LogNormal, Uniform
from workloads.errors import WorkloadError
from workloads.generators.common import CommonSlots, require_distribution
from workloads.layout import PromptLayout
from workloads.prompt import TokenMode
from workloads.spec import RequestSpec

# Keys of a config field's metadata (see `setting`).
_DESCRIPTION = "description"
_BOUNDS = "bounds"
_SLOT = "slot"
_COPIES = "copies"
_DURATION = "duration"
# A count distribution drawing 1 or more less often than this is refused (require_distributions).
MIN_CHANCE_OF_A_COUNT = 1e-6
MAX_CONTEXT = "history is truncated to this many tokens"


def setting(
    description: str,
    default: Any,
    *,
    bounds: Mapping[str, float] | None = None,
    slot: str | None = None,
    copies: str | None = None,
    duration: bool = False,
) -> Any:
    """A config field with what a scenario shows of it: a one-line description, bounds (`ge`,
    `gt`, `le`, as the config's own checks enforce), and for a token-count distribution the
    prompt slot it sizes (`copies`: the field counting its pieces per prompt). A distribution
    draws counts (at least 1 each) unless it is a `duration` in seconds."""
    metadata = {
        _DESCRIPTION: description,
        _BOUNDS: dict(bounds or {}),
        _SLOT: slot,
        _COPIES: copies,
        _DURATION: duration,
    }
    return dataclasses.field(default=default, metadata=metadata)


@dataclass(frozen=True, slots=True)
class ConfigField:
    """One field of a generator config as a scenario offers it."""

    name: str
    annotation: Any  # the resolved type of the dataclass field
    description: str | None  # None for a field declared without `setting`
    bounds: Mapping[str, float]


def config_fields(config: type) -> tuple[ConfigField, ...]:
    """The fields of a generator config class, in declaration order, with their `setting` data."""
    hints = typing.get_type_hints(config)
    return tuple(
        ConfigField(
            field.name,
            hints[field.name],
            field.metadata.get(_DESCRIPTION),
            field.metadata.get(_BOUNDS, {}),
        )
        for field in dataclasses.fields(config)
    )


class UnitBuilder(Protocol):
    """Builds the requests of one arrival: a whole session, or one open-loop request."""

    def build(self, arrival_index: int, arrival_at: float) -> list[RequestSpec]:
        """The requests started by arrival number `arrival_index` at `arrival_at`."""
        ...


@runtime_checkable
class BatchBuilder(UnitBuilder, Protocol):
    """A builder that also builds several arrivals at once (the shipped kinds and mixes)."""

    def build_many(self, arrivals: Sequence[tuple[int, float]]) -> list[list[RequestSpec]]:
        """Each arrival's requests, as `build` for each (index, time) in turn makes them (the
        same random draws in the same order), with their tokens made together."""
        ...


def build_arrivals(
    builder: UnitBuilder, arrivals: Sequence[tuple[int, float]]
) -> list[list[RequestSpec]]:
    """Each arrival's requests: together where `builder` builds batches, else one by one (a
    kind's builder need only have `build`)."""
    if isinstance(builder, BatchBuilder):
        return builder.build_many(arrivals)
    return [builder.build(arrival_index, arrival_at) for arrival_index, arrival_at in arrivals]


class GeneratorConfig(Protocol):
    """A generator config: a frozen dataclass of its kind's module. Besides its own fields it has
    the ones every scenario source offers: name, common, layout, tenants, prompt_logprobs_fraction.
    """

    @property
    def common(self) -> CommonSlots: ...
    @property
    def layout(self) -> PromptLayout: ...


@dataclass(frozen=True, slots=True)
class GeneratorKind:
    """One workload kind: its name in scenarios, a line for docs, its config and its builder."""

    name: str
    summary: str
    config: type
    builder: Callable[[Any, np.random.Generator, np.random.Generator, TokenMode], UnitBuilder]


def distribution_fields(config: Any) -> list[str]:
    """The names of a config's fields typed Distribution (token counts and times it draws)."""
    return [field.name for field in config_fields(type(config)) if field.annotation == Distribution]


def require_distributions(config: Any) -> None:
    """Every distribution field of `config` holds a distribution, and each that draws counts
    draws one of at least 1 with some chance (MIN_CHANCE_OF_A_COUNT): a generator raises smaller
    draws to 1, so one that (almost) never reaches 1 (`fixed 0`) would be all ones without a
    word."""
    owner = type(config).__name__
    fields = dataclasses.fields(config)
    durations = {field.name for field in fields if field.metadata.get(_DURATION)}
    for name in distribution_fields(config):
        distribution = getattr(config, name)
        require_distribution(owner, name, distribution)
        chance = 1.0 if name in durations else _chance_of_a_count(distribution)
        if chance < MIN_CHANCE_OF_A_COUNT:
            never = "never draws" if chance == 0 else f"draws with chance {chance:.1g} only"
            raise WorkloadError(
                f"{owner}.{name}: {distribution!r} {never} a count of 1 or more, and every "
                "smaller draw would be raised to 1; use values of at least 1"
            )


def shortest_prompt_tokens(config: GeneratorConfig) -> int:
    """Tokens every prompt of `config` holds at least: its common slots, and the lowest draw of
    each distribution that sizes a slot of its layout (times its copies per prompt)."""
    common = config.common
    slots = set(config.layout.order)
    tokens = sum(
        piece.num_tokens
        for pieces in common.pieces("", 0, "", "").values()
        for piece in pieces
        if piece.slot in slots
    )
    for field in dataclasses.fields(config):  # type: ignore[arg-type]
        if field.metadata.get(_SLOT) in slots:
            copies_field = field.metadata[_COPIES]
            copies = 1 if copies_field is None else getattr(config, copies_field)
            tokens += copies * math.ceil(_lowest(getattr(config, field.name)))
    return tokens


def _lowest(distribution: Distribution) -> float:
    """The smallest value a token-count distribution draws."""
    if isinstance(distribution, Fixed):
        return distribution.value
    return getattr(distribution, "low", 0.0)


def _chance_of_a_count(distribution: Distribution) -> float:
    """The chance that a count drawn from `distribution` (clipped, then rounded half to even,
    as `sample_counts` does) is at least 1, i.e. that the value drawn is above 0.5."""
    if isinstance(distribution, Fixed):
        return 1.0 if round(distribution.value) >= 1 else 0.0
    if isinstance(distribution, Uniform):
        return 1.0 if math.floor(distribution.high) >= 1 else 0.0
    if isinstance(distribution, LogNormal):
        if distribution.high <= 0.5:  # every clipped draw rounds to 0
            return 0.0
        if distribution.low > 0.5:
            return 1.0
        if distribution.sigma == 0:
            return 1.0 if distribution.median > 0.5 else 0.0
        z = (math.log(0.5) - math.log(distribution.median)) / distribution.sigma
        return 0.5 * math.erfc(z / math.sqrt(2))
    return math.exp(-0.5 / distribution.mean)
