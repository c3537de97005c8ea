"""Per-request tags: tenant (with its cache salt, LoRA adapter and priority) and prompt_logprobs.

Tags are drawn from their own random stream, so adding tenants never changes prompt contents.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

import numpy as np

from workloads.errors import WorkloadError
from workloads.spec import LoraSpec
from workloads.validation import require_fraction, require_number


@dataclass(slots=True, frozen=True)
class TenantSpec:
    """A tenant: its share of sessions (`weight`) and what its requests carry."""

    name: str
    weight: float = 1.0
    cache_salt: str | None = None
    lora: LoraSpec | None = None
    priority: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise WorkloadError(
                f"TenantSpec.name: {self.name!r} is not allowed; use a non-empty string"
            )
        require_number("TenantSpec", "weight", self.weight, 0.0)
        if isinstance(self.priority, bool) or not isinstance(self.priority, int):
            raise WorkloadError(f"TenantSpec.priority: {self.priority!r} is not an int")


def validate_tagging(
    owner: str, tenants: Sequence[TenantSpec], prompt_logprobs_fraction: float
) -> None:
    """Tenant names must be unique and weights must not all be zero."""
    names = [tenant.name for tenant in tenants]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise WorkloadError(
            f"{owner}.tenants: names {duplicates} repeat; tenant names must be unique"
        )
    if tenants and sum(tenant.weight for tenant in tenants) <= 0:
        raise WorkloadError(f"{owner}.tenants: all weights are 0; at least one must be > 0")
    require_fraction(owner, "prompt_logprobs_fraction", prompt_logprobs_fraction)


class TagSampler:
    """Draws a tenant per session (or open-loop request) and prompt_logprobs per request."""

    def __init__(
        self,
        tenants: Sequence[TenantSpec],
        prompt_logprobs_fraction: float,
        rng: np.random.Generator,
    ) -> None:
        self._tenants = tuple(tenants)
        total = sum(tenant.weight for tenant in tenants)
        self._probabilities = [tenant.weight / total for tenant in tenants] if tenants else []
        self._prompt_logprobs_fraction = prompt_logprobs_fraction
        self._rng = rng

    def tenant(self) -> TenantSpec | None:
        """The tenant of the next session or open-loop request (None when there are none)."""
        if not self._tenants:
            return None
        return self._tenants[int(self._rng.choice(len(self._tenants), p=self._probabilities))]

    def prompt_logprobs(self) -> bool:
        """Whether the next request asks for prompt logprobs (which skips the cache lookup)."""
        return self.prompt_logprobs_many(1)[0]

    def prompt_logprobs_many(self, count: int) -> list[bool]:
        """`prompt_logprobs` of the next `count` requests (numpy's `count` single draws and
        one draw of `count` take the same values from the stream)."""
        fraction = self._prompt_logprobs_fraction
        if fraction == 0:
            return [False] * count
        draws: list[float] = self._rng.random(count).tolist()
        return [draw < fraction for draw in draws]


class TenantFields(TypedDict, total=False):
    """The RequestSpec fields a tenant sets."""

    tenant: str
    cache_salt: str | None
    lora: LoraSpec | None
    priority: int


def tenant_fields(tenant: TenantSpec | None) -> TenantFields:
    """RequestSpec keyword arguments carrying a tenant's tags (none for no tenant)."""
    if tenant is None:
        return {}
    return {
        "tenant": tenant.name,
        "cache_salt": tenant.cache_salt,
        "lora": tenant.lora,
        "priority": tenant.priority,
    }
