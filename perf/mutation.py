"""Mutation score of the verdict code: does a test fail when a module of commstack.tools (each tool's parser,
its columns and version tables), commstack.results (lines, parse, tables, noise, references, judge, compare,
diagnosis, report, ...) or commstack.screen (the verdict on nodes and links, the matchings, the screen file, what
it writes, the plan) is wrong?

Each mutant is one small change to a module, made by rewriting its syntax tree. In functions: comparison
flips (< <=, > >=, == !=, in, is), negated conditions (if, while, x if c else y, comprehension filters),
`and` <-> `or`, a deleted `raise` or call statement, a number +1 and -1, True <-> False, min <-> max,
`return X` -> `return None`, an early `return` at the start of a function that returns nothing,
continue <-> break. In the code that runs at import (module-level assignments: tuples, dicts, a
dataclass's or constructor's arguments, comprehensions; class-level defaults): the same changes to the
values, and each keyword argument of a call deleted. Strings (messages, patterns) are left alone, and so
is a tool module's launch code (LAUNCH_CODE: argv, native binary and its build) and the screen's code that
drives Slurm (SLURM_CODE: sinfo, the allocation, srun steps, scontrol), which only the slurm and multinode
tiers run.

First the unit tests run once under coverage.py, each in a dynamic context of its own (and each test
file's import in one of its own), which gives the tests that reach each line; a fresh interpreter's
import of commstack under coverage gives the lines that run at import. A mutant of a function the tests
call runs in a forked child of this process, which puts the mutated function's code into the loaded
module (every reference to the function sees it) and runs those tests with pytest (-x, fastest first,
Hypothesis seeded). A mutant of code that runs at import (module-level data, a function only import
calls) cannot be put into a loaded module: every module that copied the value holds the old one. It runs
in a fresh interpreter (`--child`) that imports the module mutated (an import hook) and runs the tests that
reach where the value is read (perf/mutation_readers.py), then, if it survives those, every test that
reaches the module, then the whole unit tier (a registry's data, such as a Tool's facts, is read through code
of other modules). Each is killed past its time limit. Tests that run commstack in a subprocess
cannot see a mutant; coverage does not see them either, so they are never chosen. A mutant is killed when
a test fails (or cannot be collected, or the import fails) or times out, survives when all pass, and is
skipped when perf/mutation-equivalent.yaml lists it with the reason no test can tell it from the code.
The score is killed / (mutants - equivalent) per module.

  bin/commstack venv && .venv/bin/python perf/mutation.py [--modules osu osu_format nccl_tests ... diagnosis]
      [--check perf/mutation-score.yaml] [--record perf/mutation-score.yaml] [--timeout-factor 4]
      [--map FILE (the test map, kept and reused while lib/ and tests/ are unchanged)]
      [--recheck OUTPUT-OF-AN-EARLIER-RUN [--since ITS-COMMIT]]
      [--each (a line per mutant: outcome, seconds, the test that killed it)]

Prints the score per module and every survivor with file, line and mutation. --check exits 1 when a
module's score is below its recorded figure; --record writes the figures, module by module. One process, one mutant
at a time: on a shared machine it costs one core.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib
import importlib.abc
import importlib.machinery
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType, FunctionType

import coverage
import hypothesis.configuration
import pytest
import yaml

from commstack import files
from mutation_readers import readers

TOP = Path(__file__).resolve().parents[1]
LIB = TOP / "lib" / "commstack"
#: the verdict code: each tool's parser, the shared line machinery and the checks, references, judge, compare
#: (history on demand), the screen's modules; a module's key is its file's name (a screen module's: screen_ and
#: its name, as run, nodes, spec name other things too). Not here: tools/osu_install.py (where OSU's binaries
#: come from: launch code, as LAUNCH_CODE below), results/__init__.py and screen/__init__.py (empty)
MODULES = {"tools": "commstack.tools", "base": "commstack.tools.base", "osu": "commstack.tools.osu",
           "osu_format": "commstack.tools.osu_format", "nccl_tests": "commstack.tools.nccl_tests",
           "nccl_tables": "commstack.tools.nccl_tables", "mpi_pingpong": "commstack.tools.mpi_pingpong",
           "fi_pingpong": "commstack.tools.fi_pingpong", "ucx_perftest": "commstack.tools.ucx_perftest",
           "lines": "commstack.tools.lines", "noise": "commstack.tools.noise",
           "parse": "commstack.results.parse", "tables": "commstack.results.tables",
           "references": "commstack.results.references", "judge": "commstack.results.judge",
           "compare": "commstack.results.compare", "diagnosis": "commstack.results.diagnosis",
           "settle": "commstack.results.settle",
           "records": "commstack.results.records", "report": "commstack.results.report",
           "markup": "commstack.results.markup",
           "export": "commstack.results.export", "history": "commstack.results.history",
           "screen_verdict": "commstack.screen.verdict", "screen_output": "commstack.screen.output",
           "screen_matching": "commstack.screen.matching", "screen_spec": "commstack.screen.spec",
           "screen_plan": "commstack.screen.plan", "screen_nodes": "commstack.screen.nodes",
           "screen_pool": "commstack.screen.pool", "screen_run": "commstack.screen.run"}
#: a tool module's launch code (argv, native binary, its build, where an env or a typed option gives it; the
#: facts of its output): not verdict code, and run by the slurm tier's and `run --dry-run`'s subprocesses,
#: which coverage does not see; its parser and checks are mutated
LAUNCH_CODE = {"program", "native", "planned", "_from_spack", "tags", "stack", "on_path", "in_env", "given",
               "env_optional"}
#: the screen's functions (top-level, or Class.method) that drive Slurm: sinfo (went_down), the
#: allocation (variables, allocate), srun steps (probe, measure, run_all and the phases that call it: run,
#: phase, pairs), scontrol show topology (groups). Only the slurm and multinode tiers run them, in the
#: subprocesses of `bin/commstack screen`, which coverage does not see; the rest of those modules is mutated
SLURM_CODE = {"screen_nodes": {"probe"}, "screen_pool": {"measure", "run_all"},
              "screen_run": {"Screen.variables", "Screen.allocate", "Screen.run", "Screen.phase",
                             "Screen.went_down", "Screen.pairs", "Screen.groups"}}
#: module-level names that are no verdict code: what `import *` exports, a tool's dry-run placeholder
NOT_DATA = {"__all__", "PLACEHOLDER"}
#: the function name of a mutant of code that runs at import (module-level and class-level values)
AT_IMPORT = ""
EQUIVALENT = TOP / "perf" / "mutation-equivalent.yaml"
SCORES = TOP / "perf" / "mutation-score.yaml"
UNIT_TIER = ["tests/unit", "-m", "not slurm and not spack and not multinode and not hostile"]
PYTEST = ["-q", "-p", "no:cacheprovider", "--hypothesis-seed=0", "-o", "addopts=--strict-markers"]

FLIPS = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
         ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
SYMBOL = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=", ast.In: "in",
          ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}


@dataclass
class Mutant:
    module: str           # parse, judge, ...
    function: str         # qualified name of the top-level function or method it changes; "" for a constant
    lineno: int
    end_lineno: int
    line: str             # the source line, stripped: with `function` and `mutation` it names the mutant
    mutation: str
    index: int            # its place in the walk (make_tree rebuilds it from that)
    tests: list[str] = field(default_factory=list)
    outcome: str = ""     # killed | timeout | survived | equivalent | no test
    fresh: bool = False   # run in a fresh interpreter (code at import)
    killer: str = ""      # the test that failed first ("" for a mutated import that failed, or a timeout)
    unit: str = ""        # the source of what it changes: its function's, or the statement's run at import


# ------------------------------------------------------------------------------------ the mutants


class _Walk(ast.NodeTransformer):
    """Visits every mutation point in one fixed order; `apply` >= 0 makes that point's change."""

    def __init__(self, apply: int = -1):
        self.apply, self.count = apply, 0
        self.points: list[tuple[str, ast.AST, str]] = []  # (function, node, mutation)
        self.scope: list[tuple[str, str]] = []  # (class | def | constants, name) of the top-level function

    def _point(self, node: ast.AST, mutation: str, make):
        """Register a mutation point; return the mutated node when it is the one to apply."""
        self.points.append((".".join(name for _, name in self.scope), node, mutation))
        self.count += 1
        return make() if self.count - 1 == self.apply else None

    # scopes: functions (with the classes around them), and the values of module- and class-level assignments
    # (the code that runs at import: its mutants have the function AT_IMPORT)
    def visit_Module(self, node):
        node.body = [self._statement(stmt) for stmt in node.body]
        return node

    def _statement(self, stmt: ast.stmt) -> ast.stmt:
        if isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
            return self.visit(stmt)
        target = stmt.targets[0] if isinstance(stmt, ast.Assign) else getattr(stmt, "target", None)
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None \
                and not (isinstance(target, ast.Name) and target.id in NOT_DATA):
            outer, self.scope = self.scope, [("import", "<import>")]
            stmt.value = self.visit(stmt.value)
            self.scope = outer
        return stmt

    def visit_ClassDef(self, node):
        self.scope.append(("class", node.name))
        node.body = [self._statement(s) for s in node.body]
        self.scope.pop()
        return node

    def visit_FunctionDef(self, node):
        top = all(kind == "class" for kind, _ in self.scope)  # a method is a function of its own
        if top:
            self.scope.append(("def", node.name))
        if _docstring(node):
            node.body = [node.body[0]] + [self.visit(s) for s in node.body[1:]]
        else:
            node.body = [self.visit(s) for s in node.body]
        node.body = [s for s in node.body if s is not None]
        start = 1 if _docstring(node) else 0
        if top and len(node.body) > start and not any(isinstance(n, ast.Return) and n.value is not None
                                                      for n in ast.walk(node)):
            new = self._point(node.body[start], "early `return` at the start", lambda: ast.Return(None))
            if new is not None:
                node.body.insert(start, ast.copy_location(new, node.body[start]))
        if top:
            self.scope.pop()
        return node

    def visit_Compare(self, node):
        self.generic_visit(node)
        for i, op in enumerate(node.ops):
            flip = FLIPS[type(op)]

            def make(i=i, flip=flip):
                node.ops[i] = flip()
                return node
            new = self._point(node, f"`{SYMBOL[type(op)]}` -> `{SYMBOL[flip]}`", make)
            if new is not None:
                return new
        return node

    def _negate(self, node: ast.AST, test: ast.AST) -> ast.AST:
        def make():
            return test.operand if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) else \
                ast.UnaryOp(ast.Not(), test)
        new = self._point(test, "negated condition", make)
        return ast.copy_location(new, test) if new is not None else test

    def visit_If(self, node):
        self.generic_visit(node)
        node.test = self._negate(node, node.test)
        return node

    visit_While = visit_If

    def visit_IfExp(self, node):
        self.generic_visit(node)
        node.test = self._negate(node, node.test)
        return node

    def visit_comprehension(self, node):
        self.generic_visit(node)
        node.ifs = [self._negate(node, t) for t in node.ifs]
        return node

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        other = ast.Or if isinstance(node.op, ast.And) else ast.And

        def make():
            node.op = other()
            return node
        return self._point(node, f"`{_word(node.op)}` -> `{_word(other())}`", make) or node

    def visit_Raise(self, node):
        self.generic_visit(node)
        return self._point(node, "deleted `raise`", lambda: ast.copy_location(ast.Pass(), node)) or node

    def visit_Expr(self, node):
        self.generic_visit(node)
        if not isinstance(node.value, ast.Call):
            return node
        name = ast.unparse(node.value.func)
        return self._point(node, f"deleted call `{name}(...)`", lambda: ast.copy_location(ast.Pass(), node)) or node

    def visit_Return(self, node):
        self.generic_visit(node)
        if node.value is None or (isinstance(node.value, ast.Constant) and node.value.value is None):
            return node
        return self._point(node, "`return ...` -> `return None`",
                           lambda: ast.copy_location(ast.Return(None), node)) or node

    def visit_Constant(self, node):
        if isinstance(node.value, bool):
            return self._point(node, f"`{node.value}` -> `{not node.value}`",
                               lambda: ast.copy_location(ast.Constant(not node.value), node)) or node
        if not _number(node.value):
            return node
        for delta in (1, -1):
            value = node.value + delta
            new = self._point(node, f"`{node.value!r}` -> `{value!r}`",
                              lambda value=value: ast.copy_location(ast.Constant(value), node))
            if new is not None:
                return new
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        if self.scope[:1] == [("import", "<import>")]:  # data built at import: a dataclass's or constructor's argument
            for i, kw in enumerate(node.keywords):
                if kw.arg is None or kw.arg in LAUNCH_CODE:  # a tool's launch code: the slurm tier runs it
                    continue

                def drop(i=i):
                    del node.keywords[i]
                    return node
                new = self._point(node, f"deleted argument `{kw.arg}=`", drop)
                if new is not None:
                    return new
        if isinstance(node.func, ast.Name) and node.func.id in ("min", "max"):
            other = "max" if node.func.id == "min" else "min"

            def make():
                node.func = ast.copy_location(ast.Name(other, ast.Load()), node.func)
                return node
            return self._point(node, f"`{node.func.id}` -> `{other}`", make) or node
        return node

    def visit_Continue(self, node):
        return self._point(node, "`continue` -> `break`", lambda: ast.copy_location(ast.Break(), node)) or node

    def visit_Break(self, node):
        return self._point(node, "`break` -> `continue`", lambda: ast.copy_location(ast.Continue(), node)) or node

    def visit_JoinedStr(self, node):
        return node  # an f-string's parts are a message's text


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _word(op) -> str:
    return "and" if isinstance(op, ast.And) else "or"


