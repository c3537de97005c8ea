"""JSON-lines replay harnesses that drive the cache or the scheduler op by op (replay_formats.md)."""
