"""Synthetic workload generators: multi-turn chat, agents, RAG and weighted mixes."""