def _docstring(node) -> bool:
    return bool(node.body) and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant) \
        and isinstance(node.body[0].value.value, str)


def source_path(name: str) -> Path:
    """The module's file, found without importing it (a child imports it mutated)."""
    base = TOP / "lib" / Path(*MODULES[name].split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def _units(tree: ast.Module, source: str) -> dict[str, str] | dict[int, str]:
    """The source of each top-level function and method (by the walk's qualified name), and of each statement
    run at import (by each of its line numbers)."""
    units: dict = {}

    def statements(body, prefix):
        for stmt in body:
            if isinstance(stmt, ast.FunctionDef):
                units[prefix + stmt.name] = ast.get_source_segment(source, stmt)
            elif isinstance(stmt, ast.ClassDef):
                statements(stmt.body, f"{prefix}{stmt.name}.")
            else:
                units.update(dict.fromkeys(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1),
                                           ast.get_source_segment(source, stmt)))
    statements(tree.body, "")
    return units


def mutants(name: str, source: str | None = None) -> tuple[Path, list[Mutant]]:
    """The module's mutants, of its file (or of `source`, an earlier version of it)."""
    path = source_path(name)
    source = path.read_text() if source is None else source
    lines = source.splitlines()
    walk = _Walk()
    tree = ast.parse(source)
    units = _units(tree, source)
    walk.visit(tree)
    out = []
    alike = Counter((f, n.lineno, m) for f, n, m in walk.points)
    for i, (function, node, mutation) in enumerate(walk.points):
        if MODULES[name].startswith("commstack.tools.") and function in LAUNCH_CODE \
                or function in SLURM_CODE.get(name, ()):
            continue
        # a line of data holds many alike values, and a line of code may hold two alike changes (two `1`s): the
        # column tells them apart, so that the equivalent list can name one
        if function == "<import>":
            function, mutation = AT_IMPORT, f"{mutation} at column {node.col_offset + 1}"
        elif alike[function, node.lineno, mutation] > 1:
            mutation = f"{mutation} at column {node.col_offset + 1}"
        out.append(Mutant(name, function, node.lineno, node.end_lineno or node.lineno, lines[node.lineno - 1].strip(),
                          mutation, i, unit=units[node.lineno if function == AT_IMPORT else function]))
    return path, out


