"""Regenerates the Python code in gen/ from protos/.

Usage: python scripts/gen_protos.py [OUT_DIR]   (default: gen/)

The output is deterministic for a given grpcio-tools version, so a test can
regenerate into a temporary folder and compare it with gen/.
"""

from __future__ import annotations

import pathlib
import shutil
import sys

import grpc_tools
from grpc_tools import protoc

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROTOS = ROOT / "protos"


def generate(out_dir: pathlib.Path) -> None:
    package_root = out_dir / "agentctx"
    if package_root.exists():
        shutil.rmtree(package_root)
    out_dir.mkdir(parents=True, exist_ok=True)
    sources = sorted(str(p.relative_to(PROTOS)) for p in PROTOS.rglob("*.proto"))
    well_known = pathlib.Path(grpc_tools.__file__).parent / "_proto"
    args = [
        "protoc",
        f"-I{PROTOS}",
        f"-I{well_known}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *sources,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    # Regular packages (not namespace packages) so setuptools and type
    # checkers find them.
    for directory in [package_root, *sorted(p for p in package_root.rglob("*") if p.is_dir())]:
        (directory / "__init__.py").touch()
    (package_root / "py.typed").touch()


if __name__ == "__main__":
    generate(pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "gen")
