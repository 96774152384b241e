"""bench/cputime.py: CPU time read from /proc, and the spread that says when
a benchmark's ratio is meaningless. No timed assertion: CPU time only grows."""

from __future__ import annotations

import os
import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from bench import cputime


def test_cpu_time_counts_a_process_and_its_children_and_never_decreases() -> None:
    parent = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys; subprocess.run([sys.executable, '-c', "
        "'import time\\nend = time.process_time() + 0.3\\nwhile time.process_time() < end: pass\\n"
        "print(flush=True)\\ninput()'], check=True)")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None and parent.stdin is not None
        parent.stdout.readline()  # the child has spun 0.3 s of CPU and waits
        tree, alone = cputime.cpu_s(parent.pid), cputime.own_cpu_s(parent.pid)
        assert tree >= 0.25 > alone  # the child's CPU is in the tree's, not in the parent's own
        parent.stdin.write("\n")
        parent.stdin.flush()
    finally:
        parent.wait(timeout=60)
    assert cputime.own_cpu_s(os.getpid()) <= cputime.own_cpu_s(os.getpid())
    meter = cputime.Meter([os.getpid()]).start()
    sum(range(100_000))
    figures = meter.stop().per_call_ms(10)
    assert figures["servers_cpu_ms"] >= 0 and figures["driver_cpu_ms"] >= 0 and figures["wall_ms"] > 0


@given(st.lists(st.floats(min_value=1e-6, max_value=1e6), min_size=1, max_size=20))
def test_spread_is_max_over_min_and_marks_ratios(samples: list[float]) -> None:
    spread = cputime.spread(samples)
    assert spread >= 1.0
    assert spread == round(max(samples) / min(samples), 3)
    assert cputime.meaningful(spread) == (spread <= cputime.SPREAD_LIMIT)
    assert not cputime.meaningful(spread, cputime.SPREAD_LIMIT * 2)