def make_tree(path: Path, index: int) -> ast.Module:
    source = path.read_text()
    tree = ast.parse(source)
    walk = _Walk(apply=index)
    tree = ast.fix_missing_locations(walk.visit(tree))
    return tree


# ------------------------------------------------------------------- one mutant in a forked child


def _codes(code: CodeType):
    yield code
    for c in code.co_consts:
        if isinstance(c, CodeType):
            yield from _codes(c)


def apply(path: Path, m: Mutant) -> None:
    """Put mutant `m` of a function into the loaded module: the function's new code."""
    module = importlib.import_module(MODULES[m.module])
    tree = make_tree(path, m.index)
    code = {c.co_qualname: c for c in _codes(compile(tree, str(path), "exec"))}[m.function]
    obj = module
    for part in m.function.split("."):
        obj = inspect_attr(obj, part)
    while not isinstance(obj, FunctionType):
        obj = obj.fget if isinstance(obj, property) else obj.__wrapped__
    obj.__code__ = code


class _Mutated(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Import hook of a `--child`: the module `name` is imported with mutant `index` in it."""

    def __init__(self, name: str, index: int):
        self.fullname, self.path, self.index = MODULES[name], source_path(name), index

    def find_spec(self, fullname, path, target=None):
        if fullname != self.fullname:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        spec.loader = self
        return spec

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        exec(compile(make_tree(self.path, self.index), str(self.path), "exec"), module.__dict__)


def child(name: str, index: int, args: list[str]) -> int:
    """`--child NAME INDEX -- PYTEST-ARGS`: the tests in this fresh interpreter, module NAME imported with mutant
    INDEX (its code at import runs mutated); exit NO_IMPORT where the mutated module cannot be imported."""
    hypothesis.configuration.set_hypothesis_home_dir(os.environ["MUTATION_HYPOTHESIS"])
    sys.meta_path.insert(0, _Mutated(name, index))
    try:
        importlib.import_module(MODULES[name])
        importlib.import_module("commstack.cli.main")
    except Exception:  # noqa: BLE001 - a mutant that breaks the import is killed by it
        return NO_IMPORT
    return int(pytest.main(args))


def run_fresh(name: str, m: Mutant, timeout: float, log: str) -> int | None:
    """Mutant `m` in a `--child` interpreter: its exit status, None past `timeout`."""
    with open(log, "w") as out:
        p = subprocess.Popen([sys.executable, __file__, "--child", name, str(m.index), "--", *m.tests, "-x", *PYTEST],
                             stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=TOP)
        try:
            return p.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)  # our own child, not yet reaped: its group is still ours
            p.wait()
            return None


def import_lines(paths: dict[str, Path], out: Path) -> None:
    """The lines of each module that a fresh interpreter runs importing commstack (as a test run does)."""
    code = ("import coverage, json, sys; c = coverage.Coverage(data_file=None, include=sys.argv[2:]); c.start()\n"
            "import commstack.cli.main, commstack.results.history, commstack.results.export\n"
            + "".join(f"import {MODULES[n]}\n" for n in paths)
            + "c.stop(); d = c.get_data()\n"
            "open(sys.argv[1], 'w').write(json.dumps({f: sorted(d.lines(f) or []) for f in d.measured_files()}))\n")
    subprocess.run([sys.executable, "-c", code, str(out), *map(str, paths.values())], check=True, cwd=TOP)


def inspect_attr(obj, name: str):
    return obj.__dict__[name] if isinstance(obj, type) else getattr(obj, name)


def run_child(target, timeout: float | None, log: str = os.devnull) -> tuple[int | None, float]:
    """target() in a forked child in a process group of its own: (its exit status or None past
    `timeout`, seconds). The child's output goes to `log`."""
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        rc = 98
        try:
            os.setpgid(0, 0)
            null = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(null, 1)
            os.dup2(null, 2)
            rc = target()
        except BaseException:  # noqa: B036 - whatever it is, the child must not return into the parent's loop
            rc = 99
        finally:
            os._exit(rc)
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status), time.perf_counter() - start
        if timeout is not None and time.perf_counter() - start > timeout:
            os.killpg(pid, signal.SIGKILL)  # our own child, not yet reaped: its pid and group are still ours
            os.waitpid(pid, 0)
            return None, time.perf_counter() - start
        time.sleep(0.01)


