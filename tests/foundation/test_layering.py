"""The layering docs/ARCHITECTURE.md describes ("Packages and layers"), checked on the source with every import
at any depth (module level, inside functions and ``if TYPE_CHECKING``,
relative imports resolved, ``importlib.import_module`` of a module named in
a string): domain code imports no grpc, generated protos, servicers,
storage or providers; the cache service's servicers import no providers
(the composition root builds the router); agentctx_common imports neither service nor the
command; the services never import each other; nothing imports
agentctx_cli, the composition root; and no module imports itself back
through any chain."""

from __future__ import annotations

import ast
import pathlib
from collections.abc import Iterable

import pytest

ROOT = pathlib.Path(__file__).parents[2]
PACKAGES = ("agentctx_common", "agentctx_cli", "context_service", "cache_service")


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _sources() -> dict[str, pathlib.Path]:
    return {_module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))}


def _imported_names(module: str, path: pathlib.Path) -> set[str]:
    """Every dotted name the file imports, anywhere in it; ``from X import
    Y`` yields X.Y, which names a submodule or else resolves to X. (A
    package's ``__init__`` that runs before its submodule is not an edge:
    every submodule would otherwise cycle with a package that re-exports it.)"""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    dynamic = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            names.update(source if alias.name == "*" else f"{source}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Attribute) and node.attr == "import_module":
            dynamic = True
    if dynamic:  # importlib.import_module(NAME) over names held in strings
        names.update(n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str))
    return names


def _resolve(name: str, known: Iterable[str]) -> str | None:
    """The module of ours that importing ``name`` runs: itself, or the
    nearest enclosing module (``from pkg import function``)."""
    modules = set(known)
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _graph() -> dict[str, set[str]]:
    sources = _sources()
    graph: dict[str, set[str]] = {}
    for module, path in sources.items():
        edges = {_resolve(name, sources) for name in _imported_names(module, path)}
        graph[module] = {e for e in edges if e is not None and e != module}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def _all_imports(package: str) -> list[tuple[str, str]]:
    sources = _sources()
    return [(module, name) for module, path in sources.items() if module == package or module.startswith(package + ".")
            for name in sorted(_imported_names(module, path))]


def _violations(package: str, forbidden: tuple[str, ...]) -> list[str]:
    return [f"{module} imports {name}" for module, name in _all_imports(package)
            if any(name == f or name.startswith(f + ".") for f in forbidden)]


def test_the_reader_sees_imports_at_any_depth(tmp_path: pathlib.Path) -> None:
    """The checks below are only as good as this reader."""
    source = tmp_path / "probe.py"
    source.write_text(
        "import importlib\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from cache_service import settings\n"
        "def f():\n    from ..storage import engine\n    from . import runner\n"
        "    import agentctx_cli.main\n    return importlib.import_module('cache_service.app')\n"
    )
    names = _imported_names("context_service.turns.probe", source)
    assert {"cache_service.settings", "context_service.storage.engine", "context_service.turns.runner",
            "agentctx_cli.main", "cache_service.app"} <= names
    assert _resolve("context_service.turns.runner.run_turn", _sources()) == "context_service.turns.runner"
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# Cycles whose removal is on another branch. Each entry's xfail below turns
# into a failure once its cycle is gone: then delete the entry.
def test_no_import_cycles() -> None:
    assert _cycles(_graph()) == []


def test_nothing_imports_the_command() -> None:
    """agentctx_cli is the composition root: it imports the rest, and only
    tests and benchmarks (clients of it) import it."""
    found = [f"{module} imports {name}" for package in PACKAGES if package != "agentctx_cli"
             for module, name in _all_imports(package) if name == "agentctx_cli" or name.startswith("agentctx_cli.")]
    assert found == []


@pytest.mark.parametrize(("package", "forbidden"), [
    ("context_service.domain", ("grpc", "agentctx", "context_service.api", "context_service.storage",
                                "context_service.compaction", "context_service.turns", "sqlalchemy", "cache_service",
                                "agentctx_cli")),
    ("cache_service.domain", ("grpc", "agentctx", "cache_service.api", "cache_service.providers.gemini",
                              "google.genai", "context_service", "agentctx_cli")),
    # The servicers and their mapping get the router from the composition root.
    ("cache_service.api", ("cache_service.providers",)),
    ("agentctx_common", ("context_service", "cache_service", "agentctx_cli")),
    ("context_service", ("cache_service", "agentctx_cli")),
    ("cache_service", ("context_service", "agentctx_cli")),
])
def test_layers_import_only_what_they_may(package: str, forbidden: tuple[str, ...]) -> None:
    assert _violations(package, forbidden) == []
