"""tests/polyglot/gen/ is exactly what `buf generate` (buf.gen.yaml,
protoc-gen-es from tools/) makes from protos/ and google.rpc's error
details."""

from __future__ import annotations

import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOLS = ROOT / "tools" / "node_modules"


def _tree(root: pathlib.Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_typescript_stubs_are_fresh(tmp_path: pathlib.Path) -> None:
    assert (TOOLS / ".bin" / "protoc-gen-es").exists(), "the tools are not installed: cd tools && npm ci"
    result = subprocess.run([str(TOOLS / ".bin" / "buf"), "generate", "--output", str(tmp_path)], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    fresh, committed = _tree(tmp_path / "tests" / "polyglot" / "gen"), _tree(ROOT / "tests" / "polyglot" / "gen")
    assert sorted(fresh) == sorted(committed), "tests/polyglot/gen/ has missing or extra files: run `make gen`"
    stale = sorted(name for name in fresh if fresh[name] != committed[name])
    assert not stale, f"tests/polyglot/gen/ is stale ({', '.join(stale)}): run `make gen`"