# ------------------------------------------------------------------ which tests reach which line


class _Contexts:
    """pytest plugin: each test (and each test file's import) in a coverage context of its own."""

    def __init__(self, cov: coverage.Coverage):
        self.cov, self.seconds, self.failed = cov, {}, set()

    def pytest_runtest_logreport(self, report):
        if report.failed:
            self.failed.add(report.nodeid)

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(self, collector):
        if isinstance(collector, pytest.Module):
            self.cov.switch_context(collector.nodeid)
        try:
            return (yield)
        finally:
            self.cov.switch_context("")

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        self.cov.switch_context(item.nodeid)
        start = time.perf_counter()
        try:
            return (yield)
        finally:
            self.seconds[item.nodeid] = time.perf_counter() - start
            self.cov.switch_context("")


def test_map(out: Path, key: str) -> int:
    """In a child: the unit tier under coverage of the whole package (a mutant of data is read elsewhere); writes
    {key, contexts: [node ids], lines: {file: {line: [context index]}}, seconds: {node id: s}, failed: [node ids]}
    (a test that fails unmutated can kill nothing: it is left out)."""
    cov = coverage.Coverage(data_file=None, include=[str(LIB / "*")])
    cov.start()
    plugin = _Contexts(cov)
    rc = pytest.main([*UNIT_TIER, *PYTEST], plugins=[plugin])
    cov.stop()
    data = cov.get_data()
    index: dict[str, int] = {}
    lines = {str(Path(f).relative_to(TOP)): {str(n): sorted(index.setdefault(c, len(index)) for c in ctx if c)
                                             for n, ctx in data.contexts_by_lineno(f).items()}
             for f in data.measured_files()}
    seconds = {t: s for t, s in plugin.seconds.items() if t not in plugin.failed}
    files.write_atomic(out, json.dumps({"key": key, "contexts": list(index), "lines": lines, "seconds": seconds,
                                        "failed": sorted(plugin.failed)}))
    return int(rc) if rc not in (0, 1) else 0


