"""The share of the corpus (tests/data/corpus, its index.yaml and index.d/) that `commstack parse` reads as
indexed: every table's benchmark, verdict, validation and row count (tests/unit/test_corpus.py's rule), overall
and per index file, and the bad outputs read as complete or validated (there must be none).

`--lib DIR` measures another checkout's parsers (its `lib/`, e.g. a `git worktree add --detach` of main) on
this checkout's corpus: the share before and after a change. All files are parsed in one child Python whose
`commstack` is that `lib/`, through `commstack parse FILE --json`, the command a user types.

  .venv/bin/python perf/corpus_share.py [--lib OTHER/lib] [--list]
"""

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

TOP = Path(__file__).resolve().parents[1]


def _test_corpus():
    """tests/unit/test_corpus.py, whose index schema and rule this measures, loaded from its file."""
    spec = importlib.util.spec_from_file_location("test_corpus", TOP / "tests" / "unit" / "test_corpus.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module   # its pydantic models resolve their annotations through it
    spec.loader.exec_module(module)
    return module


_corpus = _test_corpus()
CORPUS, INDEX, INDEXES, expected, same = (_corpus.CORPUS, _corpus.INDEX, _corpus.INDEXES, _corpus.expected,
                                          _corpus.same)

# the child: each file through `commstack parse`'s main, one JSON line per file (its tables, or its exit)
CHILD = """
import contextlib, io, json, sys
from commstack.cli import main as cli
for argv in json.loads(sys.stdin.read()):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        cli.main(argv)
    tables = json.loads(out.getvalue())
    print(json.dumps([(t["benchmark"], t["verdict"], t["validated"], len(t["rows"])) for t in tables]))
"""


def argv(name: str) -> list[str]:
    entry = INDEX[name]
    return ["parse", str(CORPUS / name), f"--args={entry.args}", "--json"] + \
        (["--ranks", str(entry.ranks)] if entry.ranks else [])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", type=Path, default=TOP / "lib", help="the commstack package's parent to measure")
    ap.add_argument("--list", action="store_true", help="print each file that is not read as indexed")
    opts = ap.parse_args()
    names = sorted(INDEX)
    env = {**os.environ, "PYTHONPATH": str(opts.lib.resolve())}
    p = subprocess.run([sys.executable, "-c", CHILD], input=json.dumps([argv(n) for n in names]), env=env,
                       capture_output=True, text=True, check=True)
    got = dict(zip(names, ([tuple(t) for t in json.loads(line)] for line in p.stdout.splitlines())))
    read = {n for n in names if same(got[n], expected(INDEX[n]))}
    bad_passed = [n for n in names for g, w in zip(got[n], expected(INDEX[n]))
                  if w[1] != "complete" and g[1] == "complete" or w[2] != "yes" and g[2] == "yes"]
    print(f"commstack from {opts.lib}: {len(read)}/{len(names)} corpus files ({len(read) / len(names):.1%}) read as "
          f"indexed; {len(bad_passed)} bad output(s) read as complete or validated")
    for path in INDEXES:
        own = set(yaml.safe_load(path.read_text()) or {})
        print(f"  {path.name}: {len(own & read)}/{len(own)}")
    for n in (sorted(set(names) - read) if opts.list else []):
        print(f"  not as indexed: {n}: {got[n]}, indexed {expected(INDEX[n])}")
    return 1 if bad_passed else 0


if __name__ == "__main__":
    sys.exit(main())
