"""The commands about results already there: report, compare, history, export, parse (cli.main.COMMANDS)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from commstack import exits
from commstack.cli.run import summary
from commstack.config import load_system, names_in
from commstack.errors import CommstackError, InputFileError, printable
from commstack.files import stdout_written, writable, write_atomic
from commstack.paths import SYSTEMS, TOP
from commstack.results import parse
from commstack.results.compare import NOT_RUN, compare, compare_table, diagnosis
from commstack.results.references import references_of
from commstack.results.records import read_run


def cmd_report(args: argparse.Namespace, extra: list[str]) -> int:
    from commstack.results.report import write_report
    results = Path(args.results)
    records = read_run(results)
    system = load_system(records[0].system) if records[0].system in names_in(SYSTEMS) else None
    refs = references_of(system) if system else None
    path = write_report(results, refs, system.node.nic_line_rate_MBps if system else None)
    print(f"report: {path}")
    return summary(results, args.allow_not_run)


def add_report(s: argparse.ArgumentParser) -> None:
    s.add_argument("results", help="a results directory")
    s.add_argument("--allow-not-run", action="store_true", help="exit 0 when only not-run steps are not passed")


def cmd_compare(args: argparse.Namespace, extra: list[str]) -> int:
    if args.baseline_from == "history":
        return cmd_compare_history(args)
    if args.baseline is None:
        raise CommstackError("compare needs a baseline run (compare A B) or --baseline history")
    a = read_run(Path(args.baseline))
    system = load_system(a[0].system) if a[0].system in names_in(SYSTEMS) else None
    refs = references_of(system) if system else None
    changes = compare(Path(args.baseline), Path(args.results), args.tolerance, refs)
    findings = diagnosis(Path(args.baseline), Path(args.results), changes, args.tolerance, refs)
    print(printable(compare_table(changes, findings), keep="\n"), end="")
    if any(c.difference for c in changes):
        return exits.FAILED
    return exits.NOT_RUN if any(c.change == NOT_RUN for c in changes) and not args.allow_not_run else exits.PASS


def cmd_compare_history(args: argparse.Namespace) -> int:
    from commstack.results import history
    results = Path(args.results)
    path = Path(args.history) if args.history else history.default_path(results.resolve().parent)
    changes = history.compare_to_history(results, path, args.last,
                                         args.tolerance if args.tolerance is not None else 0.05)
    print(f"baseline: median of the last {args.last} runs in {path}")
    print(printable(compare_table(changes).replace(f"{'A':>12s}", f"{'history':>12s}", 1), keep="\n"), end="")
    return exits.FAILED if any(c.change in ("regression", "invalid") for c in changes) else exits.PASS


def add_compare(s: argparse.ArgumentParser) -> None:
    s.add_argument("baseline", nargs="?", help="the baseline run (none with --baseline history)")
    s.add_argument("results")
    s.add_argument("--baseline", dest="baseline_from", choices=("history",),
                   help="history: the median and spread of the last --last runs of each step on the system")
    s.add_argument("--tolerance", type=float, default=None,
                   help="relative change always allowed (default: the references' lower tolerance, else 0.05)")
    s.add_argument("--last", type=int, default=10, help="with --baseline history: how many earlier runs")
    s.add_argument("--allow-not-run", action="store_true", help="exit 0, not 3, when a step ran on neither side")
    s.add_argument("--history", default=os.environ.get("COMMSTACK_HISTORY"),
                   help="history file (default: $COMMSTACK_HISTORY, else history.sqlite beside the run)")


def cmd_history(args: argparse.Namespace, extra: list[str]) -> int:
    from commstack.results import history
    path = Path(args.history) if args.history else history.default_path(TOP / "results")
    if args.action == "import":
        if not args.dirs:
            raise CommstackError("history import needs results directories")
        for d in args.dirs:
            for run, n in history.import_results(Path(d), path).items():
                print(f"history: {run}: {n} records")
        print(f"history: {path}")
        return exits.PASS
    if args.action or args.dirs:
        raise CommstackError(f"unknown history action {args.action!r} (import, or none to print the trend)")
    if args.plot not in (None, "-"):
        writable(Path(args.plot))
    points = history.trend(path, args.system, args.suite, args.step, args.size, args.node)
    to_stdout = args.plot == "-"  # the image goes to stdout, the table to stderr
    image = history.plot(points) if to_stdout else None
    with stdout_written():
        print(printable(history.trend_table(points), keep="\n"), end="", file=sys.stderr if to_stdout else sys.stdout)
        if image:
            sys.stdout.buffer.write(image)
    if args.plot and not to_stdout:
        out = Path(args.plot)
        write_atomic(out, history.plot(points, out.suffix.lstrip(".") or "png"))
        print(f"plot: {out}")
    return exits.PASS


def add_history(s: argparse.ArgumentParser) -> None:
    s.add_argument("action", nargs="?", help="import: add results directories (runs, or directories of runs)")
    s.add_argument("dirs", nargs="*")
    s.add_argument("--history", default=os.environ.get("COMMSTACK_HISTORY"),
                   help="history file (default: $COMMSTACK_HISTORY, else results/history.sqlite)")
    for opt in ("system", "suite", "step"):
        s.add_argument(f"--{opt}", help=f"only this {opt}")
    s.add_argument("--size", type=int, help="only this message size (bytes)")
    s.add_argument("--node", help="only the steps that ran on this node (its history across screens and runs)")
    s.add_argument("--plot", help="draw the trend into this file (PNG, or .svg, .pdf; - for PNG on stdout); "
                                  "an existing one must be a regular file")


def cmd_export(args: argparse.Namespace, extra: list[str]) -> int:
    from commstack.results.export import export, render
    if args.output == "-":
        text = render(read_run(Path(args.results)), args.format)
        with stdout_written():
            sys.stdout.write(text)
    else:
        if args.output:
            writable(Path(args.output))
        print(f"export: {export(Path(args.results), args.format, Path(args.output) if args.output else None)}")
    return exits.PASS


def add_export(s: argparse.ArgumentParser) -> None:
    s.add_argument("results", help="a results directory")
    s.add_argument("--format", required=True, choices=("perflog", "jsonl", "bmf", "elastic"))
    s.add_argument("--output", help="the file (default: <run>/export/<run>.<suffix>; - for stdout); an existing "
                                    "one must be a regular file")


def cmd_parse(args: argparse.Namespace, extra: list[str]) -> int:
    argv = parse.parse_arguments(args.args, args.ranks)
    with stdout_written():  # its input is read through files.open_bounded: an OSError here is stdout's
        if Path(args.file).is_dir() and not Path(args.file).is_symlink():  # a link is refused, never followed
            return parse_directory(Path(args.file), argv, args.json, args.ranks, args.strict)
        return parse.parse_command(args.file, argv, args.json, args.ranks, args.strict)


def parse_directory(directory: Path, argv: list[str], as_json: bool, ranks: int | None, strict: bool) -> int:
    """`commstack parse DIR`: every regular file in DIR (not below it), by name, one line each: its
    verdict (the first failure's kind, else complete), its tables and rows. Exit status: the highest of
    its files' (2 where one cannot be read: a FIFO, a symlink to a directory, one over the size limit)."""
    try:
        names = sorted(p.name for p in directory.iterdir())
    except OSError as e:
        raise InputFileError(f"{directory}: cannot list: {e.strerror}") from None
    worst, out = exits.PASS, []
    for name in names:
        path = directory / name
        if path.is_dir() and not path.is_symlink():
            continue  # a directory of job logs: its files, not its subdirectories
        try:
            results, _ = parse.read_results(path, argv, ranks, strict)
        except InputFileError as e:
            out.append({"file": name, "verdict": "unreadable", "error": str(e), "lineno": None, "tables": 0,
                        "rows": 0, "benchmarks": []})
            worst = max(worst, exits.USAGE)
            continue
        failed = next((r for r in results if r.error), None)
        worst = max(worst, parse.exit_status(results))
        out.append({"file": name, "verdict": failed.verdict if failed else "complete",
                    "error": failed.error.message if failed else None,
                    "lineno": failed.error.lineno if failed else None,
                    "tables": len(results), "rows": sum(len(r.sweep.rows) for r in results if r.sweep),
                    "benchmarks": sorted({r.benchmark for r in results if r.benchmark})})
    if as_json:
        print(json.dumps(out, indent=1))
        return worst
    for f in out:
        line = f"{f['file']}: {f['verdict']}: {', '.join(f['benchmarks']) or '-'}, {f['tables']} table(s), " \
            f"{f['rows']} rows"
        if f["error"]:
            line += f"; {'line ' + str(f['lineno']) + ': ' if f['lineno'] else ''}{f['error']}"
        print(printable(line))
    return worst


def add_parse(s: argparse.ArgumentParser) -> None:
    s.epilog = parse.PARSE_HELP
    s.add_argument("file", help="the output (stdout, or a Slurm job log) of an OSU 5.x-7.5, nccl-tests, rccl-tests, "
                                "mpi-pingpong, fi_pingpong or ucx_perftest run; or a directory of them (one line "
                                "per file; exit status the highest)")
    s.add_argument("--strict", action="store_true",
                   help="a step's rule: an unknown line before the first table or after the last is an error, "
                        "not a note of the job log")
    s.add_argument("--args", default="", help='the benchmark\'s own arguments, e.g. --args="-m 1:1048576" '
                                              '(default: none, so the benchmark\'s default sizes)')
    s.add_argument("--ranks", type=int, help="ranks of the run (OSU collectives shrink their sizes with many)")
    s.add_argument("--json", action="store_true", help="print benchmark, version, columns with units and rows")