def map_key() -> str:
    """What the map depends on: the package's and the tests' files."""
    digest = hashlib.sha256()
    for path in sorted([*LIB.rglob("*.py"), *(p for p in (TOP / "tests").rglob("*") if p.is_file())]):
        if "__pycache__" not in path.parts:
            digest.update(f"{path.relative_to(TOP)}\0".encode() + path.read_bytes())
    return digest.hexdigest()


class TestMap:
    """Which tests reach which line of the package, and each test's seconds unmutated."""

    def __init__(self, data: dict):
        self.contexts, self.lines, self.seconds = data["contexts"], data["lines"], data["seconds"]

    def reach(self, path: Path, numbers=None) -> set[str]:
        """The contexts (tests, and test files' imports) that ran any of these lines of `path` (None: any)."""
        lines = self.lines.get(str(path.relative_to(TOP)), {})
        numbers = lines if numbers is None else map(str, numbers)
        return {self.contexts[i] for n in numbers for i in lines.get(n, ())}

    def choose(self, contexts: set[str], whole_files: bool = False, kills: dict[str, int] | None = None) -> list[str]:
        """The tests of these contexts, those that killed most of the module's mutants so far first, then the
        fastest. A test that reaches a line may compute once (functools.cache) what its siblings then only read:
        every parametrization of a test that reaches it; every test of a file whose import reaches it, or of
        every file that reaches it with `whole_files` (code at import)."""
        kills = kills or {}
        whole = {c.split("::")[0] for c in contexts if whole_files or "::" not in c}
        each = {c.split("[")[0] for c in contexts if "::" in c}
        tests = {t for t in self.seconds if t.split("::")[0] in whole or t.split("[")[0] in each}
        return sorted(tests, key=lambda t: (-kills.get(t, 0), self.seconds[t], t))


# ------------------------------------------------------------------------------------------ main


