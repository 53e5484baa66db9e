"""Job logs as users have them (issue 35), through `bin/commstack parse`: each class of the corpus
(tests/data/corpus/index.d/joblogs.yaml) read with every row, the job script's lines notes with their
line numbers, `--strict` (a step's rule) refusing them, a directory of job logs one line per file, and no
bad corpus output that random preamble and trailer lines turn into a pass."""

from __future__ import annotations

import json
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from commstack.errors import PARSE_ERRORS
from commstack.paths import TOP
from commstack.tools import noise
from commstack.results.parse import parse_arguments, parse_results

from test_corpus import CORPUS, INDEX

BIN = str(TOP / "bin" / "commstack")
EXIT = {e.kind: e.exit_status for e in PARSE_ERRORS}


def parse(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([BIN, "parse", *argv], capture_output=True, text=True, timeout=120)


def tables(name: str, *extra: str) -> tuple[list[dict], subprocess.CompletedProcess]:
    entry = INDEX[name]
    argv = [str(CORPUS / name), f"--args={entry.args}", "--json", *extra]
    if entry.ranks:
        argv += ["--ranks", str(entry.ranks)]
    p = parse(*argv)
    return json.loads(p.stdout), p


# one file of each class of issue 35, with what makes it that class
CLASSES = {
    "text before the first title": "osu7/osu_latency-7.2-joblog-lmod-time.out",
    "text after the last table (counters)": "osu7/osu_mbw_mr-7.2-joblog-counters.out",
    "ucx_perftest on its own, 1.13 job log": "ucx_perftest/ucx_perftest-1.13-loopback-tag_lat-joblog.out",
    "ucx_perftest 1.8 layout": "ucx_perftest/ucx_perftest-1.8-server-client-tag_lat.out",
    "ucx_perftest 1.9-1.11 layout, OpenMP": "ucx_perftest/ucx_perftest-1.10-server-client-tag_bw-openmp.out",
    "ucx_perftest 1.11 without OpenMP": "ucx_perftest/ucx_perftest-1.11-server-client-tag_lat-no-openmp.out",
    "ucx_perftest -f": "ucx_perftest/ucx_perftest-1.13-loopback-final-only.out",
    "ucx_perftest 1.19 layout": "ucx_perftest/ucx_perftest-1.19-loopback-tag_bw-window.out",
    "rccl-tests' version block": "rccl-tests/all_reduce_perf-rccl-version-block-2nodes.out",
    "fi_pingpong udp datagram cap": "fi_pingpong/fi_pingpong-1.17-udp-dgram-S-all-time.out",
    "fi_pingpong verbs datagram cap": "fi_pingpong/fi_pingpong-1.22-verbs-dgram-mtu4096.out",
    "a crash with no title": "ucx_perftest/ucx_perftest-1.13-no-server-joblog.out",
}


@pytest.mark.parametrize("what", CLASSES)
def test_each_class_through_bin_commstack_parse(what):
    name = CLASSES[what]
    got, p = tables(name)
    want = INDEX[name].tables
    assert [(t["verdict"], t["validated"], len(t["rows"])) for t in got] == \
        [(t.verdict, t.validated, t.rows) for t in want], p.stderr
    assert p.returncode == next((EXIT[t.verdict] for t in want if t.verdict != "complete"), 0), p.stderr


def test_a_job_logs_own_lines_are_notes_with_their_line_numbers():
    name = "osu7/osu_latency-7.2-joblog-lmod-time.out"
    lines = (CORPUS / name).read_text().splitlines()
    [table], _ = tables(name)
    notes = {n["lineno"]: n for n in table["notes"]}
    assert notes[1]["what"] == "a line of the job log before the first table" and notes[1]["line"] == lines[0]
    assert notes[2]["source"] == "lmod" and notes[3]["source"] == "modules"
    assert notes[6]["source"] == "shell" and lines[5].startswith("+ mpirun")  # set -x
    assert [notes[i]["what"] for i in (24, 25, 26)] == ["bash `time` line"] * 3
    assert notes[len(lines)]["line"] == "Done." and notes[len(lines)]["what"].endswith("after the last table")
    p = parse(str(CORPUS / name), "--args=-m 1:4096")
    assert "  3 lines of the job log before the first table" in p.stdout.splitlines()
    assert "  1 line of the job log after the last table" in p.stdout.splitlines()


@pytest.mark.parametrize("name", ["osu7/osu_latency-7.2-joblog-lmod-time.out",
                                  "fi_pingpong/fi_pingpong-1.17-udp-dgram-wrapper.out",
                                  "ucx_perftest/ucx_perftest-1.13-loopback-tag_lat-joblog.out"])
def test_strict_is_a_steps_rule(name):
    """--strict: a job script's unknown line before the table is an error quoting it, as in a step."""
    [table], p = tables(name, "--strict")
    first = (CORPUS / name).read_text().splitlines()[0]
    assert table["verdict"] == "unknown-format" and table["error"]["line"] == first
    assert p.returncode == EXIT["unknown-format"]


def test_parse_a_directory_of_job_logs(tmp_path):
    """One line per file with its verdict, in name order; the exit status is the worst (highest) one."""
    for name in ("ucx_perftest/ucx_perftest-1.13-loopback-tag_bw-progress.out",
                 "ucx_perftest/ucx_perftest-1.13-no-server-joblog.out",
                 "ucx_perftest/ucx_perftest-1.10-server-client-tag_bw-openmp-cut.out"):
        (tmp_path / name.split("/")[1]).write_bytes((CORPUS / name).read_bytes())
    (tmp_path / "sub").mkdir()
    p = parse(str(tmp_path))
    lines = p.stdout.splitlines()
    assert [line.split(":")[:2] for line in lines] == [
        ["ucx_perftest-1.10-server-client-tag_bw-openmp-cut.out", " truncated"],
        ["ucx_perftest-1.13-loopback-tag_bw-progress.out", " complete"],
        ["ucx_perftest-1.13-no-server-joblog.out", " crashed"]], p.stderr
    assert p.returncode == max(EXIT["truncated"], EXIT["crashed"])
    (tmp_path / "fifo").symlink_to("/dev/null")  # not a regular file: that file unreadable, exit 2 at least
    p = parse(str(tmp_path), "--json")
    assert {f["file"]: f["verdict"] for f in json.loads(p.stdout)}["fifo"] == "unreadable"


# ------------------------------------------------------------------ no preamble turns a bad output into a pass

BAD = sorted(name for name, e in INDEX.items() if any(t.verdict != "complete" for t in e.tables))
ECHO = st.text(st.characters(min_codepoint=32, max_codepoint=126), min_size=1, max_size=60) \
    .filter(lambda s: s.strip() and not s.lstrip().startswith("#"))  # a job script's own echo
LINES = st.lists(st.one_of(st.sampled_from([p.example for p in noise.PATTERNS]), ECHO), max_size=6)


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(before=LINES, after=LINES)
@pytest.mark.parametrize("name", BAD)
def test_no_preamble_or_trailer_turns_a_bad_output_into_a_pass(name, before, after):
    """Random job-script echo and known noise lines before and after every bad corpus output, read as a
    job log: some table still fails, and none that failed is read as validated."""
    entry = INDEX[name]
    text = (CORPUS / name).read_bytes().decode(errors="replace")
    text = "".join(line + "\n" for line in before) + text + ("" if text.endswith("\n") else "\n") \
        + "".join(line + "\n" for line in after)
    results = parse_results(text, parse_arguments(entry.args, entry.ranks), entry.ranks, lenient=True)
    assert any(r.error for r in results), f"{name} passes with {before} before and {after} after"
    if all(t.validated != "yes" for t in entry.tables):
        assert all(r.validated != "yes" for r in results), f"{name} validated with {before}, {after}"


@pytest.mark.parametrize("pattern", noise.CRASHES, ids=lambda p: p.what)
def test_every_known_crash_line_is_its_own_example_and_never_a_note(pattern, tmp_path):
    assert noise.classify(pattern.example, noise.CRASHES) is pattern and noise.classify(pattern.example) is None
    (tmp_path / "job.log").write_text(f"Job 1 on node1\n{pattern.example}\n")
    p = parse(str(tmp_path / "job.log"))
    assert p.returncode == EXIT["crashed"] and pattern.example in p.stderr, p.stderr


def test_a_drawn_table_of_the_job_script_is_its_note(tmp_path):
    """nvidia-smi's box (`+---+`, `| ... |` lines, as its 570 driver prints it) before and after an OSU table:
    lines of the job log, not the benchmark's."""
    smi = ["+-----------------------------------------------------------------------------------------+",
           "| NVIDIA-SMI 570.124.06             Driver Version: 570.124.06     CUDA Version: 12.8     |",
           "|-----------------------------------------+------------------------+----------------------+",
           "|   0  NVIDIA GH200 480GB             On  |   00000009:01:00.0 Off |                    0 |",
           "+-----------------------------------------+------------------------+----------------------+"]
    name = "osu7/osu_latency-7.2-joblog-lmod-time.out"
    log = tmp_path / "job.log"
    log.write_text("\n".join(smi) + "\n" + (CORPUS / name).read_text() + "\n".join(smi) + "\n")
    p = parse(str(log), "--args=-m 1:4096", "--json")
    [table] = json.loads(p.stdout)
    assert (table["verdict"], len(table["rows"])) == ("complete", 13), p.stderr
    assert [n["line"] for n in table["notes"] if n["lineno"] <= 5] == smi
