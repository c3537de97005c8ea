"""What-if studies built on the exact KV-cache model (eviction policies, ...)."""
