"""The package's shape: the import graph has no cycle, array kernels never import the services layer,
nothing outside the façade imports `geoengine.server`, the gateway package stays below the server,
analysis/ sits above `Engine`, the services, the dialects and the server hold no Numba kernel (they live in
the kernel packages), and no private name (`_x`) crosses a module boundary."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "geoengine"


def _module_name(path: Path, pkg: Path = PKG) -> str:
    rel = path.relative_to(pkg.parent).with_suffix("")
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


# -- kernels live in the kernel packages; private names stay in their module (issue 27) ----------------

#: packages whose own modules still reach into other modules' private names; each joins the rule below when
#: its owner has cleaned it (issue 27). Nobody may use the private names of routing/ or services/.
PRIVATE_NAMES_NOT_YET = ("geoengine.server", "geoengine.gateway", "geoengine.search", "geoengine.tiles",
                         "geoengine.engine")
PROTECTED = ("geoengine.routing", "geoengine.services")
NUMBA_DECORATORS = {"njit", "jit", "vectorize", "guvectorize", "stencil", "cfunc", "jitclass"}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _within(name: str, prefixes) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _resolve(path: Path, name: str, node: ast.ImportFrom) -> str:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    if not node.level:
        return node.module or ""
    base = package.split(".")
    base = base[: len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _module_aliases(tree: ast.AST, path: Path, name: str, files: dict) -> dict[str, str]:
    """Local names bound to geoengine modules: `import geoengine.x as m`, `from geoengine.x import y`
    (y a module)."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("geoengine") and a.asname and a.name in files:
                    out[a.asname] = a.name
        elif isinstance(node, ast.ImportFrom):
            mod = _resolve(path, name, node)
            for a in node.names:
                if f"{mod}.{a.name}" in files:
                    out[a.asname or a.name] = f"{mod}.{a.name}"
    return out


def _defined_names(tree: ast.AST) -> set[str]:
    """Every name a module defines or assigns (functions, classes, attributes, locals, slots)."""
    names = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store):
            names.add(n.attr)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.add(n.id)
        elif isinstance(n, ast.arg):
            names.add(n.arg)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            names.add(n.value)  # __slots__, getattr(obj, "_x")
    return names


def private_crossings(pkg: Path = PKG) -> list[str]:
    """Private names used across a module boundary: `from geoengine.x import _y`, `module._y` on an
    imported geoengine module and, in routing/ and services/, `obj._y` on another module's object
    (`_y` defined nowhere in the using module). A package's own private submodule (`from geoengine
    import _startup` in geoengine/__init__) is its own business."""
    files = {_module_name(p, pkg): p for p in pkg.rglob("*.py")}
    bad = []
    for name, path in sorted(files.items()):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        covered = not _within(name, PRIVATE_NAMES_NOT_YET)
        aliases = _module_aliases(tree, path, name, files)
        own = _defined_names(tree) if _within(name, PROTECTED) else set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                mod = _resolve(path, name, node)
                if not mod.startswith("geoengine"):
                    continue
                for a in node.names:
                    if not _private(a.name):
                        continue
                    sub = f"{mod}.{a.name}"
                    if sub in files and (name == mod or name.startswith(mod + ".")):
                        continue
                    if covered or _within(mod, PROTECTED):
                        bad.append(f"{name}: from {mod} import {a.name}")
            elif isinstance(node, ast.Attribute) and _private(node.attr):
                base = node.value
                if isinstance(base, ast.Name) and base.id in aliases:
                    target = aliases[base.id]
                    if covered or _within(target, PROTECTED):
                        bad.append(f"{name}: {base.id}.{node.attr} ({target})")
                elif (_within(name, PROTECTED) and not (isinstance(base, ast.Name) and base.id in ("self", "cls"))
                      and node.attr not in own):
                    bad.append(f"{name}: {ast.unparse(node)}")
    return bad


def test_no_private_name_crosses_a_module():
    bad = private_crossings()
    assert not bad, bad


