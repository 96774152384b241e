"""Benchmarks: run one as ``python -m bench.NAME``; the last line it prints
is one JSON object with every figure. Not part of the test suite."""
