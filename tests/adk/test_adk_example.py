"""examples/adk_agent.py, run in the ADK venv against a pair this test
starts, as a user runs it against the pair ``make up`` starts."""

from __future__ import annotations

import pathlib

from tests.adk.conftest import run_adk
from tests.adk.venv import ROOT
from tests.support.pair import start_pair


async def test_the_adk_example_runs_and_reuses_the_cache(adk_venv_python: pathlib.Path, certs_dir: pathlib.Path,
                                                         tmp_path: pathlib.Path) -> None:
    # The pair's defaults, as `make up` runs it (not adk_pair's lowered floor):
    # the example must cache at the default min_prefix_tokens.
    pair = await start_pair(certs_dir, tmp_path / "pair")
    try:
        run = await run_adk(
            adk_venv_python,
            [str(ROOT / "examples" / "adk_agent.py"), "--target", f"127.0.0.1:{pair.context_port}",
             "--certs", str(pair.certs)],
            {},
        )
    finally:
        await pair.close()
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert "model -> tool get_weather" in run.stdout and "model -> tool lookup" in run.stdout, run.stdout
    states = next(line for line in run.stdout.splitlines() if line.startswith("cache states:")).split()[2:]
    assert len(states) == 6, run.stdout  # two tool calls with their answers, two plain answers
    assert "CREATED" in states and ("HIT" in states or "GROWN" in states), run.stdout
    assert "BELOW_MIN_TOKENS" not in run.stdout, run.stdout
    assert "artifacts: museums.md" in run.stdout, run.stdout  # saved by the lookup tool through ToolContext
    matches = next(line for line in run.stdout.splitlines() if line.startswith("memory:")).split()[1]
    assert int(matches) >= 1, run.stdout
