"""GPU measurement scripts for dgjax (run from the repository root: `python -m benchmarks.decode_bench`)."""
