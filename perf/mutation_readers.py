"""Where commstack reads what a module-level statement binds: the lines of the functions that read its names,
in any module of the package, following the names that other code at import binds from them
(`HEADER_NAMES = sorted(OSU_COLUMNS, ...)`, `from .osu_format import PT2PT_SIZES`, `osu_format.NO_SIZES`).

perf/mutation.py runs a mutant of code at import with the tests that reach those lines first: a killed mutant
then costs a few tests, not every test of its module. The analysis is static and may miss a reader
(`getattr(module, "NAME")`), so a mutant that survives them runs again with every test of its module."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

LIB = Path(__file__).resolve().parents[1] / "lib"
_FUNCTION = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


class _Module:
    def __init__(self, path: Path):
        self.path = path
        self.name = ".".join(path.relative_to(LIB).with_suffix("").parts).removesuffix(".__init__")
        self.package = self.name if path.name == "__init__.py" else self.name.rpartition(".")[0]
        self.tree = ast.parse(path.read_text())
        self.parent: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node
        self.names: dict[str, tuple[str, str]] = {}  # local name -> (module, name) it was imported as
        self.modules: dict[str, str] = {}            # local name or dotted path -> the module it is
        self.star = False                            # `from M import *`: any name of M may be read here
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.modules[a.asname or a.name] = a.name
            elif isinstance(node, ast.ImportFrom):
                base = self._absolute(node)
                for a in node.names:
                    if a.name == "*":
                        self.star = True
                    elif f"{base}.{a.name}" in _modules():
                        self.modules[a.asname or a.name] = f"{base}.{a.name}"
                    else:
                        self.names[a.asname or a.name] = (base, a.name)

    def _absolute(self, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        base = self.package.split(".")[: len(self.package.split(".")) - node.level + 1]
        return ".".join(base + ([node.module] if node.module else []))

    def reads(self, module: str, name: str):
        """The nodes of this module that read `name` of `module`."""
        local = {a for a, target in self.names.items() if target == (module, name)}
        if module == self.name:
            local.add(name)
        via = {a for a, m in self.modules.items() if m == module}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in local:
                yield node
            elif isinstance(node, ast.Attribute) and node.attr == name and isinstance(node.ctx, ast.Load) \
                    and ast.unparse(node.value) in via:
                yield node

    def statement(self, node: ast.AST) -> ast.stmt:
        """The module-level statement that holds `node`."""
        while self.parent.get(node) is not self.tree:
            node = self.parent[node]
        return node

    def function(self, node: ast.AST) -> ast.AST | None:
        """The innermost function or lambda that holds `node`; None at import."""
        while node in self.parent:
            up = self.parent[node]
            if isinstance(up, _FUNCTION):
                return up
            node = up
        return None


@cache
def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted((LIB / "commstack").rglob("*.py")):
        name = ".".join(path.relative_to(LIB).with_suffix("").parts).removesuffix(".__init__")
        out[name] = path
    return out


@cache
def _parsed() -> tuple[_Module, ...]:
    return tuple(_Module(p) for p in _modules().values())


def _bound(stmt: ast.stmt) -> list[str] | None:
    """The names a module-level statement binds; None for a statement whose effect is not a name."""
    if isinstance(stmt, ast.ClassDef):
        return [stmt.name]
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
        return names if all(isinstance(t, (ast.Name, ast.Tuple)) for t in targets) else None
    return None


def readers(module: str, lineno: int) -> dict[Path, set[int]] | None:
    """{file: lines} of the functions that read the names bound by the statement at `lineno` of `module`
    (a module-level assignment, or a class: its readers are those of the class); None where a name
    escapes the analysis (a star import, a statement that binds nothing) and every test must run."""
    by_name = {m.name: m for m in _parsed()}
    if module not in by_name:
        return None
    home = by_name[module]
    stmt = next((s for s in home.tree.body if s.lineno <= lineno <= (s.end_lineno or s.lineno)), None)
    names = _bound(stmt) if stmt is not None and not isinstance(stmt, _FUNCTION) else None
    if not names:
        return None
    todo, seen, out = [(module, n) for n in names], set(), {}
    while todo:
        key = todo.pop()
        if key in seen:
            continue
        seen.add(key)
        for m in _parsed():
            if m.star and m.name != key[0]:
                return None
            for node in m.reads(*key):
                fn = m.function(node)
                if fn is not None:
                    body = fn.body if isinstance(fn.body, list) else [fn.body]
                    inside = any(b.lineno <= node.lineno <= b.end_lineno for b in body)
                    first, last = (node.lineno, node.end_lineno) if inside else (body[0].lineno, body[-1].end_lineno)
                    out.setdefault(m.path, set()).update(range(first, last + 1))
                    continue
                bound = _bound(m.statement(node))  # read at import: follow what it binds
                if bound is None:
                    return None
                todo += [(m.name, n) for n in bound]
    return out
