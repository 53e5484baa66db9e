"""The commands about the Spack environments (cli.main.COMMANDS); each runs the Spack API of commstack.spack."""

from __future__ import annotations

import argparse
from pathlib import Path

from commstack import exits
from commstack.files import own_dir
from commstack.spack import containers, envs, mirror, need_spack
from commstack.spack import preflight as spack_preflight
from commstack.spack import setup as spack_setup
from commstack.spack.envs import ENVS, LOCKED


def cmd_setup(args: argparse.Namespace, extra: list[str]) -> int:
    return spack_setup.setup(args.spack_source, args.packages, args.force, args.detect, args.mirror)


def add_setup(s: argparse.ArgumentParser) -> None:
    s.add_argument("--spack-source", help="local path or git mirror of Spack, or a `git archive` tarball of the "
                                          "pinned commit (offline)")
    s.add_argument("--packages", help="local spack-packages checkout or git mirror, or a `git archive` tarball of "
                                      "the pinned commit (offline)")
    s.add_argument("--force", action="store_true",
                   help="accept a SPACK_ROOT of another major.minor, or a git checkout (SPACK_ROOT, --packages) "
                        "at another commit than the pinned one")
    s.add_argument("--detect", action="store_true", help="detect this machine's externals again")
    s.add_argument("--mirror", help="offline: a directory of `git archive` tarballs (spack-TAG.tar.gz, "
                                    "spack-packages-TAG.tar.gz, NAME-VERSION-src.tar.gz source trees for the local "
                                    "env), and/or a mirror made by `commstack mirror create`, which every env uses")


def cmd_lock(args: argparse.Namespace, extra: list[str]) -> int:
    return envs.lock(need_spack(), args.envs, args.check)


def add_lock(s: argparse.ArgumentParser) -> None:
    s.add_argument("envs", nargs="*", help=f"default: {' '.join(LOCKED)}")
    s.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 naming each env, node and field where the committed lock differs")


def cmd_preflight(args: argparse.Namespace, extra: list[str]) -> int:
    return spack_preflight.run(need_spack(), args.env)


def add_preflight(s: argparse.ArgumentParser) -> None:
    s.add_argument("env", help=f"one of: {', '.join(ENVS)}")


def cmd_containerize(args: argparse.Namespace, extra: list[str]) -> int:
    return containers.containerize(need_spack(), args.images, args.check)


def add_containerize(s: argparse.ArgumentParser) -> None:
    s.add_argument("images", nargs="*", help="default: all")
    s.add_argument("--check", action="store_true", help="regenerate and diff; write nothing")


def cmd_images(args: argparse.Namespace, extra: list[str]) -> int:
    return containers.show_images()


def add_images(s: argparse.ArgumentParser) -> None:
    """No options: it prints every image."""


def cmd_mirror(args: argparse.Namespace, extra: list[str]) -> int:
    # DIR ours before Spack writes into it: another user's directory, or a link to one, could redirect its files
    dest = own_dir(Path(args.dir), what="mirror directory") if args.dir else None
    mirror.create(need_spack(), args.env, dest, args.key)
    return exits.PASS


def add_mirror(s: argparse.ArgumentParser) -> None:
    s.add_argument("action", choices=("create",))
    s.add_argument("env", help=f"one of: {', '.join(ENVS)}")
    s.add_argument("dir", nargs="?", help="default: results/mirror-<env>")
    s.add_argument("--key", help="GPG key (spack gpg list) to sign a build cache of what is installed")
