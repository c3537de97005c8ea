"""Workload generators and trace adapters; never imports `sim`."""