def load_equivalent() -> list[dict]:
    entries = yaml.safe_load(EQUIVALENT.read_text()) if EQUIVALENT.exists() else []
    for e in entries or []:
        missing = {"module", "function", "line", "mutation", "reason"} - set(e)
        if missing:
            sys.exit(f"{EQUIVALENT}: an entry lacks {sorted(missing)}: {e}")
    return entries or []


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modules", nargs="+", choices=MODULES, default=list(MODULES))
    ap.add_argument("--timeout-factor", type=float, default=4.0,
                    help="a mutant's time limit: this many times its tests' time unmutated, plus --timeout-min")
    ap.add_argument("--timeout-min", type=float, default=10.0)
    ap.add_argument("--check", type=Path, help="exit 1 when a module scores below its figure in this file")
    ap.add_argument("--record", type=Path, help="write the scores to this file")
    ap.add_argument("--map", type=Path, help="keep the test map in this file, and take it from there while the "
                    "package's and the tests' files are unchanged")
    ap.add_argument("--each", action="store_true",
                    help="a line per mutant: its outcome, its time and the test that killed it (a run whose kills "
                         "take no time has a test failing whatever the code)")
    ap.add_argument("--only", nargs="+", help="only the mutants whose 'file:line mutation' contains one of these")
    ap.add_argument("--child", nargs=2, metavar=("MODULE", "INDEX"), help=argparse.SUPPRESS)
    ap.add_argument("rest", nargs="*", help=argparse.SUPPRESS)
    ap.add_argument("--recheck", type=Path, metavar="OUTPUT",
                    help="run only the survivors this script printed to OUTPUT and count the rest killed there (of a "
                         "module that run did not finish, only those its --each lines show killed): "
                         "valid while the modules are unchanged since (added tests cannot revive a killed mutant)")
    ap.add_argument("--since", metavar="COMMIT",
                    help="with --recheck: the commit that run was made at; a mutant of a function (or a statement run "
                         "at import) changed since is run too, not counted killed")
    args = ap.parse_args()
    if args.child:
        return child(args.child[0], int(args.child[1]), args.rest)

    os.chdir(TOP)
    start = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="mutation-"))  # the test map, the children's log, Hypothesis' examples
    try:
        return _main(args, tmp, start)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _main(args: argparse.Namespace, tmp: Path, start: float) -> int:
    hypothesis.configuration.set_hypothesis_home_dir(str(tmp / "hypothesis"))
    os.environ["MUTATION_HYPOTHESIS"] = str(tmp / "hypothesis")
    for name in MODULES.values():
        importlib.import_module(name)
    importlib.import_module("commstack.cli.main")
    found = {name: mutants(name) for name in args.modules}
    paths = {name: p for name, (p, _) in found.items()}

    log = tmp / "child.log"
    mapped, key = args.map or tmp / "map.json", map_key()
    data = json.loads(mapped.read_text()) if args.map and args.map.exists() else {}
    if data.get("key") == key:
        print(f"test map: {len(data['seconds'])} unit tests, from {mapped}", flush=True)
    else:
        rc, took = run_child(lambda: test_map(mapped, key), None, str(log))
        if rc != 0:
            print(log.read_text()[-3000:], f"the unit tests could not run (exit {rc})", file=sys.stderr)
            return 2
        data = json.loads(mapped.read_text())
        print(f"test map: {len(data['seconds'])} unit tests under coverage in {took:.0f} s", flush=True)
    tests = TestMap(data)
    import_lines(paths, tmp / "import.json")
    at_import = {f: set(ls) for f, ls in json.loads((tmp / "import.json").read_text()).items()}
    for t in data["failed"]:
        print(f"  fails unmutated, left out: {t}", flush=True)

    equivalent = load_equivalent()
    rechecked = survivors(args.recheck) if args.recheck else None
    # a mutant of the earlier run's code (its function, or statement at import, unchanged) that it did not print
    # as a survivor was killed there; any other is run
    then = {name: mutants(name, subprocess.run(["git", "show", f"{args.since}:{paths[name].relative_to(TOP)}"],
                                               cwd=TOP, check=True, capture_output=True, text=True).stdout)[1]
            if args.since else found[name][1] for name in args.modules}
    earlier = {(m.module, m.function, m.unit, m.line, m.mutation) for ms in then.values() for m in ms}
    # a module that run did not finish (stopped early: no summary line) counts killed only what its --each lines
    # show killed
    each = each_outcomes(args.recheck, then) if args.recheck else {}
    text = args.recheck.read_text() if args.recheck else ""
    each_modules = {key[0] for key in each} - {n for n in args.modules if re.search(rf"^{n}: \d+ mutants", text, re.M)}
    used = set()
    results: dict[str, list[Mutant]] = {}
    kills: dict[str, int] = {}

    def judge(m: Mutant, broken: set[str]) -> int | None:
        """Runs mutant `m` of module `name` (file `path`) against the tests that reach it, less `broken`; sets its
        outcome and killer. TOOL_FAILED where the tool failed."""
        lines = range(m.lineno, m.end_lineno + 1)
        m.tests = [t for t in tests.choose(tests.reach(path, lines), kills=kills) if t not in broken]
        # code at import, or a function only import calls: a fresh interpreter imports it mutated
        m.fresh = m.function == AT_IMPORT or (not m.tests and bool(set(lines) & at_import.get(str(path), set())))
        tries = [m.tests]
        if m.fresh:
            # first the tests that reach where its value is read, then every test that reaches the module, then
            # the whole unit tier (data read through a registry, e.g. a Tool's facts, reaches no line of its module)
            read = readers(MODULES[name], m.lineno) or {}
            tries = [tests.choose(set().union(*(tests.reach(f, ns) for f, ns in read.items())), kills=kills),
                     tests.choose(tests.reach(path), whole_files=True, kills=kills),
                     tests.choose(set(tests.seconds), whole_files=True, kills=kills)]
            tries = [[t for t in ts if t not in broken] for ts in tries]
            tries = [t for i, t in enumerate(tries) if t and set(t) not in map(set, tries[i + 1:])]
        m.killer = ""
        if not any(tries):
            m.outcome = "no test"
            return None
        for m.tests in tries:
            rc = run_mutant(path, m, data["seconds"], args, str(log))
            text = log.read_text(errors="replace")
            # a kill is a test that failed (pytest 1), a test file that could not be collected (2, 4: it names
            # it) or a mutated import that failed; anything else (pytest's internal error 3, a signal from
            # outside, this script's 98/99) is the tool failing, and no score is made of it
            # a test id that pytest no longer finds (4, "not found"): the mutant changed what a parametrization collects
            if rc is not None and not (rc in (0, NO_IMPORT) or rc in (1, 2, 4) and KILLER.search(text)
                                       or rc == 4 and NOT_FOUND in text):
                print(text[-3000:], f"{path.relative_to(TOP)}:{m.lineno}: {m.mutation}: the tool failed (exit {rc})",
                      file=sys.stderr)
                return TOOL_FAILED
            if rc != 0:
                break
        m.outcome = "timeout" if rc is None else "survived" if rc == 0 else "killed"
        if m.outcome == "killed" and (found := KILLER.search(text)):
            m.killer = found.group(1)
            kills[m.killer] = kills.get(m.killer, 0) + 1
        return None

    for name, (path, ms) in found.items():
        rel = path.relative_to(TOP)
        kills.clear()  # test -> the module's mutants it killed: those tests run first
        broken: set[str] = set()  # tests that fail unmutated
        for n, m in enumerate(ms, 1):
            if n % 100 == 0:
                print(f"  {name}: {n} of {len(ms)} mutants, {time.perf_counter() - start:.0f} s", flush=True)
            hit = next((i for i, e in enumerate(equivalent) if (e["module"], e["function"], e["line"], e["mutation"])
                        == (m.module, m.function, m.line, m.mutation)), None)
            if args.only and not any(o in f"{rel}:{m.lineno} {m.mutation}" for o in args.only):
                continue
            if hit is not None:
                used.add(hit)
                m.outcome = "equivalent"
                continue
            key = (m.module, m.function, m.unit, m.line, m.mutation)
            if rechecked is not None and key in earlier and (
                    each.get(key) in ("killed", "timeout") if name in each_modules
                    else (m.module, m.function, m.line, m.mutation) not in rechecked):
                m.outcome = "killed"  # in the run that printed args.recheck
                continue
            took = time.perf_counter()
            if judge(m, set()) == TOOL_FAILED:
                return 2
            if args.each:
                print(f"  {m.outcome:8} {time.perf_counter() - took:5.1f} s  {rel}:{m.lineno}: {m.mutation}"
                      + (f"  by {m.killer}" if m.killer else ""), flush=True)
        # a test that fails whatever the code (the machine changed under the run: a port, a load, a file) kills
        # every mutant it is tried on, first once it killed one: each killer passes unmutated, or its kills are
        # judged again without it
        checked: set[tuple[str, bool]] = set()
        redone: set[tuple[int, str]] = set()  # a mutant judged again without a killer is not judged so again
        while True:
            for killer, fresh in sorted({(m.killer, m.fresh) for m in ms if m.killer} - checked):
                checked.add((killer, fresh))
                if unmutated(name, path, killer, fresh, str(log)) != 0:
                    broken.add(killer)
            redo = [m for m in ms if m.killer in broken and (m.index, m.killer) not in redone]
            redone.update((m.index, m.killer) for m in redo)
            if not redo:
                break
            print(f"  {name}: {', '.join(sorted(broken))} fails unmutated: {len(redo)} kills judged again without it",
                  flush=True)
            for m in redo:
                if judge(m, broken) == TOOL_FAILED:
                    return 2
        results[name] = [m for m in ms if m.outcome]
        report(name, rel, results[name])
        if args.record and not args.only:  # module by module: a long run stopped early keeps what it scored
            recorded = yaml.safe_load(args.record.read_text()) if args.record.exists() else None
            files.write_atomic(args.record, render_scores({name: results[name]}, {name: score(results[name])},
                                                          recorded))
    stale = [e for i, e in enumerate(equivalent) if i not in used and e["module"] in args.modules]
    for e in stale if not args.only else []:
        print(f"stale entry in {EQUIVALENT.name} (no such mutant): {e['module']} {e['function']}: {e['mutation']} "
              f"in {e['line']!r}")
    print(f"wall time {time.perf_counter() - start:.0f} s")
    scores = {name: score(ms) for name, ms in results.items()}
    if args.check:
        recorded = yaml.safe_load(args.check.read_text())["score"]
        low = [f"{n} {scores[n]:.1%} < {recorded[n]:.1%}" for n in scores if n in recorded and scores[n] < recorded[n]]
        if low:
            print("below the recorded score: " + "; ".join(low))
            return 1
    return 0


