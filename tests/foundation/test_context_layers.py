"""The context service's layers, checked on the source (every import
counts, inside functions and under TYPE_CHECKING too): only the composition
root imports the servicers; the application layer (building, turns,
compaction's service, ports) imports no grpc, generated protos, mapping,
storage or adapters; and no module imports itself through others."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).parents[2]
PACKAGE = ROOT / "context_service"

# Compaction's outbound adapters and its wiring may reach protos and clients.
ADAPTERS = {"context_service.compaction.model_compactor", "context_service.compaction.remote",
            "context_service.compaction.runtime"}
APPLICATION = ("context_service.building", "context_service.turns", "context_service.compaction",
               "context_service.ports")
FORBIDDEN_IN_APPLICATION = ("grpc", "agentctx", "context_service.api", "context_service.mapping",
                            "context_service.storage", "context_service.cache_client", "sqlalchemy")


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imports(path: pathlib.Path, modules: dict[str, pathlib.Path]) -> set[str]:
    """Imported modules: ``from pkg import sub`` names ``pkg.sub`` when that
    is a module (a package's own __init__ importing its submodules is not a
    cycle), else ``pkg``."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = {f"{node.module}.{alias.name}" for alias in node.names} & modules.keys()
            names.update(subs)
            if len(subs) < len(node.names):
                names.add(node.module)
    return names


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def test_only_the_composition_root_imports_the_servicers() -> None:
    modules = _modules()
    found = [
        f"{name} imports {imported}"
        for name, path in modules.items()
        if not _within(name, ("context_service.api", "context_service.server"))
        for imported in _imports(path, modules)
        if _within(imported, ("context_service.api",))
    ]
    assert found == []


def test_the_application_layer_sees_ports_and_domain_types_only() -> None:
    modules = _modules()
    found = [
        f"{name} imports {imported}"
        for name, path in modules.items()
        if _within(name, APPLICATION) and name not in ADAPTERS
        for imported in _imports(path, modules)
        if _within(imported, FORBIDDEN_IN_APPLICATION)
    ]
    assert found == []


def test_no_import_cycles() -> None:
    modules = _modules()
    graph = {name: {i for i in _imports(path, modules) if i in modules and i != name} for name, path in modules.items()}
    cycles: list[list[str]] = []

    def visit(name: str, trail: list[str], done: set[str]) -> None:
        for dep in sorted(graph[name]):
            if dep in trail:
                cycles.append([*trail[trail.index(dep):], dep])
            elif dep not in done:
                visit(dep, [*trail, dep], done)
        done.add(name)

    done: set[str] = set()
    for name in sorted(graph):
        if name not in done:
            visit(name, [name], done)
    assert cycles == []
