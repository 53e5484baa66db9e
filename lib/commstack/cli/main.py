"""commstack: the commands a site engineer and CI use.

  run          the main job on this machine: the smoke suite on the local Slurm, judged, reported
  test         the tests (paths, or pytest options after --), JUnit XML under results/
  setup        the pinned Spack (toolchain.yaml) and this repo's package repository
  lock [ENV]   re-concretize the GH200 envs and write their spack.lock; --check compares, writes nothing
  preflight E  before `spack install`: every external of env E exists here (prefix/module, version)
  containerize render containers/<image>/ (Containerfile, EDFs); --check diffs instead
  images       image references and the podman commands that build and push them
  mirror create ENV [DIR]  sources (and, with --key, a signed build cache) for an offline site
  suite NAME   run a suite (suites/NAME.yaml) on --system, or print its srun lines with --dry-run
  screen [S]   every node and link of an allocation in one pass (screens/S.yaml); bad nodes and pairs named
  report DIR   (re)write the report of a results directory; compare A B: B against baseline A
  slurm        start | stop | status of the local embedded Slurm

Exit status of run, suite, status and report: 0 every step ran and passed; 1 some step did not pass;
3 every step that ran passed but some did not run (--allow-not-run: 0); 4 a batch job still runs;
2 bad input (a damaged history or record included); 5 results could not be written (a full or read-only
file system); 130 Ctrl-C (143 SIGTERM, 129 SIGHUP, 131 SIGQUIT: the same clean-up). screen: 0 no node and no
pair bad, 1 some are, 2 bad input, 130 and 128+N as above. Whatever input put in what they print (names,
reasons, errors) is shown with its control characters escaped.
"""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys

import commstack
from commstack.errors import CommstackError, printable
from commstack.files import drop_stdout
from commstack.paths import TOP
from commstack.run.runner import EXIT_INTERRUPTED, EXIT_USAGE

#: as a shell reports a program SIGPIPE ended (128 + 13)
EXIT_BROKEN_PIPE = 141

#: every command, in the order --help lists them, and its module (commstack.cli.MODULE), which has
#: add_COMMAND (its parser) and cmd_COMMAND (what runs it). A command imports its module alone, so
#: `setup` in an image runs on requirements/spack.txt (no pytest, rich or matplotlib there).
COMMANDS = {
    "run": "run",
    "test": "local",
    "slurm": "local",
    "setup": "envs",
    "lock": "envs",
    "preflight": "envs",
    "containerize": "envs",
    "images": "envs",
    "mirror": "envs",
    "suite": "run",
    "screen": "screen",
    "report": "results",
    "status": "run",
    "compare": "results",
    "history": "results",
    "export": "results",
    "parse": "results",
}


def command(name: str, role: str):
    """add_NAME or cmd_NAME of the command's module."""
    return getattr(importlib.import_module(f"commstack.cli.{COMMANDS[name]}"), f"{role}_{name}")


def install_deps() -> None:
    """The Debian packages that run and test need (ci/install-deps.sh says what it installs)."""
    # its output (apt's) on stderr: stdout is the run's, possibly JSON lines
    if subprocess.call([str(TOP / "ci" / "install-deps.sh")], stdout=sys.stderr.fileno()) != 0:
        raise CommstackError("the Debian packages commstack needs could not be installed (ci/install-deps.sh)")


def parser(names=COMMANDS) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="commstack", description=__doc__, allow_abbrev=False,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"commstack {commstack.__version__}")
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in names:
        command(name, "add")(sub)
    for s in sub.choices.values():
        s.allow_abbrev = False  # `run --sys x` is a mistyped flag, not --system
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Only what follows `--` passes through (to pytest); everything before it is ours, strictly.
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    ours = argv[:argv.index("--")] if "--" in argv else argv
    # the command's parser alone when the line starts with one; else (--help, a typo) all of them
    p = parser([ours[0]] if ours and ours[0] in COMMANDS else COMMANDS)
    args, unknown = p.parse_known_args(ours)
    if unknown:  # a mistyped option is an error, never passed on
        parser().error(f"{args.cmd}: unrecognized arguments: {' '.join(unknown)}")
    if extra and args.cmd not in ("test", "run", "suite"):
        parser().error(f"{args.cmd} takes no arguments after --")
    try:
        if args.cmd in ("run", "test") and os.environ.get("COMMSTACK_INSTALL_DEPS") == "1":
            install_deps()  # bin/commstack's first use: once the command line is known to be right
        return command(args.cmd, "cmd")(args, extra)
    except CommstackError as e:
        print(f"commstack {args.cmd}: error: {printable(str(e), keep=chr(10))}", file=sys.stderr)
        return getattr(e, "exit_status", EXIT_USAGE)
    except KeyboardInterrupt:
        print(f"commstack {args.cmd}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `commstack parse FILE | head`: the reader took what it wanted and went away
        drop_stdout()
        return EXIT_BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
