"""Whether a local cluster's TaskEpilog still runs (commstack.slurm.config.epilog_runs): `slurm start` joins a
running cluster only when it does, and starts it afresh (writing the epilog again) when it does not. A file that
is not an epilog as commstack writes it is one that does not run, never a traceback."""

import shlex
import sys

import pytest

from commstack.slurm.config import epilog_runs, task_epilog


def epilog(tmp_path, content: bytes | None):
    (tmp_path / "etc").mkdir()
    if content is not None:
        (tmp_path / "etc" / "task-epilog").write_bytes(content)
    return tmp_path


def test_this_checkouts_epilog_runs(tmp_path):
    (tmp_path / "etc").mkdir()
    task_epilog(tmp_path)
    assert epilog_runs(tmp_path)


def test_another_checkouts_epilog_runs_while_its_python_imports_commstack(tmp_path):
    """Written otherwise than this checkout writes it: the Python it names is asked to import commstack."""
    line = f"exec env -u LD_PRELOAD {shlex.quote(sys.executable)} -I -m commstack.slurm task-epilog"
    assert epilog_runs(epilog(tmp_path, f"#!/bin/sh\n{line}\n".encode()))


@pytest.mark.parametrize("content", [
    None,                                                            # no epilog
    b"",                                                             # empty (was IndexError)
    b"\n \n",                                                        # blank lines only
    b"#!/bin/sh\nexec env 'unclosed /usr/bin/python3 -I -m x\n",    # an open quote (was ValueError)
    b"#!/bin/sh\nexec \xff\xfe -I -m commstack.slurm task-epilog\n",  # not UTF-8 (was UnicodeDecodeError)
    b"#!/bin/sh\nexec /nonexistent/python -I -m commstack.slurm task-epilog\n",  # a Python that is gone
    b"#!/bin/sh\nexit 0\n",                                          # no Python named
], ids=["missing", "empty", "blank", "open-quote", "not-utf8", "gone", "no-python"])
def test_an_epilog_that_cannot_be_read_as_ours_does_not_run(tmp_path, content):
    assert epilog_runs(epilog(tmp_path, content)) is False
