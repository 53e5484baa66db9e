"""commstack: the commands a site engineer and CI use (each in one line below; `commstack CMD --help`: its
options). Whatever input put in what they print (names, reasons, errors) is shown with its control characters
escaped.
"""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
from typing import NamedTuple

import commstack
from commstack import exits
from commstack.errors import CommstackError, MissingPackageError, printable
from commstack.files import drop_stdout
from commstack.paths import TOP


class Command(NamedTuple):
    module: str  # commstack.cli.MODULE: add_NAME (its options) and cmd_NAME (what runs it)
    help: str  # its line in `commstack --help`


#: every command, in the order --help lists them. A command imports its module alone, and --help, a
#: mistyped command or option, none: `setup` in an image runs on requirements/spack.txt (no pytest,
#: rich or matplotlib there).
COMMANDS = {
    "run": Command("run", "the main job on this machine: the smoke suite"),
    "test": Command("local", "run the tests (unit, hostile, slurm, faults; --all: spack and multinode too); "
                             "other pytest options after --"),
    "slurm": Command("local", "local embedded Slurm"),
    "setup": Command("envs", "pinned Spack and package repositories"),
    "lock": Command("envs", "re-concretize envs and write their spack.lock"),
    "preflight": Command("envs", "check that an env's externals exist on this machine"),
    "containerize": Command("envs", "render containers/<image>/ from envs/images and images.yaml"),
    "images": Command("envs", "image references and their build/push commands"),
    "mirror": Command("envs", "a mirror of an env's sources (and signed binaries) for offline sites"),
    "suite": Command("run", "run a benchmark suite, or print its srun lines (--dry-run)"),
    "screen": Command("screen", "screen every node and link of an allocation in one pass"),
    "report": Command("results", "write results/<run>/report/ (HTML, Markdown, CSV, plots) again"),
    "status": Command("run", "a batch run: its job's state; once it ended, its results judged"),
    "compare": Command("results", "a run against a baseline run (or the history); exit 1 on any difference, "
                                  "3 when a step ran on neither side"),
    "history": Command("results", "the trend of each step's figure over runs; `history import DIR` fills it"),
    "export": Command("results", "a run's figures as a file: perflog, jsonl, bmf (bencher.dev), elastic"),
    "parse": Command("results", "parse and check a benchmark output (exit 0: complete and valid)"),
}


#: the end of --help: every exit status of every command (commstack.exits), as `run` says it after its summary
STATUSES = "exit statuses (each command's reading: docs/harness.md#exit-statuses):\n" + "\n".join(
    f"  {s:<4} {s.meaning}" for s in exits.Status)


def command(name: str, role: str):
    """add_NAME or cmd_NAME of the command's module."""
    try:
        module = importlib.import_module(f"commstack.cli.{COMMANDS[name].module}")
    except ModuleNotFoundError as e:
        package = (e.name or "").split(".")[0]
        if package in ("", "commstack"):
            raise  # a module of our own missing: a broken checkout, shown as it is
        raise MissingPackageError(
            f"this venv ({sys.prefix}) has no {package}: it holds a smaller requirement set than {name} needs "
            f"(COMMSTACK_REQUIREMENTS={os.environ.get('COMMSTACK_REQUIREMENTS', '')}; an image's is "
            f"requirements/spack.txt, the Spack commands alone). `COMMSTACK_REQUIREMENTS=requirements/dev.txt "
            f"bin/commstack {name}` installs every set (from PyPI, or PIP_INDEX_URL)") from e
    return getattr(module, f"{role}_{name}")


def install_deps() -> None:
    """The Debian packages that run and test need (ci/install-deps.sh says what it installs)."""
    # its output (apt's) on stderr: stdout is the run's, possibly JSON lines
    if subprocess.call([str(TOP / "ci" / "install-deps.sh")], stdout=sys.stderr.fileno()) != 0:
        raise CommstackError("the Debian packages commstack needs could not be installed (ci/install-deps.sh)")


def parser(name: str | None = None) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser | None]:
    """commstack's parser and, where `name` is a command, that command's: the only module it imports (COMMANDS)."""
    p = argparse.ArgumentParser(prog="commstack", description=__doc__, epilog=STATUSES, allow_abbrev=False,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"commstack {commstack.__version__}")
    sub = p.add_subparsers(dest="cmd", required=True)
    for cmd, (_, help_line) in COMMANDS.items():
        s = sub.add_parser(cmd, help=help_line, allow_abbrev=False)  # `run --sys x` is a mistyped flag
        if cmd == name:
            command(cmd, "add")(s)
    return p, sub.choices.get(name)


def failed(cmd: str, e: CommstackError) -> int:
    print(f"commstack {cmd}: error: {printable(str(e), keep=chr(10))}", file=sys.stderr)
    return e.exit_status


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Only what follows `--` passes through (to pytest); everything before it is ours, strictly.
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    ours = argv[:argv.index("--")] if "--" in argv else argv
    # the options of the command the line starts with; of no other (--help, a typo: their names)
    try:
        p, cmd_parser = parser(ours[0] if ours else None)
    except MissingPackageError as e:
        return failed(ours[0], e)
    args, unknown = p.parse_known_args(ours)
    # errors in the usage of the command, or (`--bogus run`) of commstack
    wrong = cmd_parser if cmd_parser is not None else p
    if unknown:  # a mistyped option is an error, never passed on
        wrong.error(f"unrecognized arguments: {' '.join(unknown)}")
    if extra and args.cmd not in ("test", "run", "suite"):
        wrong.error("takes no arguments after --")
    try:
        if args.cmd in ("run", "test") and os.environ.get("COMMSTACK_INSTALL_DEPS") == "1":
            install_deps()  # bin/commstack's first use: once the command line is known to be right
        return command(args.cmd, "cmd")(args, extra)
    except CommstackError as e:
        return failed(args.cmd, e)
    except KeyboardInterrupt:
        print(f"commstack {args.cmd}: interrupted", file=sys.stderr)
        return exits.INTERRUPTED
    except BrokenPipeError:  # `commstack parse FILE | head`: the reader took what it wanted and went away
        drop_stdout()
        return exits.BROKEN_PIPE
