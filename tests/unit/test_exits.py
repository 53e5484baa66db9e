"""Every exit status of every command in one table (commstack.exits), each number with one name and one meaning:
no two statuses share a number, the named errors carry theirs as `exit_status`, and the commands a user types
exit with the documented numbers (docs/harness.md#exit-statuses, `commstack --help`)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

from commstack import exits
from commstack.errors import PARSE_ERRORS, CommstackError, ConfigError, NodeFailureError, ParseError
from commstack.exits import Status
from commstack.files import FileWriteError
from commstack.paths import TOP

BIN = str(TOP / "bin" / "commstack")
#: the table of docs/harness.md#exit-statuses: number, name
DOCUMENTED = re.findall(r"^\| (\d+) \| `(\w+)` \|", (TOP / "docs" / "harness.md").read_text(), re.M)


def test_no_two_statuses_share_a_number():
    numbers = [int(s) for s in Status.__members__.values()]  # an alias (a number given twice) is a member too
    assert len(numbers) == len(set(numbers)), numbers
    assert all(0 <= n < 256 for n in numbers)  # what a process can exit with
    parse = {e.exit_status for e in PARSE_ERRORS}
    assert len(parse) == len(PARSE_ERRORS) and min(parse) == 10, parse  # parse's own block, one per kind
    assert {exits.signalled(sig) for sig in exits.CtrlC.SIGNALS} <= set(Status)
    assert exits.signalled(None) == exits.INTERRUPTED == 128 + signal.SIGINT


def test_every_status_is_documented_with_its_number_and_name():
    assert DOCUMENTED == [(str(int(s)), s.name) for s in Status]


def test_errors_carry_their_status_in_one_attribute():
    assert CommstackError("x").exit_status == ConfigError("x").exit_status == exits.USAGE
    assert ParseError("probe line").exit_status == exits.USAGE  # not a kind `parse` reports: bad input
    assert FileWriteError("full").exit_status == exits.UNWRITTEN
    assert NodeFailureError("node lost").exit_status == exits.NODE_FAILURE
    for e in PARSE_ERRORS:
        assert e.exit_status.name == e.kind.upper().replace("-", "_") and e.exit_status.meaning == f"parse: {e.kind}"


def test_help_ends_with_every_status_and_its_meaning():
    p = subprocess.run([sys.executable, "-m", "commstack", "--help"], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "COLUMNS": "400"})
    assert p.returncode == exits.PASS, p.stderr
    listed = re.findall(r"^  (\d+) +(\S.*)$", p.stdout.partition("exit statuses")[2], re.M)
    assert listed == [(str(int(s)), s.meaning) for s in Status]


def shell(line: str) -> list[str]:
    """What `line` prints, run by bash as a user types it."""
    p = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=120)
    return p.stdout.split()


def test_parse_exits_with_its_kinds_own_numbers_no_other_status_has(tmp_path):
    """Once, 3, 4 and 5 meant both run's not-run, pending and results-not-written and parse's kinds."""
    empty, unknown = tmp_path / "empty.out", tmp_path / "unknown.out"
    good = TOP / "tests" / "data" / "osu" / "7.2" / "osu_latency.stdout"
    empty.write_text("")
    unknown.write_text("not a benchmark's output\n")
    said = shell(f"for f in {empty} {unknown} {good}; do {BIN} parse $f >/dev/null 2>&1; echo $?; done; "
                 f"{BIN} parse {tmp_path / 'missing.out'} 2>/dev/null; echo $?")
    assert said == ["10", "11", "0", "2"], said
    documented = dict((name, int(n)) for n, name in DOCUMENTED)
    assert [documented[n] for n in ("EMPTY", "UNKNOWN_FORMAT", "PASS", "USAGE")] == [int(s) for s in said]
    assert said[1] != str(int(exits.UNWRITTEN)) and said[0] != str(int(exits.PENDING))


def test_the_test_command_exits_with_commstack_s_statuses_not_pytest_s(tmp_path):
    """pytest's own 5 (no tests collected) would read as "results not written": `test` says bad input, 2."""
    (tmp_path / "test_one.py").write_text("def test_fails():\n    assert False\n")
    junit = f"--junitxml={tmp_path / 'junit.xml'}"
    said = shell(f"cd {tmp_path}; for k in fails nothing; do {BIN} test {tmp_path} -k $k -- -p no:cacheprovider "
                 f"{junit} >/dev/null 2>&1; echo $?; done")
    assert said == [str(int(exits.FAILED)), str(int(exits.USAGE))], said
