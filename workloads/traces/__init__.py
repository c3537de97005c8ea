"""Trace adapters: Mooncake, Dynamo agent and Azure LLM traces as streams of RequestSpec."""
