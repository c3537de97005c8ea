"""The workload-kind registry: one line per kind, each naming the `GeneratorKind` of its module.

Adding a kind: a module with its config dataclass (fields declared with `setting`), its builder
and its `GENERATOR_KIND`, and one line here. Builders, mixes, the scenario's source models, the
JSON Schema and its descriptions all follow this tuple (sim/config/workload.py derives them).
"""

from __future__ import annotations

from workloads.errors import WorkloadError
from workloads.generators import agent, chat, rag
from workloads.generators.kind import GeneratorKind

GENERATOR_KINDS: tuple[GeneratorKind, ...] = (
    chat.GENERATOR_KIND,
    agent.GENERATOR_KIND,
    rag.GENERATOR_KIND,
)


def generator_configs() -> tuple[type, ...]:
    """The config class of each registered kind, in registry order."""
    return tuple(kind.config for kind in GENERATOR_KINDS)


def kind_of_config(config: object) -> GeneratorKind | None:
    """The registered kind whose config `config` is, or None."""
    return next((kind for kind in GENERATOR_KINDS if type(config) is kind.config), None)


def config_problem(where: str, config: object, *others: type) -> WorkloadError | None:
    """The error for a `config` of no registered kind (nor one of `others`), or None."""
    if kind_of_config(config) is not None or isinstance(config, others):
        return None
    allowed = ", ".join(config_class.__name__ for config_class in (*others, *generator_configs()))
    return WorkloadError(f"{where}: {config!r} is not allowed; use one of {allowed}")
