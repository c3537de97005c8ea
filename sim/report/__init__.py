"""Figures and reports built from result files."""
