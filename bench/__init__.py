"""Benchmarks: each module prints ratios measured side by side in one run."""