#: pytest's short summary of the test that failed: its node id (a parametrization's may hold spaces), then " - "
#: and the message where there is one
KILLER = re.compile(r"^(?:FAILED|ERROR) (.+?)(?: - .*)?$", re.M)
TOOL_FAILED = 2
HANG_S = 600  # an unmutated test that runs this long hangs
NO_IMPORT = 97  # a --child's exit status where the mutated module cannot be imported
NOT_FOUND = "\nERROR: not found: "  # pytest's usage error for a test id it does not collect
EACH = re.compile(r"^  (?P<outcome>killed|timeout|survived|no test)\s+[\d.]+ s  (?P<path>\S+?):(?P<lineno>\d+): "
                  r"(?P<mutation>.+?)(?:  by .*)?$")
SURVIVOR = re.compile(r"^  (lib/commstack/\S+\.py):\d+: (.+?) in (.+?): (.*)  "
                      r"\((?:no test reaches it|\d+ tests)\)$")


def each_outcomes(output: Path, then: dict[str, list[Mutant]]) -> dict[tuple, str]:
    """The outcome `--each` printed to `output` for each mutant of `then` (the modules' mutants as that run
    made them), by (module, function, unit, line, mutation)."""
    by_place = {(str(source_path(name).relative_to(TOP)), m.lineno, m.mutation): m
                for name, ms in then.items() for m in ms}
    out = {}
    for line in output.read_text().splitlines():
        if (e := EACH.match(line)) and (m := by_place.get((e["path"], int(e["lineno"]), e["mutation"]))):
            out[m.module, m.function, m.unit, m.line, m.mutation] = e["outcome"]
    return out