def test_the_private_name_check_finds_crossings(tmp_path):
    pkg = tmp_path / "geoengine"
    (pkg / "routing").mkdir(parents=True)
    (pkg / "services").mkdir()
    for d in (pkg, pkg / "routing", pkg / "services"):
        (d / "__init__.py").write_text("")
    (pkg / "routing" / "ch.py").write_text("def _table():\n    pass\n\n\nclass CH:\n    def _ws(self):\n        pass\n")
    (pkg / "services" / "router.py").write_text(
        "from geoengine.routing.ch import _table\nfrom geoengine.routing import ch\n\n\n"
        "def f(hierarchy):\n    ch._table()\n    return hierarchy._ws()\n")
    assert private_crossings(pkg) == ["geoengine.services.router: from geoengine.routing.ch import _table",
                                      "geoengine.services.router: ch._table (geoengine.routing.ch)",
                                      "geoengine.services.router: hierarchy._ws"]
    (pkg / "services" / "router.py").write_text("from geoengine.routing.ch import CH\n\n\ndef f():\n"
                                                 "    return CH()\n")
    assert private_crossings(pkg) == []


def numba_kernels(path: Path) -> list[str]:
    """Numba-compiled functions and Numba imports of one module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "numba" for a in node.names):
            out.append("import numba")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "numba":
            out.append(f"from {node.module} import ...")
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            for d in node.decorator_list:
                target = d.func if isinstance(d, ast.Call) else d
                label = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
                if label in NUMBA_DECORATORS:
                    out.append(f"@{label} {node.name}")
    return out


def test_services_hold_no_numba_kernel():
    """Kernels live in the kernel packages (routing/, narrative/, geo, ...); a service calls them."""
    bad = sorted(f"{_module_name(p)}: {k}" for p in (PKG / "services").rglob("*.py") for k in numba_kernels(p))
    assert not bad, bad


@pytest.mark.parametrize("package", ["dialects", "server"])
def test_dialects_and_the_server_hold_no_numba_kernel(package):
    """The façade and the dialects never compute (issue 27): no Numba kernel or import in dialects/ or
    server/; the OSRM dialect's junction arms are narrative/junctions.py, its steps services/osrm_steps.py."""
    bad = sorted(f"{_module_name(p)}: {k}" for p in (PKG / package).rglob("*.py") for k in numba_kernels(p))
    assert not bad, bad


def test_the_numba_check_finds_a_kernel(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import numba\n\n\n@numba.njit(cache=True)\ndef k(a):\n    return a\n")
    assert numba_kernels(f) == ["import numba", "@njit k"]
    f.write_text("def k(a):\n    return a\n")
    assert numba_kernels(f) == []


SERVER = PKG / "server"


def _literals(path: Path) -> set:
    return {n.value for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(n, ast.Constant)}


def test_one_table_one_admission_one_framing():
    """The server's one fast dispatcher (server/dispatch.py) knows the endpoints only through the table
    (server/endpoints.py): it imports no route module but the tiles' (the front door's prebuilt tile heads) and name no
    endpoint path; the gateway headers are read only by admission (server/admission.py); the problem
    body's media type is written only by server/framing.py."""
    for name in ("dispatch.py",):
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


def test_routes_are_declared_only_by_the_table():
    """The FastAPI routes are generated from the endpoint table (server/endpoints.py `router`): no other
    server module declares a route (a router, a route decorator, a raw route) or names a uvicorn private."""
    declares = re.compile(r"APIRouter\(|add_api_route|@\w+\.(get|post|put|delete|head|api_route)\(|\bRoute\(|\bMount\(")
    for path in SERVER.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if path.name != "endpoints.py":
            assert not declares.search(text), path
    protocol = (SERVER / "protocol.py").read_text(encoding="utf-8")
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    privates = {n for n in dir(HttpToolsProtocol) if n.startswith("_") and not n.startswith("__")}
    assert privates, "uvicorn's protocol has no private names: the check reads nothing"
    used = {n for n in privates if re.search(rf"\.{n}\b", protocol)}
    assert not used, f"protocol.py uses uvicorn's private names: {sorted(used)}"
