"""The seed walkthrough's two-turn chat (spec §10, s01)."""

from __future__ import annotations

from cache_driver import CacheDriver, tokens


def test_two_turn_chat_hit_rate_is_49_8_percent():
    """Turn 1: A, 75 prompt tokens, 45 answer tokens, hit 0. Turn 2: B, 150 tokens whose first
    118 equal A's, hits 7 blocks = 112 tokens and computes 38. Queries 75 + 150 = 225, hits 112,
    hit rate 112 / 225 = 49.8 %."""
    driver = CacheDriver(64)
    prompt, answer = tokens(1000, 75), tokens(5000, 45)
    turn_1 = driver.arrive("A", prompt)
    assert len(turn_1.block_hashes) == 4
    assert driver.run("A", answer).prefill.hit_tokens == 0
    assert len(turn_1.block_hashes) == 7
    driver.arrive("B", prompt + answer[:43] + tokens(9000, 32))
    turn_2 = driver.schedule("B")
    assert (turn_2.hit_tokens, turn_2.num_new_tokens) == (112, 38)
    stats = driver.manager.cumulative_stats
    assert (stats.queries, stats.hits) == (225, 112)
    assert f"{100 * stats.hit_rate:.1f} %" == "49.8 %"
