"""Calibration that simulates what was measured: replay a vLLM benchmark through the engine and
fit the cost model until the simulated run matches the measured one."""
