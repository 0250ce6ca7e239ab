"""The package's shape: the import graph has no cycle, array kernels never import the services layer,
nothing outside the façade imports `geoengine.server`, the gateway package stays below the server, and
analysis/ sits above `Engine`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "geoengine"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path, name: str) -> set[str]:
    """Every geoengine module this module imports, at module level or inside functions."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("geoengine"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if not mod.startswith("geoengine"):
                continue
            out.add(mod)
            for a in node.names:  # `from geoengine.services import route` imports a module
                out.add(f"{mod}.{a.name}")
    return out


def _graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in PKG.rglob("*.py")}
    graph = {}
    for name, path in files.items():
        deps = set()
        for mod in _imports(path, name):
            # resolve to the longest known module
            while mod and mod not in files:
                mod = mod.rpartition(".")[0]
            if mod and mod != name and not name.startswith(mod + ".") and mod != "geoengine":
                deps.add(mod)
        graph[name] = deps
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def test_import_graph_has_no_cycle():
    cycle = _cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_cycle_check_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("low, high", [
    ("geoengine.routing", "geoengine.services"),
    ("geoengine.routing", "geoengine.engine"),
    ("geoengine.services", "geoengine.engine"),
    ("geoengine.graph", "geoengine.routing"),
    ("geoengine.costing", "geoengine.routing"),
    ("geoengine.engine", "geoengine.dialects"),
    ("geoengine.services", "geoengine.dialects"),
    ("geoengine.routing", "geoengine.dialects"),
    ("geoengine.search", "geoengine.dialects"),
    ("geoengine.dialects", "geoengine.server"),
    # the gateway package serves the CLI and the server alike: it never reaches up into the façade
    ("geoengine.gateway", "geoengine.server"),
    # analysis/ sits strictly above Engine: what Engine calls lives below it (issue 27)
    ("geoengine.engine", "geoengine.analysis"),
    ("geoengine.services", "geoengine.analysis"),
    ("geoengine.routing", "geoengine.analysis"),
])
def test_layers_import_downwards_only(low, high):
    bad = sorted(f"{n} -> {m}" for n, deps in _graph().items() if n.startswith(low)
                 for m in deps if m == high or m.startswith(high + "."))
    assert not bad, bad


def test_only_the_facade_imports_the_server():
    bad = sorted(f"{n} -> {m}" for n, deps in _graph().items() if not n.startswith("geoengine.server")
                 and n != "geoengine.cli" for m in deps if m.startswith("geoengine.server"))
    assert not bad, bad


SERVER = PKG / "server"


def _literals(path: Path) -> set:
    return {n.value for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(n, ast.Constant)}


def test_one_table_one_admission_one_framing():
    """The server's fast dispatchers know the endpoints only through the table (server/endpoints.py):
    they import no route module but the tiles' (the front door's prebuilt tile heads) and name no
    endpoint path; the gateway headers are read only by admission (server/admission.py); the problem
    body's media type is written only by server/framing.py."""
    for name in ("hotpath.py", "frontdoor.py"):
        path = SERVER / name
        imports = _imports(path, _module_name(path))
        assert "geoengine.server.endpoints" in imports or "geoengine.server" in imports, name
        routes = {m for m in imports if m.startswith("geoengine.server.routes.")}
        assert all(m.startswith("geoengine.server.routes.tiles") for m in routes), (name, routes)
        paths = {c for c in _literals(path) if isinstance(c, str) and c.startswith("/") and c not in ("/", "/tiles/")}
        assert not paths, (name, paths)
    for path in SERVER.rglob("*.py"):
        literals = _literals(path)
        if path.name != "admission.py":
            assert b"x-gateway-key" not in literals and b"x-gateway-host" not in literals, path
        if path.name != "framing.py":
            assert "application/problem+json" not in literals, path
