"""The embedded default scenario `make demo` runs: a few simulated minutes of multi-turn chat."""

from __future__ import annotations

DEMO_SCENARIO_YAML = """\
# Multi-turn chat on one H100 serving Llama-3.1-8B: what TTFT and hit rate does it see?
name: demo-chat
seed: 1
duration_s: 180
warmup_s: 20
engine:
  block_size: 16
  max_num_batched_tokens: 8192
  max_num_seqs: 256
deployment: {model: llama-3.1-8b, gpu: h100, tp: 1}
cost_model: auto
workload:
  source:
    kind: chat
    common: {system_prompt_tokens: 1024}
  arrivals: {process: poisson, rate_per_s: 2.0}
outputs: {events: true, scrape_interval_s: 5.0}
"""
