"""The pool arithmetic the runner's start-up checks share: how long one sequence a pool holds
may be, and the max_model_len an engine started on a small pool must have been given.

Scenario: a pool of 10 blocks of 16 tokens (9 usable, the null block aside): a 144-token
prompt is admitted alone, a 145-token one is not.
"""

from __future__ import annotations

import pytest

from sim.kvcache import BlockHasher, CacheRequest, KVCacheManager, pool_capacity_tokens, run_alone
from sim.runner import max_model_len_for_pool


@pytest.mark.parametrize(("num_prompt_tokens", "admitted"), [(144, True), (145, False)])
def test_a_pool_holds_one_sequence_of_its_capacity(num_prompt_tokens: int, admitted: bool) -> None:
    assert pool_capacity_tokens(10, 16) == 144
    manager = KVCacheManager(10, 16, max_model_len=1024)
    request = CacheRequest("r", list(range(num_prompt_tokens)), BlockHasher("sha256", 16))
    assert run_alone(manager, request, [7]).admitted is admitted


@pytest.mark.parametrize(
    ("max_model_len", "num_gpu_blocks", "expected"),
    [
        (131_072, 10, 144),  # the model's context does not fit: the pool's 144 tokens
        (100, 10, 100),  # fits: unchanged
        (144, 10, 144),  # exactly fits: unchanged
    ],
)
def test_max_model_len_for_pool(max_model_len: int, num_gpu_blocks: int, expected: int) -> None:
    assert max_model_len_for_pool(max_model_len, num_gpu_blocks, 16) == expected
