"""No import circle in lib/commstack: every `import` of a commstack module (at the top or inside a
function) is an edge, and the graph has no cycle. A circle works only by the order modules load in."""

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


def test_the_graph_sees_the_imports():
    graph = import_graph()
    assert "commstack.errors" in graph["commstack.files"]
    assert "commstack.config" in graph["commstack.run.steps"]


def test_a_circle_is_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_in_lib_commstack():
    assert cycles(import_graph()) == []
