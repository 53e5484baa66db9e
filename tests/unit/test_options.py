"""The options the commands share come from one registry (commstack.options): `run`, `suite` and `screen` accept
each shared option with the same flag, type, choices and action, and so read a typed value alike (a relative
--osu-prefix made absolute by all three: screen's once was not); `test` and the pytest plugin take them from it
too."""

from __future__ import annotations

import os
import subprocess

import pytest

from commstack import options
from commstack.cli.main import parser
from commstack.paths import TOP

#: each command with its positional arguments
LINES = {"run": [], "suite": ["smoke"], "screen": ["local"]}
#: what screen shares with run and suite
SHARED = ("system", "results", "slurm", "osu_prefix")


def actions(cmd: str) -> dict:
    """dest -> argparse action of `commstack CMD`'s parser."""
    return {a.dest: a for a in parser(cmd)[1]._actions}


def test_run_suite_and_screen_accept_the_shared_options_with_the_same_types():
    held = {cmd: actions(cmd) for cmd in LINES}
    assert set(options.OPTIONS) <= set(held["run"]) and set(options.OPTIONS) <= set(held["suite"])
    assert set(SHARED) <= set(held["screen"])
    for name in SHARED:
        kinds = {kind(held[cmd][name]) for cmd in LINES}
        assert len(kinds) == 1, (name, kinds)
    for name in options.OPTIONS:  # run and suite: every one alike, its default included
        assert kind(held["run"][name]) + (held["run"][name].default,) == \
            kind(held["suite"][name]) + (held["suite"][name].default,), name


def kind(action) -> tuple:
    return type(action), tuple(action.option_strings), action.type, action.choices


@pytest.mark.parametrize("cmd", LINES)
def test_every_command_reads_a_typed_line_alike(cmd, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = parser(cmd)[0].parse_args([cmd, *LINES[cmd], "--osu-prefix", "omb", "--slurm", "off", "--system", "x",
                                      "--results", "r"])
    assert (args.osu_prefix, args.slurm, args.system, args.results) == (str(tmp_path / "omb"), "off", "x", "r")


@pytest.mark.parametrize("cmd", LINES)
def test_a_bad_choice_is_refused_by_every_command_in_the_same_words(cmd):
    proc = subprocess.run([str(TOP / "bin" / "commstack"), cmd, *LINES[cmd], "--slurm", "nowhere"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines()[-1] == (f"commstack {cmd}: error: argument --slurm: invalid choice: 'nowhere' "
                                            "(choose from 'auto', 'local', 'external', 'off')"), proc.stderr


def test_the_test_command_passes_on_only_what_was_typed():
    args = parser("test")[0].parse_args(["test", "--osu-prefix", "omb"])
    assert (args.system, args.slurm, args.launcher, args.osu_prefix) == (None, None, None, os.path.abspath("omb"))
