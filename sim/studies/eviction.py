"""Eviction policies on one request stream: vLLM's LRU (the exact pool), LFU, a length-aware
policy and Belady's offline optimum, with their gaps in hit rate and in prefill tokens.

The stream is replayed in cache-only mode: requests in order, one at a time; each is admitted
(prefix lookup capped at num_tokens - 1, whole prompt allocated), its outputs are appended as
decode steps, and it is freed. "lru-exact" runs that through the exact KVCacheManager; the
other policies run the same requests through `simulate_policy`. A request whose sequence needs
more blocks than the pool's usable ones can never run and is skipped by every policy.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sim.engine import cache_request_from_spec, hash_keys_from_spec
from sim.errors import InputError
from sim.kvcache import HASH_ALGOS, MAX_NUM_GPU_BLOCKS, BlockHasher, pool_size_problem
from sim.studies.eviction_exact import ExactPoolReplay
from sim.studies.eviction_policies import POLICY_CLASSES
from sim.studies.eviction_sim import PolicyOutcome, simulate_policy
from sim.studies.eviction_trace import BlockKeyInterner, BlockTrace, num_kv_tokens
from sim.studies.named import named_row
from workloads.api import RequestSpec

EXACT_POLICY = "lru-exact"
POLICY_NAMES = (EXACT_POLICY, *POLICY_CLASSES)


@dataclass(slots=True, frozen=True)
class EvictionRow:
    """One policy's counters; gaps are this policy minus the report's baseline."""

    name: str
    queries: int
    hits: int
    hit_rate: float
    prefill_tokens_computed: int
    num_evictions: int
    hit_rate_gap_points: float
    prefill_tokens_gap: int


@dataclass(slots=True, frozen=True)
class EvictionReport:
    """Per-policy rows on one stream and pool; the baseline is "lru-exact" when it ran."""

    num_gpu_blocks: int
    block_size: int
    num_requests: int
    num_skipped: int
    baseline: str
    rows: tuple[EvictionRow, ...]

    def row(self, name: str) -> EvictionRow:
        """The row of policy `name`."""
        return named_row(self.rows, lambda row: row.name, name, "policy")

    def to_markdown(self) -> str:
        """A GitHub-flavoured markdown table, one line per policy."""
        lines = [
            f"Eviction policies: {self.num_requests} requests ({self.num_skipped} skipped), "
            f"{self.num_gpu_blocks} GPU blocks of {self.block_size} tokens; "
            f"gaps vs {self.baseline}.",
            "",
            "| policy | hit rate | gap (points) | hits | queries | prefill tokens "
            "| gap (prefill tokens) | evictions |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for row in self.rows:
            lines.append(
                f"| {row.name} | {row.hit_rate:.2%} | {row.hit_rate_gap_points:+.2f} "
                f"| {row.hits} | {row.queries} | {row.prefill_tokens_computed} "
                f"| {row.prefill_tokens_gap:+d} | {row.num_evictions} |"
            )
        return "\n".join(lines) + "\n"


def _check_arguments(
    num_gpu_blocks: int, block_size: int, hash_algo: str, policies: Sequence[str]
) -> None:
    if not 2 <= num_gpu_blocks <= MAX_NUM_GPU_BLOCKS:
        raise InputError(pool_size_problem(num_gpu_blocks))
    if block_size < 1:
        raise InputError(f"block_size must be at least 1, got {block_size}")
    if hash_algo not in HASH_ALGOS:
        raise InputError(f"unknown hash_algo {hash_algo!r}; allowed: {', '.join(HASH_ALGOS)}")
    if not policies:
        raise InputError(f"policies is empty; choose from {', '.join(POLICY_NAMES)}")
    for name in policies:
        if name not in POLICY_NAMES:
            raise InputError(f"unknown policy {name!r}; allowed: {', '.join(POLICY_NAMES)}")
    if len(set(policies)) != len(policies):
        raise InputError(f"policies {list(policies)} name a policy twice")


def _check_request(spec: RequestSpec) -> None:
    hash_keys_from_spec(spec)  # rejects a bad cache_salt
    if spec.num_prompt_tokens == 0:
        raise InputError(f"request {spec.request_id!r}: the prompt is empty; vLLM rejects it")


def compare_eviction_policies(
    specs: Iterable[RequestSpec],
    *,
    num_gpu_blocks: int,
    block_size: int = 16,
    hash_algo: str = "sha256",
    policies: Sequence[str] = POLICY_NAMES,
) -> EvictionReport:
    """Replay `specs` in cache-only mode under each policy and compare hit rates and prefill."""
    policies = tuple(policies)
    _check_arguments(num_gpu_blocks, block_size, hash_algo, policies)
    num_usable_blocks = num_gpu_blocks - 1
    hasher = BlockHasher(hash_algo, block_size)
    exact = ExactPoolReplay(num_gpu_blocks, block_size) if EXACT_POLICY in policies else None
    interner = BlockKeyInterner()
    traces: list[BlockTrace] = []
    num_skipped = 0
    for spec in specs:
        _check_request(spec)
        num_tokens = num_kv_tokens(spec.num_prompt_tokens, spec.num_output_tokens)
        num_blocks = -(-num_tokens // block_size)
        if num_blocks > num_usable_blocks:
            num_skipped += 1
            continue
        request = cache_request_from_spec(spec, hasher)
        if exact is not None:
            exact.run(request, spec.output_tokens)
        else:
            request.append_output_token_ids(spec.output_tokens)
        traces.append(
            BlockTrace(
                request_id=spec.request_id,
                block_keys=interner.intern(request.block_hashes[: num_tokens // block_size]),
                num_lookup_blocks=(request.num_prompt_tokens - 1) // block_size,
                num_blocks=num_blocks,
                num_prompt_tokens=request.num_prompt_tokens,
                reads_prefix_cache=not request.skip_reading_prefix_cache,
            )
        )

    outcomes: dict[str, PolicyOutcome] = {}
    for name in policies:
        if exact is not None and name == EXACT_POLICY:
            stats = exact.manager.cumulative_stats
            outcomes[name] = PolicyOutcome(
                stats.queries, stats.hits, exact.prefill_tokens_computed, exact.num_evictions
            )
        else:
            outcomes[name] = simulate_policy(
                traces, name, num_usable_blocks=num_usable_blocks, block_size=block_size
            )
    baseline = EXACT_POLICY if EXACT_POLICY in policies else policies[0]
    return EvictionReport(
        num_gpu_blocks=num_gpu_blocks,
        block_size=block_size,
        num_requests=len(traces),
        num_skipped=num_skipped,
        baseline=baseline,
        rows=_rows(outcomes, outcomes[baseline]),
    )


def _hit_rate(outcome: PolicyOutcome) -> float:
    return outcome.hits / outcome.queries if outcome.queries else 0.0


def _rows(outcomes: dict[str, PolicyOutcome], base: PolicyOutcome) -> tuple[EvictionRow, ...]:
    base_hit_rate = _hit_rate(base)
    return tuple(
        EvictionRow(
            name=name,
            queries=outcome.queries,
            hits=outcome.hits,
            hit_rate=_hit_rate(outcome),
            prefill_tokens_computed=outcome.prefill_tokens_computed,
            num_evictions=outcome.num_evictions,
            hit_rate_gap_points=100.0 * (_hit_rate(outcome) - base_hit_rate),
            prefill_tokens_gap=outcome.prefill_tokens_computed - base.prefill_tokens_computed,
        )
        for name, outcome in outcomes.items()
    )
