"""The chat scenario the CPU offload tests run: the engine's result files and the offload study.

Multi-turn chat on a GPU cache of 300 blocks (4,784 tokens, 0.58 GiB of Llama-3.1-8B KV):
sessions' earlier turns are evicted from the GPU between turns, so a later turn's history can
come back from the CPU tier, which adds hits until it holds them all.
"""

from __future__ import annotations


def offload_chat_scenario(name: str, outputs: str) -> str:
    """The scenario's YAML under `name`, writing the `outputs` given (a YAML flow mapping)."""
    return f"""
name: {name}
seed: 3
duration_s: 40
warmup_s: 5
deployment: {{model: llama-3.1-8b, gpu: h100, tp: 1}}
cost_model: auto
engine: {{block_size: 16, num_gpu_blocks: 300, max_model_len: 4096}}
workload:
  source: {{kind: chat, common: {{system_prompt_tokens: 512}}}}
  arrivals: {{process: poisson, rate_per_s: 2.0}}
outputs: {outputs}
"""
