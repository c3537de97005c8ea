"""JSON-lines replay harnesses driving the cache or the scheduler op by op (replay_formats.md)."""