def survivors(output: Path) -> set[tuple[str, str, str, str]]:
    """(module, function, line, mutation) of each survivor `report` printed to `output`."""
    out, key = set(), {str(source_path(n).relative_to(TOP)): n for n in MODULES}
    for line in output.read_text().splitlines():
        if (m := SURVIVOR.match(line)) and m.group(1) in key:
            path, mutation, function, source = m.groups()
            out.add((key[path], AT_IMPORT if function == "code at import" else function, source, mutation))
    return out


def run_mutant(path: Path, m: Mutant, seconds: dict[str, float], args, log: str) -> int | None:
    """Mutant `m` against `m.tests` (in a fresh interpreter where `m.fresh`): their exit status, None past its
    time limit."""
    limit = args.timeout_factor * sum(seconds[t] for t in m.tests) + args.timeout_min
    if m.fresh:
        return run_fresh(m.module, m, limit + 30, log)  # 30 s: the interpreter's start and imports
    return run_child(lambda: _run_mutant(path, m), limit, log)[0]


def unmutated(name: str, path: Path, test: str, fresh: bool, log: str) -> int | None:
    """`test` on the unmutated code, as a mutant of module `name` ran it (fresh or forked): its exit status."""
    if fresh:
        return run_fresh(name, Mutant(name, "", 0, 0, "", "unmutated", -1, [test]), HANG_S, log)
    return run_child(lambda: int(pytest.main([test, *PYTEST])), HANG_S, log)[0]


def _run_mutant(path: Path, m: Mutant) -> int:
    apply(path, m)
    return int(pytest.main([*m.tests, "-x", *PYTEST]))


def score(ms: list[Mutant]) -> float:
    judged = [m for m in ms if m.outcome != "equivalent"]
    return sum(m.outcome in ("killed", "timeout") for m in judged) / len(judged) if judged else 1.0


def report(name: str, rel: Path, ms: list[Mutant]) -> None:
    count = {k: sum(m.outcome == k for m in ms) for k in ("killed", "timeout", "survived", "no test", "equivalent")}
    print(f"{name}: {len(ms)} mutants, {count['equivalent']} equivalent, {count['killed']} killed, "
          f"{count['timeout']} timed out, {count['survived']} survived, {count['no test']} reached by no test: "
          f"score {score(ms):.1%}", flush=True)
    for m in ms:
        if m.outcome in ("survived", "no test"):
            print(f"  {rel}:{m.lineno}: {m.mutation} in {m.function or 'code at import'}: {m.line}"
                  + ("  (no test reaches it)" if m.outcome == "no test" else f"  ({len(m.tests)} tests)"), flush=True)


def render_scores(results: dict[str, list[Mutant]], scores: dict[str, float], earlier: dict | None = None) -> str:
    """The score file: this run's modules, and the figures of `earlier` (the file's) for the modules it did not
    run."""
    earlier = earlier or {}
    score = {**earlier.get("score", {}), **scores}
    counts = {**earlier.get("mutants", {}),
              **{n: {"total": len(ms), "equivalent": sum(m.outcome == "equivalent" for m in ms),
                     "killed": sum(m.outcome in ("killed", "timeout") for m in ms)} for n, ms in results.items()}}
    lines = ["# perf/mutation.py --record: killed / non-equivalent mutants per module; --check (CI's weekly",
             "# mutation job) fails below these", "score:"]
    lines += [f"  {n}: {s:.4f}" for n, s in score.items()]
    lines += ["mutants:"]
    lines += [f"  {n}: {{total: {c['total']}, equivalent: {c['equivalent']}, killed: {c['killed']}}}"
              for n, c in counts.items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
