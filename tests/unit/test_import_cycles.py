"""No import circle in lib/commstack: every `import` of a commstack module (at the top or inside a
function) is an edge, and the graph has no cycle. A circle works only by the order modules load in.
Nor between packages: no package (commstack.run, .results, .tools, ...; a module of commstack's top level
counts as one of its own) imports from a package that imports from it, so that each one has a place
in one order of layers."""

import ast

from commstack.paths import TOP

LIB = TOP / "lib"


def module_of(path) -> str:
    parts = list(path.relative_to(LIB).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """commstack module -> the commstack modules it imports (a `from P import name` names the
    submodule P.name where there is one, else P)."""
    files = {module_of(p): p for p in (LIB / "commstack").rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                edges |= {a.name for a in node.names if a.name in files}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package, one level up per dot after the first
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                for a in node.names:
                    target = f"{base}.{a.name}"
                    if target in files:
                        edges.add(target)
                    elif base in files:
                        edges.add(base)
        graph[name] = edges - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each module that is on one (depth-first search)."""
    found, state = [], {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                found.append(trail[trail.index(nxt):] + [node, nxt] if nxt in trail else [node, nxt])
            elif nxt not in state:
                visit(nxt, trail + [node])
        state[node] = "done"
    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    return found


def unit(module: str) -> str:
    """The package a module belongs to: commstack.run.launch -> commstack.run; commstack.errors is its own."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    packages: dict[str, set[str]] = {}
    for module, imported in graph.items():
        packages.setdefault(unit(module), set()).update(unit(m) for m in imported)
    return {p: imported - {p} for p, imported in packages.items()}


def test_the_graph_sees_the_imports():
    graph = import_graph()
    assert "commstack.errors" in graph["commstack.files"]
    assert "commstack.config" in graph["commstack.run.steps"]


def test_a_circle_is_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_in_lib_commstack():
    assert cycles(import_graph()) == []


def test_the_package_graph_joins_what_each_module_imports():
    packages = package_graph({"c.a.x": {"c.b.y", "c.a.z"}, "c.a.z": {"c.e"}, "c.b.y": set(), "c.e": set()})
    assert packages == {"c.a": {"c.b", "c.e"}, "c.b": set(), "c.e": set()}
    assert cycles(package_graph({"c.a.x": {"c.b.y"}, "c.b.y": {"c.a.z"}, "c.a.z": set()})) == [["c.a", "c.b", "c.a"]]


def test_no_package_imports_from_a_package_that_imports_from_it():
    graph = import_graph()
    found = cycles(package_graph(graph))
    why = {f"{a} -> {b}": sorted(f"{m} imports {i}" for m in graph if unit(m) == a for i in graph[m] if unit(i) == b)
           for cycle in found for a, b in zip(cycle, cycle[1:])}
    assert found == [], why
