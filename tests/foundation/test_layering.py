"""The layering DESIGN.md fixes, checked on the source: domain code imports
no grpc, generated protos, servicers, storage or providers; the two
services never import each other."""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).parents[2]


def _imports(path: pathlib.Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _violations(package: str, forbidden: tuple[str, ...]) -> list[str]:
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for name in _imports(path):
            if any(name == f or name.startswith(f + ".") for f in forbidden):
                found.append(f"{path.relative_to(ROOT)} imports {name}")
    return found


@pytest.mark.parametrize(("package", "forbidden"), [
    ("context_service/domain", ("grpc", "agentctx", "context_service.api", "context_service.storage",
                                "context_service.compaction", "context_service.turns", "sqlalchemy", "cache_service")),
    ("cache_service/domain", ("grpc", "agentctx", "cache_service.api", "cache_service.providers.gemini",
                              "google.genai", "context_service")),
    ("context_service", ("cache_service",)),
    ("cache_service", ("context_service",)),
])
def test_layers_import_only_what_they_may(package: str, forbidden: tuple[str, ...]) -> None:
    assert _violations(package, forbidden) == []
