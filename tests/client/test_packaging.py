"""The distribution: it ships the one generated copy of the stubs (through
the clients/python/agentctx symlink) in a wheel and in an editable
install, depends on grpcio, protobuf and googleapis-common-protos alone,
with floors the root constraints satisfy, and imports nothing of the
services."""

from __future__ import annotations

import ast
import os
import pathlib
import subprocess
import sys
import tomllib
import zipfile

import pytest
from packaging.requirements import Requirement

from tests.client.venv import CLIENT, CONSTRAINTS, ROOT, client_python

GEN = ROOT / "gen" / "agentctx"
PACKAGE = CLIENT / "agentctx_client"


def _project() -> dict:
    return tomllib.loads((CLIENT / "pyproject.toml").read_text())["project"]


def _pins() -> dict[str, str]:
    pins = {}
    for line in CONSTRAINTS.read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==")
            pins[name.strip().lower().replace("_", "-")] = version.strip()
    return pins


def test_the_stubs_are_the_generated_copy() -> None:
    link = CLIENT / "agentctx"
    assert link.is_symlink() and os.readlink(link) == "../../gen/agentctx"
    assert link.resolve() == GEN.resolve()


def test_dependencies_are_the_three_and_the_constraints_satisfy_them() -> None:
    requirements = [Requirement(r) for r in _project()["dependencies"]]
    assert sorted(r.name for r in requirements) == ["googleapis-common-protos", "grpcio", "protobuf"]
    pins = _pins()
    for requirement in requirements:
        assert requirement.specifier.contains(pins[requirement.name]), (requirement, pins[requirement.name])


def _just_below(version: str) -> str:
    major, minor, patch = (int(x) for x in version.split("."))
    return f"{major}.{minor}.{patch - 1}" if patch else f"{major}.{minor - 1}.999"


def test_the_floors_cover_the_generated_codes_own_checks() -> None:
    """The generated modules refuse an older runtime: the floors must too."""
    requirements = {Requirement(r).name: Requirement(r).specifier for r in _project()["dependencies"]}
    protobuf = next(GEN.rglob("*_pb2.py")).read_text().split("Protobuf Python Version: ")[1].split()[0]
    grpcio = next(GEN.rglob("*_pb2_grpc.py")).read_text().split("GRPC_GENERATED_VERSION = '")[1].split("'")[0]
    for name, generated in (("protobuf", protobuf), ("grpcio", grpcio)):
        assert requirements[name].contains(generated), (name, generated)
        assert not requirements[name].contains(_just_below(generated)), (name, generated)


def test_the_client_imports_nothing_of_the_services() -> None:
    allowed = {"grpc", "google", "agentctx", "agentctx_client", "__future__"} | set(sys.stdlib_module_names)
    found = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    assert found <= allowed, found - allowed
    assert (PACKAGE / "py.typed").exists()


@pytest.mark.slow
def test_a_wheel_holds_the_generated_stubs(tmp_path) -> None:
    python = client_python()
    subprocess.run([str(python), "-m", "pip", "wheel", "--quiet", "--no-deps", "--disable-pip-version-check",
                    "-w", str(tmp_path), str(CLIENT)], check=True, capture_output=True, timeout=300)
    (wheel,) = tmp_path.glob("agentctx_client-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        for source in GEN.rglob("*"):
            if source.is_file() and source.suffix in (".py", ".pyi", ".typed"):
                arcname = f"agentctx/{source.relative_to(GEN)}"
                assert arcname in names
                assert archive.read(arcname) == source.read_bytes()
    assert {"agentctx_client/__init__.py", "agentctx_client/py.typed"} <= names


@pytest.mark.slow
def test_an_editable_install_reads_the_generated_stubs_in_place(tmp_path) -> None:
    venv = tmp_path / "editable"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--disable-pip-version-check",
                    "-e", str(CLIENT)], check=True, capture_output=True, timeout=300)
    # find_spec imports only the (empty) parent packages: no dependency is needed.
    probe = ("import importlib.util as u; print(u.find_spec('agentctx.context.v1.context_service_pb2').origin);"
             "print(u.find_spec('agentctx_client').origin)")
    out = subprocess.run([str(python), "-I", "-c", probe], check=True, capture_output=True, text=True,
                         cwd=tmp_path, timeout=60).stdout.split()
    assert pathlib.Path(out[0]).resolve() == (GEN / "context" / "v1" / "context_service_pb2.py").resolve()
    assert pathlib.Path(out[1]).resolve() == (PACKAGE / "__init__.py").resolve()
