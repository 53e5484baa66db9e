"""Parsers against every recorded real output (OSU 7.2 and 5.7 runs, the seeds), through
`commstack parse`, and corrupted copies of them."""

import dataclasses
import json
import shlex
import subprocess
import sys

import pytest
import yaml

from commstack import benchmarks, exits
from commstack.cli.main import main
from commstack.errors import PARSE_ERRORS, ConfigError, ParseError, UnknownFormatError
from commstack.paths import TOP
from commstack.results.judge import check_correctness
from commstack.results.parse import parse_output, parse_tables
from commstack.tools import nccl_tests, osu
from commstack.tools.osu import parse_osu
from commstack.tools.mpi_pingpong import parse_pingpong

SEEDS = TOP / "systems" / "references" / "seeds"
SEED_INDEX = yaml.safe_load((SEEDS / "index.yaml").read_text())
OSU = TOP / "tests" / "data" / "osu"
OSU_INDEX = yaml.safe_load((OSU / "index.yaml").read_text())
EXIT = {e.kind: e.exit_status for e in PARSE_ERRORS} | {"ok": 0}


def swap(text, old, new):
    """`text` with `old`, which it holds once, replaced."""
    assert text.count(old) == 1
    return text.replace(old, new)


def osu_text(name: str) -> str:
    return (OSU / name).read_bytes().decode(errors="replace")


def commstack_parse(capsys, path, args="", *extra):
    """`commstack parse` in this process: the same code path as the command, 130 times faster to start."""
    rc = main(["parse", str(path), f"--args={args}", *extra])
    out, err = capsys.readouterr()
    return rc, out, err


# ----------------------------------------------------------------- real OSU 7.2 and 5.7 outputs


def test_osu_index_names_every_recorded_output():
    assert sorted(OSU_INDEX) == sorted(str(p.relative_to(OSU)) for p in OSU.glob("*/*.stdout"))
    assert sorted(e["stderr"] for e in OSU_INDEX.values() if "stderr" in e) == sorted(
        p.name for p in OSU.glob("*/*.stderr")) and all("with_stderr" in e for e in OSU_INDEX.values() if "stderr" in e)
    kinds = {"ok", "truncated", "unknown-format", "empty", "validation-failed"}
    assert {e["expect"] for e in OSU_INDEX.values()} == kinds


@pytest.mark.parametrize("name", sorted(OSU_INDEX))
def test_every_real_osu_output_through_commstack_parse(capsys, name):
    entry = OSU_INDEX[name]
    rc, out, err = commstack_parse(capsys, OSU / name, entry["args"], "--ranks", str(entry["ranks"]), "--json")
    assert rc == EXIT[entry["expect"]], err
    if entry["expect"] == "ok":
        doc = json.loads(out)
        tables = doc if isinstance(doc, list) else [doc]
        # every data line of the file (counted by its first character) is a row
        assert sum(len(t["rows"]) for t in tables) == entry["rows"]
        assert all(t["version"] == name.split("/")[0] and t["columns"][0] == {"name": "size", "unit": "B"}
                   for t in tables)
    else:
        assert f": {entry['expect']}: " in err and "line " in err or entry["expect"] == "empty"


@pytest.mark.parametrize("name", sorted(n for n, e in OSU_INDEX.items() if "stderr" in e))
def test_every_real_transcript_with_its_stderr(capsys, tmp_path, name):
    """stdout then stderr, as a job script's 2>&1 keeps them: the launcher's and Slurm's lines name the kind."""
    entry = OSU_INDEX[name]
    path = tmp_path / "transcript"
    path.write_bytes((OSU / name).read_bytes() + (OSU / name).with_name(entry["stderr"]).read_bytes())
    rc, out, err = commstack_parse(capsys, path, entry["args"], "--ranks", str(entry["ranks"]))
    if entry["with_stderr"] == "ok":  # stderr holds OSU's own warnings: notes, named
        assert rc == 0 and ", complete, " in out and "note line" in out and "unknown" not in out, out + err
    else:
        assert rc == EXIT[entry["with_stderr"]] and f": {entry['with_stderr']}: " in err, err


def test_osu_72_validation_error_line_is_validation_failed_also_before_the_crash_lines():
    """OSU 7.2 osu_reduce_scatter -c, 3 ranks: a Fail row at 64 B, `DATA VALIDATION ERROR: ... on message
    size 64.`, exit 1; the launcher's lines that follow are its consequence."""
    e = raises(osu_text("7.2/osu_reduce_scatter-c.stdout"), ["-c"], ranks=3)
    assert (e.kind, e.lineno) == ("validation-failed", 12) and e.line.endswith("exited with status 1 on message size 64.")
    e = raises(osu_text("7.2/osu_reduce_scatter-c.stdout") + osu_text("7.2/osu_reduce_scatter-c.stderr"), ["-c"])
    assert (e.kind, e.line.split()) == ("validation-failed", ["64", "5.73", "Fail"])
    assert "then: the launcher says a rank exited with a non-zero status" in e.message
    srun = swap(osu_text("7.2/osu_reduce_scatter-f-c.stdout"), "message size 64.\n",
                "message size 64.\nsrun: error: node1: task 0: Exited with exit code 1\n"
                "srun: Terminating StepId=1.1\n")
    assert raises(srun, ["-f", "-c"]).kind == "validation-failed"


def test_slurm_says_why_it_ended_a_step():
    e = raises(osu_text("7.2/osu_latency-srun-time-limit.stdout") + osu_text("7.2/osu_latency-srun-time-limit.stderr"),
               ["-m", "1:1048576"])
    assert (e.kind, e.lineno) == ("timed-out", 8) and e.line.startswith("slurmstepd-vm: error: *** STEP 1.0 ON vm")
    e = raises(osu_text("7.2/osu_bibw-srun-node-failure.stdout") + osu_text("7.2/osu_bibw-srun-node-failure.stderr"),
               [])
    assert e.kind == "node-failure" and "DUE TO NODE FAILURE" in e.line
    e = raises(osu_text("7.2/osu_allreduce-alloc-fails.stdout") + osu_text("7.2/osu_allreduce-alloc-fails.stderr"), [])
    assert (e.kind, e.line) == ("crashed", "MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD")


@pytest.mark.parametrize("name,kind", [("7.2/osu_bw.stdout", "ok"), ("5.7/osu_latency.stdout", "ok"),
                                       ("7.2/osu_acc_latency-c.stdout", "truncated"),
                                       ("5.7/osu_bw-c.stdout", "unknown-format"),
                                       ("7.2/osu_latency-np1.stdout", "empty")])
def test_commstack_parse_as_a_user_types_it(name, kind):
    entry = OSU_INDEX[name]
    p = subprocess.run([sys.executable, "-m", "commstack", "parse", str(OSU / name), f"--args={entry['args']}"],
                       capture_output=True, text=True)
    assert p.returncode == EXIT[kind], p.stderr
    assert "Traceback" not in p.stderr
    if kind == "ok":
        assert ", complete, validated: " in p.stdout
    else:
        assert f": {kind}: " in p.stderr


@pytest.mark.parametrize("args,message", [
    (["--args=-m \"1:2"], "commstack parse: error: --args '-m \"1:2': No closing quotation"),
    (["--args=-m 1:abc"], "commstack parse: error: -m 1:abc: 'abc' is not a size in bytes"),
    (["--args=-m 1M"], "commstack parse: error: -m 1M: '1M' is not a size in bytes"),
    (["--ranks", "0"], "commstack parse: error: --ranks 0: a run has 1 rank or more"),
    (["--ranks", "-3"], "commstack parse: error: --ranks -3: a run has 1 rank or more"),
])
def test_commstack_parse_bad_arguments_are_named_errors(capsys, args, message):
    rc = main(["parse", str(OSU / "7.2/osu_bw.stdout"), *args])
    err = capsys.readouterr().err
    assert rc == 2 and err.strip() == message and "Traceback" not in err


def test_nccl_and_pingpong_sizes_come_from_the_arguments_when_given():
    text = seed("cscs-nccl-01.txt")  # minBytes 8 maxBytes 134217728
    assert expect_kind(text, ["-b", "8", "-e", "128M", "-f", "2"]) == "ok"
    e = raises(text, ["-b", "8", "-e", "256M", "-f", "2"])
    assert e.kind == "truncated" and "268435456 B" in e.message
    pp = ("# mpi-pingpong v1.0 mode=cpu ranks=2 loops=10 warmup=5 min=8 max=16\n"
          "Transfer size (B):          8, Transfer Time (s):     0.000000524, Bandwidth (GB/s):     0.014231566, Check: Pass\n"
          "Transfer size (B):         16, Transfer Time (s):     0.000000113, Bandwidth (GB/s):     0.131956265, Check: Pass\n"
          "# mpi-pingpong done: all sizes passed\n")
    assert expect_kind(pp, []) == "ok" and expect_kind(pp, ["-b", "8", "-e", "32"]) == "truncated"


def test_a_trailing_junk_line_is_unknown_format_a_cut_row_truncated():
    text = osu_text(BW)
    e = raises(text + "Finalizing, please wait\n", [])
    assert e.kind == "unknown-format" and e.line == "Finalizing, please wait"
    assert raises(text + "Finalizing", []).kind == "unknown-format"  # no newline, but no row either
    assert raises(text[:-8], []).kind == "truncated"  # cut inside the last row, no newline


def test_parse_help_documents_every_exit_status():
    p = subprocess.run([sys.executable, "-m", "commstack", "parse", "--help"], capture_output=True, text=True)
    help_text = " ".join(p.stdout.split())
    for e in PARSE_ERRORS:
        assert f"{e.exit_status} {e.kind}" in help_text
    assert len({e.exit_status for e in PARSE_ERRORS}) == len(PARSE_ERRORS)


def test_json_gives_benchmark_version_columns_with_units_and_rows(capsys):
    rc, out, _ = commstack_parse(capsys, OSU / "7.2/osu_allreduce-f-c.stdout", "-i 20 -x 2 -f -c", "--json")
    [doc] = json.loads(out)
    assert rc == 0 and (doc["benchmark"], doc["version"], doc["meta"]["datatype"]) == ("osu_allreduce", "7.2", "MPI_CHAR")
    assert (doc["verdict"], doc["validated"], doc["error"], doc["lines"]) == ("complete", "yes", None, [2, 25])
    assert [(c["name"], c["unit"]) for c in doc["columns"]] == [
        ("size", "B"), ("latency_us", "us"), ("min_latency_us", "us"), ("max_latency_us", "us"),
        ("iterations", None), ("validation", None)]
    assert doc["rows"][0] == {"size": 1, "latency_us": 14.44, "min_latency_us": 10.65, "max_latency_us": 21.86,
                              "iterations": 20, "validation": "Pass"}


def test_osu_72_point_to_point_prints_the_datatype_after_the_header():
    s = parse_output(None, osu_text("7.2/osu_latency-c.stdout"), [])
    assert s.columns == ["size", "latency_us", "validation"] and s.meta["datatype"] == "MPI_CHAR"
    assert (s.sizes[0], s.sizes[-1], len(s.rows)) == (1, 4194304, 23)


def test_osu_57_latency_starts_at_zero_and_has_no_datatype_line():
    s = parse_output("osu_latency", osu_text("5.7/osu_latency.stdout"), ["-i", "20"])
    assert s.sizes[:2] == [0, 1] and "datatype" not in s.meta and s.version == "5.7"


def test_osu_72_mbw_mr_title_twice_and_pairs_line():
    s = parse_output(None, osu_text("7.2/osu_mbw_mr-np4.stdout"), [])
    assert (s.meta["pairs"], s.meta["window_size"]) == (2, 64)
    assert s.columns == ["size", "bandwidth_MBps", "message_rate"] and s.row(4194304)["message_rate"] == 3326.39


def test_osu_one_sided_window_lines_and_passed_validation():
    s = parse_output(None, osu_text("7.2/osu_get_acc_latency.stdout"), [])
    assert (s.meta["window_creation"], s.meta["synchronization"]) == ("MPI_Win_create", "MPI_Win_lock/unlock")
    rows = parse_osu(osu_text("7.2/osu_acc_latency-c.stdout"))[0].rows
    assert {r["validation"] for r in rows} == {"Pass"}  # written "passed"


def test_osu_barrier_has_one_row_without_a_size():
    s = parse_output(None, osu_text("5.7/osu_barrier-f.stdout"), ["-f"])
    assert s.rows == [{"size": 0, "latency_us": 11.77, "min_latency_us": 11.52, "max_latency_us": 11.91,
                       "iterations": 20}]


def test_osu_72_all_datatypes_are_one_table_each():
    text = osu_text("7.2/osu_allreduce-T_all.stdout")
    tables = parse_tables(text)
    assert [(t.meta["datatype"], t.sizes[0], t.sizes[-1]) for t in tables] == [
        ("MPI_CHAR", 1, 64), ("MPI_INT", 4, 64), ("MPI_FLOAT", 4, 64)]
    with pytest.raises(UnknownFormatError, match="3 tables in one output"):
        parse_output(None, text, ["-m", "1:64"])


def test_osu_72_point_to_point_all_datatypes_keep_the_first_tables_columns():
    """7.2 heads a point-to-point test's MPI_INT and MPI_FLOAT tables with the collectives' header,
    `# Size  Avg Latency(us)`, whatever the rows hold (bandwidth; for osu_mbw_mr two columns)."""
    bw = parse_tables(osu_text("7.2/osu_bw-T_all.stdout"))
    assert [(t.meta["datatype"], t.columns, t.sizes[0]) for t in bw] == [
        ("MPI_CHAR", ["size", "bandwidth_MBps"], 1), ("MPI_INT", ["size", "bandwidth_MBps"], 4),
        ("MPI_FLOAT", ["size", "bandwidth_MBps"], 4)]
    assert bw[1].row(4) == {"size": 4, "bandwidth_MBps": 23.76}
    mr = parse_tables(osu_text("7.2/osu_mbw_mr-T_all.stdout"))
    assert mr[2].row(64) == {"size": 64, "bandwidth_MBps": 262.96, "message_rate": 4108674.44}


def test_a_crash_in_a_datatype_table_keeps_that_datatypes_rows(capsys, tmp_path):
    """A rank killed in the middle of `osu_bw -T all`'s MPI_INT table: the table's rows read before the crash
    are MPI_INT's, not MPI_CHAR's."""
    lines = osu_text("7.2/osu_bw-T_all.stdout").splitlines(keepends=True)
    path = tmp_path / "out"
    path.write_text("".join(lines[:15] + ["srun: error: nid001: task 1: Killed\n"] + lines[15:]))
    rc, out, _ = commstack_parse(capsys, path, "-T all -m 1:64", "--json")
    [t] = json.loads(out)
    assert (rc, t["verdict"], t["error"]["lineno"], t["meta"]["datatype"]) == (exits.CRASHED, "crashed", 16, "MPI_INT")
    assert [r["size"] for r in t["rows"]] == [4, 8, 16]


def test_a_crash_line_in_an_output_with_no_title_is_quoted_on_its_line(capsys, tmp_path):
    path = tmp_path / "out"
    path.write_text("srun: job 7 queued and waiting for resources\n"
                    "[1795498764.937797] [vm:7107 :0]  perftest.c:405  UCX  ERROR client failed.\n")
    rc, out, _ = commstack_parse(capsys, path, "", "--json")
    [t] = json.loads(out)
    assert (rc, t["verdict"], t["error"]["lineno"]) == (exits.CRASHED, "crashed", 2)
    assert t["error"]["message"] == "no benchmark title, and a crash line: ucx's UCX error log line"


#: a first table that fails in each way commstack parse knows, before a whole osu_bw table
FIRST_FAILS = {
    "an unknown line among its rows": (lambda lat: lat.replace("\n8 ", "\nhello\n8 ", 1), [], "unknown-format"),
    "a line before its title (--strict)": (lambda lat: "hello\n" + lat, ["--strict"], "unknown-format"),
    "an unknown title": (lambda lat: "# OSU MPI Foo Test v7.2\n1 2\n", [], "unknown-format"),
    "a bad number": (lambda lat: lat.replace("\n8 ", "\n8x ", 1), [], "bad-number"),
    "a rank killed": (lambda lat: lat + "srun: error: nid001: task 1: Killed\n", [], "crashed"),
}


@pytest.mark.parametrize("case", FIRST_FAILS)
def test_a_table_after_a_failed_one_is_still_read(capsys, tmp_path, case):
    """A job log of two steps: the first's failure is its own verdict; the second's table is read whole."""
    make, flags, kind = FIRST_FAILS[case]
    path = tmp_path / "out"
    path.write_text(make(osu_text("7.2/osu_latency.stdout")) + osu_text("7.2/osu_bw.stdout"))
    rc, out, _ = commstack_parse(capsys, path, "", "--json", *flags)
    assert [(t["verdict"], t["benchmark"]) for t in json.loads(out)][1:] == [("complete", "osu_bw")]
    assert json.loads(out)[0]["verdict"] == kind and rc == EXIT[kind]


def test_a_steps_output_of_two_tables_is_refused_at_the_second():
    text = osu_text("7.2/osu_latency.stdout") + osu_text("7.2/osu_bw.stdout")
    with pytest.raises(UnknownFormatError, match="^2 tables in one output; a step runs one ") as e:
        parse_output("osu_latency", text, [])
    assert (e.value.lineno, e.value.line) == (27, "# OSU MPI Bandwidth Test v7.2")


@pytest.mark.parametrize("second", ["all_reduce_perf", "all_gather_perf"])
def test_nccl_tests_of_another_collective_than_the_steps_quotes_its_first_title(second):
    """nccl-tests 2.17.4+ names its collective in its second line: the step's output is refused at the first table's,
    whatever follows it."""
    text = (TOP / "tests" / "data" / "corpus" / "nccl-tests" / "all_reduce_perf-2.19.4-c2-repro.out").read_text()
    with pytest.raises(UnknownFormatError, match="^expected all_gather_perf output, the title is another") as e:
        parse_output("all_gather_perf", text + text.replace("all_reduce_perf", second), [])
    assert (e.value.lineno, e.value.line) == (2, "# Collective test starting: all_reduce_perf")


def test_commstack_parse_prints_its_notes_summary(capsys, tmp_path):
    """A job log's own lines, each a note where it stands: before the first table, between two."""
    path = tmp_path / "out"
    path.write_text("hello\n" + osu_text("7.2/osu_bw.stdout"))
    rc, out, _ = commstack_parse(capsys, path)
    assert rc == 0 and out.splitlines()[1:] == [
        "  1 line of the job log before the first table",
        "  note line 1: unknown (a line of the job log before the first table): hello"]
    path.write_text("hello\nworld\n" + osu_text("7.2/osu_bw.stdout") + "step two\n" + osu_text("7.2/osu_latency.stdout"))
    rc, out, _ = commstack_parse(capsys, path)
    assert rc == 0 and [line for line in out.splitlines() if not line.startswith("lines ")] == [
        "  2 lines of the job log before the first table", "  1 line between two tables",
        "  note line 1: unknown (a line of the job log before the first table): hello",
        "  note line 2: unknown (a line of the job log before the first table): world",
        "  note line 29: unknown (a line between two tables): step two"]


def test_commstack_parse_says_where_a_verdict_stopped_its_reading(capsys, tmp_path):
    """No title in the first 100,000 lines: the verdict is settled there, and the user is told how far it read."""
    path = tmp_path / "out"
    path.write_text("hello\n" * 200_000)
    rc, _, err = commstack_parse(capsys, path)
    assert rc == exits.UNKNOWN_FORMAT and err.splitlines()[-1] == \
        f"commstack parse: {path}: read 131072 lines: the failure above settles the verdict, whatever follows"


def test_a_job_scripts_lines_after_the_last_table_are_notes_on_their_lines(capsys, tmp_path):
    """The job script's echoes after the table, blank lines around them: each echo a note with its own line
    number, the table whole."""
    path = tmp_path / "out"
    path.write_text(osu_text("7.2/osu_bw.stdout") + "\njob done\n\nexit 0\n")
    rc, out, _ = commstack_parse(capsys, path, "", "--json")
    [t] = json.loads(out)
    after = "a line of the job log after the last table"
    assert (rc, t["verdict"], t["notes"]) == (0, "complete", [
        {"lineno": 28, "source": "unknown", "what": after, "line": "job done"},
        {"lineno": 30, "source": "unknown", "what": after, "line": "exit 0"}])


def test_crashed_run_stdout_is_truncated_and_with_stderr_crashed():
    out, err = osu_text("5.7/osu_cas_latency.stdout"), osu_text("5.7/osu_cas_latency.stderr")
    assert expect_kind(out, []) == "truncated"
    e = raises(out + err, [])
    assert (e.kind, e.line) == ("crashed", "[vm:24709] *** Process received signal ***")
    killed = osu_text("7.2/osu_latency-rank-killed.stdout") + osu_text("7.2/osu_latency-rank-killed.stderr")
    assert expect_kind(killed, []) == "crashed"


def test_truncated_quotes_the_last_row_and_the_sizes_asked():
    e = raises(osu_text("7.2/osu_acc_latency-c.stdout"), ["-c"])
    assert e.kind == "truncated" and e.line.split() == ["2097152", "109.49", "passed"] and e.lineno == 27
    assert "1..4194304 B" in e.message
    # the same rows are complete when the arguments asked for no more
    assert parse_output(None, osu_text("7.2/osu_acc_latency-c.stdout"), ["-m", "1:2097152"]).sizes[-1] == 2097152


def test_sizes_from_the_arguments_win_over_the_defaults():
    text = osu_text("7.2/osu_bw-m8_1M.stdout")
    assert parse_output(None, text, ["-m", "8:1048576"]).sizes[-1] == 1048576
    assert expect_kind(text, []) == "truncated"
    assert expect_kind(text, ["-m", "2097152"]) == "truncated"
    assert expect_kind(text, ["--message-size=8:1048576"]) == "ok"


#: the collectives whose buffers hold a message from every rank: OSU (5.3 - 7.4, check_mem_limit) stops them at
#: -M / ranks; the others run every size asked for
GATHERING = {f"osu_{i}{name}" for i in ("", "i") for name in (
    "alltoall", "alltoallv", "alltoallw", "allgather", "allgatherv", "gather", "gatherv", "scatter", "scatterv")}


@pytest.mark.parametrize("bench", sorted(n for n, b in benchmarks.BENCHMARKS.items()
                                         if b.directory == "collective" and b.sized and b.tool.name == "osu"
                                         and not n.startswith("osu_xccl") and not n.startswith("osu_nccl")))
def test_only_a_gathering_collective_stops_at_its_memory_limit(bench):
    """Real osu_alltoall 7.2 (1 B to 1 MiB) under each collective's title, asked for 4 MiB on 512 ranks: whole
    where 512 MiB / 512 ranks ends the sweep at 1 MiB, truncated where nothing does."""
    text = osu_text("7.2/osu_alltoall.stdout").replace("OSU MPI All-to-All Personalized Exchange Latency Test",
                                                        benchmarks.get(bench).titles[0])
    kind = expect_kind(text, ["-m", "1:4194304"], ranks=512)
    assert kind == ("ok" if bench in GATHERING else "truncated"), kind


def test_osu_memory_limit_shortens_a_collective_sweep():
    text = osu_text("7.2/osu_alltoall.stdout")  # ends at 1 MiB
    assert expect_kind(text, [], ranks=3) == "ok"
    assert expect_kind(text, ["-m", "1:4194304"], ranks=3) == "truncated"
    assert expect_kind(text, ["-m", "1:4194304"], ranks=512) == "ok"  # 512 MiB / 512 ranks = 1 MiB
    assert expect_kind(text, ["-m", "1:4194304", "-M", "3145728"], ranks=3) == "ok"
    # 7.x says so on stderr, without a newline: glued to the next line of a 2>&1 transcript
    glued = swap(text, "# OSU", "Warning! Limiting max message size to: 1048576. Increase -M, --mem-limit for "
                                  "higher message sizes.# OSU")
    s = parse_output(None, glued, ["-m", "1:4194304"])
    assert s.meta["mem_limit"] == 1048576 and len(s.rows) == 21 and "Limiting" in s.notes[0].line


def test_wrong_benchmark_and_usage_text():
    with pytest.raises(UnknownFormatError, match="expected osu_bw output"):
        parse_output("osu_bw", osu_text("7.2/osu_latency.stdout"), [])
    e = raises(osu_text("7.2/osu_barrier-c.stdout"), [])
    assert e.kind == "unknown-format" and "usage" in e.message and e.line == "Usage: osu_barrier [options]"


# ----------------------------------------------------------------------- corrupted copies


def raises(text: str, args: list[str], ranks: int | None = None) -> ParseError:
    with pytest.raises(ParseError) as info:
        parse_output(None, text, args, ranks)
    return info.value


def expect_kind(text: str, args: list[str], ranks: int | None = None) -> str:
    try:
        parse_output(None, text, args, ranks)
    except ParseError as e:
        return e.kind
    return "ok"


BW = "7.2/osu_bw-c.stdout"


def test_cut_mid_table_is_truncated():
    text = osu_text(BW)
    at = text.index("65536")
    assert raises(text[:at], []).kind == "truncated"                 # after a whole row
    e = raises(text[:at + 20], [])                                   # inside a row
    assert e.kind == "truncated" and e.line.startswith("65536")


def test_garbled_number_is_bad_number():
    e = raises(swap(osu_text(BW), " 713.43", " 71z.43"), [])
    assert (e.kind, e.line.split()[1], e.lineno) == ("bad-number", "71z.43", 19)
    assert raises(swap(osu_text(BW), " 13.57", "-13.57"), []).kind == "bad-number"


def test_non_utf8_bytes_are_bad_number_not_lost():
    raw = (OSU / BW).read_bytes()
    assert raw.count(b"713.43") == 1
    e = raises(raw.replace(b"713.43", b"71\xff.43").decode(errors="replace"), [])
    assert e.kind == "bad-number" and "\ufffd" in e.line and e.lineno == 19


def test_injected_srun_error_lines_are_crashed():
    text = osu_text(BW)
    for bad in ("srun: error: nid001234: task 1: Segmentation fault (core dumped)",
                "srun: Terminating StepId=1234.0",
                "slurmstepd: error: *** STEP 1234.0 ON nid001234 CANCELLED AT 2025-01-01T00:00:00 ***"):
        e = raises(swap(text, "65536", bad + "\n65536"), [])
        assert (e.kind, e.line) == ("crashed", bad)


def test_glued_loader_warning_keeps_the_row():
    warning = ("/usr/local/libexec/osu-micro-benchmarks/mpi/./pt2pt/osu_bw: /usr/lib/aarch64-linux-gnu/"
               "libnl-3.so.200: no version information available (required by /usr/lib64/libcxi.so.1)")
    text = osu_text(BW)
    row = next(line for line in text.splitlines() if line.startswith("65536"))
    s = parse_output(None, swap(text, row, row + warning), [])
    assert len(s.rows) == 23 and s.row(65536)["validation"] == "Pass" and [n.line for n in s.notes] == [warning]
    s = parse_output(None, swap(text, row, warning + row), [])
    assert len(s.rows) == 23 and [n.line for n in s.notes] == [warning]


def test_glued_unknown_text_is_an_error_not_a_lost_row():
    text = osu_text(BW)
    row = next(line for line in text.splitlines() if line.startswith("65536"))
    e = raises(swap(text, row, row + " WARNING: something odd"), [])
    assert e.kind == "unknown-format" and e.line.endswith("something odd")
    assert e.message == "text glued to the end of a row: 'WARNING: something odd'"
    e = raises(swap(text, row, "WARNING: something odd " + row), [])
    assert e.message == "text glued to the start of a row: 'WARNING: something odd'"
    ucx = "[1700000000.123456] [nid001:1234:0]  ucp_context.c:1234 UCX  WARN  transport 'cxi' is not available"
    assert len(parse_output(None, swap(text, row, ucx + "\n" + row), []).rows) == 23
    e = raises(swap(text, row, ucx + "   " + row), [])  # a row swallowed by a free-text warning
    assert e.kind == "unknown-format" and "glued" in e.message


def test_fail_rows_are_validation_failed():
    text = osu_text(BW)
    row = next(line for line in text.splitlines() if line.startswith("262144"))
    e = raises(swap(text, row, row.replace("Pass", "Fail")), [])
    assert e.kind == "validation-failed" and e.line.startswith("262144")
    acc = swap(osu_text("7.2/osu_acc_latency-c.stdout"), "\n2                       0.19            passed",
               "\n2                       0.19            failed")
    assert expect_kind(acc, ["-m", "1:2097152"]) == "validation-failed"


def without_first_row(text: str) -> str:
    """`text` less its first data row (the first line whose text starts with a digit)."""
    lines = text.splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if line.strip()[:1].isdigit())
    return "".join(lines[:first] + lines[first + 1:])


@pytest.mark.parametrize("name", sorted(n for n, e in OSU_INDEX.items() if e["expect"] == "ok"))
def test_every_real_output_less_its_first_row_is_truncated(name):
    """The first size is derived exactly: -m's lower bound, the datatype's element size, OSU's defaults."""
    entry = OSU_INDEX[name]
    e = raises(without_first_row(osu_text(name)), shlex.split(entry["args"]), entry["ranks"])
    assert e.kind == "truncated", e


def test_first_size_from_the_arguments_and_the_datatype():
    assert expect_kind(osu_text("7.2/osu_latency-T_mpi_int.stdout"), ["-T", "mpi_int", "-m", "1:64"]) == "ok"  # from 4 B
    assert expect_kind(osu_text("7.2/osu_bw-m8_1M.stdout"), ["-m", "8:1048576"]) == "ok"
    assert expect_kind(osu_text("7.2/osu_bw-m8_1M.stdout"), ["-m", "4:1048576"]) == "truncated"
    e = raises(osu_text("7.2/osu_bw-m8_1M.stdout"), ["-m", "16:1048576"])
    assert e.kind == "unknown-format" and "below the 16 B" in e.message
    # OSU refuses a minimum of 0 and keeps its default; 5.x reductions count floats, so 6 B is 1 float: 4 B
    assert expect_kind(osu_text("5.7/osu_latency.stdout"), ["-m", "0:4194304"]) == "ok"
    assert expect_kind(osu_text("5.7/osu_allreduce.stdout"), ["-m", "6:1048576"], ranks=3) == "ok"


def test_missing_middle_row_and_empty():
    text = osu_text(BW)
    row = next(line for line in text.splitlines() if line.startswith("1024 "))
    e = raises(swap(text, row + "\n", ""), [])
    assert e.kind == "unknown-format" and "missing" in e.message and e.line.startswith("2048")
    assert raises("", []).kind == "empty"
    assert raises("\n\n  \n", []).kind == "empty"


# ------------------------------------------------------------------------------------- seeds


def parse_seed(name: str):
    return parse_tables((SEEDS / name).read_text())


def test_seed_index_names_every_recorded_output():
    assert sorted(SEED_INDEX) == sorted(p.name for p in SEEDS.glob("*.txt"))


def data_lines(text: str) -> list[str]:
    """The lines of a recorded output that are table rows, told by their first character."""
    return [line for line in text.splitlines() if line.strip()[:1].isdigit() or line.startswith("Transfer size")]


@pytest.mark.parametrize("name", sorted(SEED_INDEX))
def test_every_seed_output_parses_and_is_correct(name):
    sweeps = parse_seed(name)
    assert sum(len(s.rows) for s in sweeps) == len(data_lines((SEEDS / name).read_text()))
    for s in sweeps:
        assert check_correctness(s) == []
        # the same table where the benchmark did not finish: the check must see it
        assert check_correctness(dataclasses.replace(s, complete=False)) == [
            f"{s.benchmark}: output ends before the benchmark's end line (sweep stopped early)"]


@pytest.mark.parametrize("name", sorted(n for n in SEED_INDEX if "nersc10" not in n))
def test_every_single_run_seed_is_complete_against_its_command(name):
    """Complete against the command it was recorded with; less its last row, that command's sweep is cut."""
    command = SEED_INDEX[name]["command"].split()
    exe = next((i for i, a in enumerate(command) if "osu_" in a or "_perf" in a), len(command))
    text = (SEEDS / name).read_text()
    rows = data_lines(text)
    assert [r["size"] for r in parse_output(None, text, command[exe + 1:]).rows] == [
        int(line.split()[0] if line[0] != "T" else line.split()[3].rstrip(",")) for line in rows]
    if len(rows) > 1:
        e = raises(swap(text, rows[-1] + "\n", ""), command[exe + 1:])
        assert e.kind == "truncated" and e.line.strip() == rows[-2].strip(), e


# (file, benchmark, device, rows, first (size, value), last (size, value), column)
EXPECTED = [
    ("cscs-osu-01.txt", "osu_bw", None, 23, (1, 0.95), (4194304, 23982.18), "bandwidth_MBps"),
    ("cscs-osu-02.txt", "osu_bw", "CUDA", 23, (1, 0.90), (4194304, 23989.54), "bandwidth_MBps"),
    ("cscs-osu-05.txt", "osu_bibw", None, 23, (1, 0.93), (4194304, 46417.59), "bandwidth_MBps"),
    ("cscs-osu-07.txt", "osu_latency", None, 23, (1, 3.34), (4194304, 182.39), "latency_us"),
    ("cscs-osu-09.txt", "osu_alltoall", "CUDA", 21, (1, 22.26), (1048576, 486.89), "latency_us"),
    ("cscs-osu-10.txt", "osu_bw", None, 23, (1, 0.16), (4194304, 3121.42), "bandwidth_MBps"),
    ("sarus-osu-01.txt", "osu_latency", None, 24, (0, 1.11), (4194304, 431.85), "latency_us"),
    ("sarus-osu-02.txt", "osu_alltoall", None, 21, (1, 5.46), (1048576, 733.93), "latency_us"),
    ("olcf-pingpong-cpu.txt", "mpi-pingpong", None, 28, (8, 0.008604834), (1073741824, 12.666389375),
     "bandwidth_GiBps"),
    ("olcf-pingpong-cuda-aware.txt", "mpi-pingpong", None, 28, (8, 0.000319968), (1073741824, 43.781843371),
     "bandwidth_GiBps"),
]


@pytest.mark.parametrize("name,bench,device,nrows,first,last,col", EXPECTED)
def test_seed_tables_values(name, bench, device, nrows, first, last, col):
    s = parse_seed(name)[0]
    assert (s.benchmark, s.device, len(s.rows)) == (bench, device, nrows)
    assert (s.rows[0]["size"], s.rows[0][col]) == first
    assert (s.rows[-1]["size"], s.rows[-1][col]) == last


def test_osu_v75_header_meta_and_loader_warnings():
    s = parse_seed("cscs-osu-08.txt")[0]
    assert s.version == "7.5" and s.meta["datatype"] == "MPI_CHAR"
    assert s.columns == ["size", "latency_us", "validation"]
    assert len(s.notes) == 8 and "libcxi" in s.notes[0].line  # one loader warning per rank


def test_osu_several_tables_in_one_job_seed_004():
    s = parse_seed("nersc10-archer2.txt")
    assert [(x.benchmark, x.meta["datatype"], x.rows[0]["size"], x.rows[0]["latency_us"]) for x in s] == [
        ("osu_allreduce", "MPI_INT", 8, 33.58), ("osu_allreduce", "MPI_INT", 26214400, 29942.75),
        ("osu_alltoall", "MPI_CHAR", 1048576, 87258.19)]
    assert [n.line for n in s[0].notes] == ["Nodes:256 Tasks:512 Per Node:2"]


def test_nccl_seed_002_columns_devices_and_summary():
    s = parse_seed("cscs-nccl-01.txt")[0]
    assert s.benchmark == "all_reduce_perf" and s.complete is True
    assert s.meta["minBytes"] == 8 and s.meta["maxBytes"] == 134217728 and s.meta["iters"] == 20
    assert s.meta["avg_busbw_GBps"] == pytest.approx(19.7866) and s.meta["out_of_bounds"] == 0
    assert [(d["rank"], d["host"], d["device"], d["pci"]) for d in s.meta["devices"]][3:5] == [
        (3, "nid005471", 3, "0039:01:00"), (4, "nid005487", 0, "0009:01:00")]
    assert s.row(134217728)["oop_busbw_GBps"] == 122.57 and s.row(134217728)["ip_busbw_GBps"] == 123.11
    assert s.row(33554432)["oop_time_us"] == 686.5
    nohook = parse_seed("cscs-nccl-02.txt")[0]
    assert nohook.row(33554432)["oop_time_us"] == 17388.0  # integer-formatted time column


def seed(name: str, old: str = "", new: str = "") -> str:
    text = (SEEDS / name).read_text()
    assert old in text
    return text.replace(old, new, 1)


def test_nccl_wrong_elements_truncation_and_oob():
    e = raises(seed("cscs-nccl-01.txt", "-1    17.93    0.00    0.00      0", "-1    17.93    0.00    0.00      3"), [])
    assert e.kind == "validation-failed" and e.line.split()[8] == "3"
    text = seed("cscs-nccl-01.txt")
    e = raises(text[: text.index("# Out of bounds")], [])
    assert e.kind == "truncated" and "end line" in e.message and e.line.split()[0] == "134217728"
    e = raises(swap(text, "1916.4   70.04  122.57      0", "1916.4   70.04  122.57"), [])
    assert e.kind == "unknown-format" and "12 fields" in e.message
    assert raises(swap(text, "0 OK", "2 FAILED"), []).kind == "validation-failed"
    assert raises(text.replace("\n", "\nsrun: error: nid005487: task 5: Killed\n", 20), []).kind == "crashed"
    assert nccl_tests.parse(swap(text, "1916.4", "1.9164e+03"))[0].row(134217728)["oop_time_us"] == 1916.4


def test_pingpong_our_format_check_column_and_end_line():
    text = ("# mpi-pingpong v1.0 mode=cpu ranks=2 loops=10 warmup=5 min=8 max=16\n"
            "Transfer size (B):          8, Transfer Time (s):     0.000000524, Bandwidth (GB/s):     0.014231566, Check: Pass\n"
            "Transfer size (B):         16, Transfer Time (s):     0.000000113, Bandwidth (GB/s):     0.131956265, Check: Fail\n"
            "DATA VALIDATION ERROR: size 16, first wrong byte at 3 on rank 1\n"
            "# mpi-pingpong done: data check FAILED\n")
    s = parse_pingpong(text)
    assert s.meta["mode"] == "cpu" and s.complete and s.sizes == [8, 16]
    assert len(check_correctness(s)) == 2
    e = raises(text, [])
    assert e.kind == "validation-failed" and e.line.startswith("DATA VALIDATION ERROR")
    good = swap(swap(text, "Check: Fail", "Check: Pass"),
                "DATA VALIDATION ERROR: size 16, first wrong byte at 3 on rank 1\n", "")
    assert parse_output("mpi-pingpong", good, []).sizes == [8, 16]
    assert raises(swap(good, "max=16", "max=64"), []).kind == "truncated"
    assert raises(swap(good, "# mpi-pingpong done: data check FAILED\n", ""), []).kind == "truncated"
    assert raises(good + "garbage\n", []).kind == "unknown-format"


# ------------------------------------------------------------------------------- the registry


def test_registry_size_arguments_round_trip():
    for b in benchmarks.BENCHMARKS.values():
        if b.tool.sizes_check:  # fi_pingpong and ucx_perftest take their sizes in their own arguments
            with pytest.raises(ConfigError, match="takes no size range"):
                b.sizes.args(8, 1048576)
            continue
        assert b.sizes.requested(b.sizes.args(8, 1048576)) == (8, 1048576)
    nccl = benchmarks.get("all_reduce_perf")
    assert nccl.sizes.args(8, "128M") == ["-b", "8", "-e", "128M", "-f", "2"]
    assert nccl.sizes.requested(shlex.split("-b 8 -e 128M -f 2")) == (8, 134217728)
    with pytest.raises(ConfigError, match="-m 1M: '1M' is not a size in bytes"):  # OSU's atoll would make it 1
        benchmarks.get("osu_bw").sizes.requested(["-m", "1M"])


def test_a_size_argument_that_is_no_byte_count_is_refused_by_parse(capsys):
    rc, out, err = commstack_parse(capsys, SEEDS / "cscs-nccl-01.txt", "-b 8x -e 128M -f 2")
    assert rc == 2 and out == "" and "size '8x' is not a byte count (suffix K, M or G)" in err, err
    rc, out, err = commstack_parse(capsys, SEEDS / "cscs-osu-01.txt", "-m 1:2:3")  # getopt's one value, split once
    assert rc == 2 and out == "" and "-m 1:2:3: '2:3' is not a size in bytes" in err, err


def test_size_flags_read_as_getopt_reads_them(capsys):
    """`-m1:1024` is -m with its value attached; a `-m` last, with no value, leaves the default sizes."""
    rc, out, err = commstack_parse(capsys, SEEDS / "cscs-osu-01.txt", "-m1:1024")
    assert rc == exits.UNKNOWN_FORMAT and "past the 1..1024 B its arguments ask for" in err, err
    rc, out, err = commstack_parse(capsys, SEEDS / "cscs-osu-01.txt", "-i 10 -m")
    assert rc == 0 and ", complete, " in out, out + err


def test_an_unknown_benchmark_of_a_known_tool_after_a_table_is_a_table_of_its_own(capsys, tmp_path):
    """seed 000's osu_latency, then the title of an OSU benchmark commstack does not know: the first table
    stays complete, the second is named by its own title (not a foreign line inside the first)."""
    path = tmp_path / "two.out"
    path.write_text((SEEDS / "cscs-osu-07.txt").read_text() + "# OSU MPI Frobnicate Test v7.5\n"
                    "# Size       Latency (us)\n1                       1.00\n")
    rc, out, err = commstack_parse(capsys, path)
    assert rc == exits.UNKNOWN_FORMAT, out
    assert "23 rows, 1..4194304 B, complete" in out and "lines 30-32: no table" in out, out
    assert "unknown-format: unknown OSU benchmark title\n  line 30: # OSU MPI Frobnicate Test v7.5" in err, err


def test_registry_covers_every_suite_benchmark_and_every_title_parses():
    suites = [yaml.safe_load(p.read_text()) for p in (TOP / "suites").glob("*.yaml")]
    assert {s["benchmark"] for suite in suites for s in suite["steps"]} <= set(benchmarks.BENCHMARKS)
    for b in benchmarks.BENCHMARKS.values():
        if b.tool is osu.TOOL and b.directory in ("pt2pt", "one-sided", "collective"):
            assert parse_osu(f"# {b.titles[0]} v7.2\n# Size  Latency (us)\n1  1.00\n" if b.sized else
                             f"# {b.titles[0]} v7.2\n# Avg Latency(us)\n  1.00\n")[0].benchmark == b.name
        if b.tool is osu.TOOL:  # a benchmark without sizes (barrier, init, hello) has none to know
            known = [b.defaults(v) for v in ("7.2", "5.7", "6.0")]
            assert (all(known) if b.sized else known == [None] * 3) and b.defaults("8.0") is None, b.name


def test_a_step_that_exits_non_zero_after_failed_validation_is_validation_failed(tmp_path):
    """The runner's path: srun says exit status 1 (StepCrashedError); the saved stdout says why."""
    from commstack.errors import CommstackError, StepCrashedError
    from commstack.run.launch import Step
    from commstack.run.lifecycle import failure, validation_first
    from commstack.run.steps import SuiteStep

    exe = str(tmp_path / "osu_reduce_scatter")  # never run: the step's outcome is given below
    s = SuiteStep("osu_reduce_scatter-N1-n3", "osu_reduce_scatter", "osu", Step("rs", [exe, "-i", "20", "-x", "2", "-c"],
                  ntasks=3), tags={"suite": "t"})
    outcomes = {}
    for name in ("7.2/osu_reduce_scatter-c.stdout", "7.2/osu_bw-np3.stdout"):  # a Fail row; no row at all
        (tmp_path / "stdout.txt").write_bytes((OSU / name).read_bytes())
        try:
            with validation_first(s, s.step, tmp_path):
                raise StepCrashedError("rs: exit status 1; last stderr line: 'srun: Terminating StepId=1.1'", "raw")
        except CommstackError as e:
            outcome = failure(e, [])
        outcomes[name] = (outcome.verdict, outcome.error_kind, outcome.reason)
    verdict, kind, reason = outcomes["7.2/osu_reduce_scatter-c.stdout"]
    assert (verdict, kind) == ("fail", "validation-failed") and "the step then exited non-zero" in reason
    assert reason.endswith("exited with status 1 on message size 64.')")
    assert outcomes["7.2/osu_bw-np3.stdout"][:2] == ("fail", "crashed")


# -------------------------------------------------- what a wrong parser would let through (issue 28)


@pytest.mark.parametrize("name,args", [("7.2/osu_bw.stdout", []), ("5.7/osu_latency.stdout", [])])
def test_an_output_cut_inside_its_last_number_is_truncated(name, args):
    """osu_bw's last row is `4194304  6374.92`: cut 1 to 4 characters short (no newline), its number
    reads as one (6374.9, 6374, 637) or as none (6374.), but the row is cut."""
    text = osu_text(name)
    assert expect_kind(text, args) == "ok"
    for k in range(1, 5):
        e = raises(text[:-k], args)
        assert e.kind == "truncated" and e.message.startswith("the output ends "), (k, e)
        assert e.line == text[:-k].splitlines()[-1] and e.lineno == text.count("\n")


def test_a_pingpong_output_cut_inside_its_last_number_is_truncated():
    text = (SEEDS / "olcf-pingpong-cpu.txt").read_text()  # the OLCF program: rows only, no end line
    assert text.endswith("12.666389375\n") and expect_kind(text, []) == "ok"
    for k in range(1, 12):  # 12.66638937 .. 12. .. 1
        assert raises(text[:-k], []).kind == "truncated", k


def test_nccl_rows_that_repeat_or_go_backwards():
    text = seed("cscs-nccl-01.txt")
    row = next(line for line in text.splitlines() if line.split()[:1] == ["1024"])
    after = next(line for line in text.splitlines() if line.split()[:1] == ["2048"])
    for bad in (swap(text, row, row + "\n" + row), swap(swap(text, row, "@"), after, after + "\n" + row).replace(
            "@\n", "")):
        e = raises(bad, [])
        assert (e.kind, e.message, e.line) == ("unknown-format", "message sizes do not increase", row)


def test_nccl_a_second_run_text_after_the_end_and_another_benchmarks_end_line():
    text = seed("cscs-nccl-01.txt")
    assert len(parse_tables(text + text)) == 2  # a job's two runs, one after the other: a step runs one
    e = raises(text + text, [])
    assert (e.kind, e.message, e.line) == ("unknown-format", "2 tables in one output; a step runs one",
                                           "# Collective test starting: all_reduce_perf")
    e = raises(text + "# Avg bus bandwidth    : 19.7866\n", [])
    assert (e.kind, e.message) == ("unknown-format", "output after '# Collective test concluded'")
    e = raises(swap(text, "concluded: all_reduce_perf", "concluded: all_gather_perf"), [])
    assert (e.kind, e.message) == ("unknown-format", "the end line names another benchmark than all_reduce_perf")
    e = raises(text[:-6], [])  # `concluded: all_reduce` without its newline: cut, not complete
    assert e.kind == "unknown-format" and e.line == "# Collective test concluded: all_reduce"


PP = ("# mpi-pingpong v1.0 mode=cpu ranks=2 loops=10 warmup=5 min=8 max=32\n"
      "Transfer size (B):          8, Transfer Time (s):     0.000000524, Bandwidth (GB/s):     0.014231566, "
      "Check: Pass\n"
      "Transfer size (B):         16, Transfer Time (s):     0.000000113, Bandwidth (GB/s):     0.131956265, "
      "Check: Pass\n"
      "Transfer size (B):         32, Transfer Time (s):     0.000000119, Bandwidth (GB/s):     0.250436621, "
      "Check: Pass\n"
      "# mpi-pingpong done: all sizes passed\n")


def test_pingpong_stray_lines_and_check_words():
    assert parse_output("mpi-pingpong", PP, []).sizes == [8, 16, 32]
    e = raises(swap(PP, "Pass\nTransfer size (B):         16", "Pass\nhello\nTransfer size (B):         16"), [])
    assert (e.kind, e.message, e.line, e.lineno) == ("unknown-format", "not an mpi-pingpong line", "hello", 3)
    e = raises(swap(PP, "0.131956265, Check: Pass", "0.131956265, Check: Maybe"), [])
    assert (e.kind, e.message) == ("unknown-format", "check is 'Maybe', not Pass or Fail")
    cut = PP[:PP.index("0.250436621, Check: Pass") + len("0.250436621, Check: Pa")]
    assert raises(cut, []).kind == "truncated"
    e = raises(swap(PP, "Transfer size (B):         32, Transfer Time", "Transfer size (B):         32, Transfer"), [])
    assert (e.kind, e.message) == ("unknown-format", "not a complete mpi-pingpong row")
    e = raises(PP + "# mpi-pingpong done: all sizes passed\n", [])
    assert (e.kind, e.message) == ("unknown-format", "output after the end line")
    e = raises(swap(PP, "Check: Pass\n#", "Check: Pass\n" + PP.splitlines()[0] + "\n#"), [])
    assert (e.kind, e.message) == ("unknown-format", "header after the first row")
    e = raises(swap(PP, "Check: Pass\nTransfer size (B):         16", "Check: Pass\nTransfer size (B):         24"), [])
    assert e.kind == "unknown-format" and e.message.startswith("size 24 after 8: the sweep doubles the size")
    e = raises(swap(PP, ", Check: Pass\nTransfer size (B):         16", "\nTransfer size (B):         16"), [])
    assert (e.kind, e.message) == ("unknown-format", "check column does not match the header")


def test_two_tables_in_one_output_are_not_one_step():
    """A job script that ran osu_bw, then osu_latency: both tables parse; as one step's output, it is refused."""
    text = osu_text("7.2/osu_bw.stdout") + osu_text("7.2/osu_latency.stdout")
    sweeps = parse_tables(text)
    assert [(s.benchmark, len(s.rows)) for s in sweeps] == [("osu_bw", 23), ("osu_latency", 23)]
    e = raises(text, [])
    assert (e.kind, e.message) == ("unknown-format", "2 tables in one output; a step runs one")
    assert e.line.startswith("# OSU MPI Latency Test") and e.lineno == osu_text("7.2/osu_bw.stdout").count("\n") + 1


def linear_nccl(last: int = 134217728, hi: int = 134217728) -> str:
    """cscs-nccl-01 as `-b 32M -e HI -i 32M` prints it: linear steps of 32 MiB (96 MiB from the 64 MiB row)."""
    text = seed("cscs-nccl-01.txt", "minBytes 8 maxBytes 134217728 step: 2(factor)",
                f"minBytes 33554432 maxBytes {hi} step: 33554432(bytes)")
    lines = text.splitlines(keepends=True)
    rows = [i for i, line in enumerate(lines) if line.strip()[:1].isdigit()]
    by_size = {int(lines[i].split()[0]): lines[i] for i in rows}
    r96 = by_size[67108864].replace("    67108864      16777216", "   100663296      25165824")
    keep = [by_size[s] if s != 100663296 else r96 for s in (33554432, 67108864, 100663296, 134217728) if s <= last]
    return "".join(lines[:rows[0]] + keep + lines[rows[-1] + 1:])


def test_the_next_size_rule_with_nccl_linear_steps_and_an_upper_size_between_two_steps():
    s = parse_output(None, linear_nccl(), [])
    assert s.sizes == [33554432, 67108864, 100663296, 134217728] and s.meta["step_kind"] == "bytes"
    e = raises(linear_nccl(last=100663296), [])  # the next step, 128 MiB, is the upper size itself
    assert e.kind == "truncated" and "the next size, 134217728 B, is within the 33554432..134217728 B" in e.message
    assert expect_kind(linear_nccl(last=100663296, hi=134217727), []) == "ok"  # 128 MiB would be past it
    # factor 2 with an upper size that is no power of two: 96 MiB after 64 MiB is past 127 MiB
    text = seed("cscs-nccl-01.txt")
    cut = text[:text.index("\n134217728") + 1] + text[text.index("# Out of bounds"):]
    assert expect_kind(cut, ["-b", "8", "-e", "127M"]) == "ok"
    e = raises(cut, ["-b", "8", "-e", "128M"])
    assert e.kind == "truncated" and "the next size, 134217728 B" in e.message
    pp = PP.replace("max=32", "max=48")  # 64 B would be past 48
    assert expect_kind(pp, []) == "ok" and expect_kind(pp, ["-e", "64"]) == "truncated"


def test_a_sweep_past_the_sizes_asked_for_is_the_output_of_other_arguments():
    """The upper end is held like the lower one: 8..1 MiB printed, 8..512 KiB asked (or a wrong default)."""
    text = osu_text("7.2/osu_bw-m8_1M.stdout")
    e = raises(text, ["-m", "8:524288"])
    assert (e.kind, e.line.split()[0]) == ("unknown-format", "1048576")
    assert e.message == "osu_bw: the sweep goes on to 1048576 B, past the 8..524288 B its arguments ask for: " \
                        "the output of other arguments"
    assert expect_kind(text, ["-m", "8:1048575"]) == "unknown-format"
    assert expect_kind(text, ["-m", "8:2097151"]) == "ok"  # 2 MiB would be past it


# -------------------------------------------- every named error, with the line and its number


def named(text: str, args: tuple[str, ...] = (), ranks: int | None = None) -> tuple:
    e = raises(text, list(args), ranks)
    return e.kind, e.message, e.line, e.lineno


BWC = "7.2/osu_bw-c.stdout"  # title, header, datatype, then 1 B at line 4 .. 4 MiB at line 26
ROW_64K = "65536                 725.93              Pass"  # line 20
NCCL_ROW = ("134217728      33554432     float     sum      -1   1916.4   70.04  122.57      0   1907.8   70.35  "
            "123.11      0")
NCCL_DEVICE = "#  Rank  0 Group  0 Pid 204199 on  nid005471 device  0 [0009:01:00] NVIDIA GH200 120GB"
NCCL_UNITS = ("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  "
              "(GB/s)")


def test_osu_errors_name_their_kind_line_and_number():
    bw = osu_text(BWC)
    title = "# OSU MPI Bandwidth Test v7.2"
    assert named(swap(bw, "Bandwidth Test", "Bandwidth Tset")) == (
        "unknown-format", "no benchmark title: not OSU, nccl-tests, mpi-pingpong, fi_pingpong or ucx_perftest output",
        "# OSU MPI Bandwidth Tset v7.2", 1)
    assert named(swap(bw, "Bandwidth Test", "Foo Test")) == (
        "unknown-format", "unknown OSU benchmark title", "# OSU MPI Foo Test v7.2", 1)
    assert named(bw + "# OSU MPI Foo Test v7.2\n") == (
        "unknown-format", "unknown OSU benchmark title", "# OSU MPI Foo Test v7.2", 27)
    with pytest.raises(UnknownFormatError) as info:
        parse_osu("hello\n" + bw)
    assert (info.value.message, info.value.line, info.value.lineno) == ("text before any OSU title", "hello", 1)
    header = bw.splitlines()[1]
    assert named(swap(bw, "Pass\n2 ", f"Pass\n{header}\n2 ")) == (
        "unknown-format", "second column header in one OSU table", header, 5)
    assert named(swap(bw, header + "\n", "")) == (
        "unknown-format", "data row before the OSU column header", bw.splitlines()[3], 3)
    assert named(swap(bw, header, "# Size      Bandwidth (GB/s)        Validation")) == (
        "unknown-format", "unknown OSU header line or column", "# Size      Bandwidth (GB/s)        Validation", 2)
    assert named(swap(bw, header, "# Bandwidth (MB/s)        Validation")) == (
        "unknown-format", "osu_bw has a size column", "# Bandwidth (MB/s)        Validation", 2)
    barrier = osu_text("5.7/osu_barrier-f.stdout")
    assert named(swap(barrier, "# Avg", "# Size  Avg"), ["-f"])[:2] == ("unknown-format",
                                                                       "osu_barrier has no size column")
    assert named(swap(bw, ROW_64K, ROW_64K.replace("Pass", "Maybe"))) == (
        "unknown-format", "validation is 'Maybe', not Pass or Fail or passed or failed",
        ROW_64K.replace("Pass", "Maybe"), 20)
    assert named(bw[:-3]) == ("truncated", "the output ends mid-row (validation is 'Pa', not Pass or Fail or passed or "
                                           "failed)", "4194304              2319.16              Pa", 26)
    assert named(title + "\n") == ("truncated", "osu_bw: the output ends before the column header", title, 1)
    assert named("\n".join(bw.splitlines()[:3]) + "\n") == (
        "truncated", "osu_bw: the output ends before the first row", title, 1)
    lat = osu_text("5.7/osu_latency.stdout")  # two columns: a row's last field is a number too
    assert named(swap(lat, "\n1                       0.50", "\nx                       0.50")) == (
        "unknown-format", "not a row of the table: it does not start with a number", "x                       0.50", 4)
    assert named(swap(bw, "MPI_CHAR", "MPI_LONG_DOUBLE")) == (
        "unknown-format", "osu_bw: datatype MPI_LONG_DOUBLE of unknown size", title, 1)
    v8 = swap(bw, "v7.2", "v8.0")  # after the last release read (docs/osu-versions.md)
    assert named(v8) == ("unknown-format", "osu_bw v8.0: its default sizes are not known here; give its size "
                                           "arguments (-m LO:HI)", "# OSU MPI Bandwidth Test v8.0", 1)
    assert expect_kind(v8, ["-m", "1:4194304"]) == "ok"


def test_osu_72_all_datatypes_a_table_without_rows_and_warnings_per_table():
    text = osu_text("7.2/osu_allreduce-T_all.stdout")  # MPI_CHAR rows at 5-11, MPI_INT 14-18, MPI_FLOAT 21-25
    lines = text.split("\n")
    no_int_rows = "\n".join(lines[:13] + lines[18:])
    assert named(no_int_rows, ("-m", "1:64", "-f")) == (
        "truncated", "osu_allreduce: a table ends before its first row", lines[19], 15)
    ucx = "[1700000000.123456] [nid001:1234:0]  ucp_context.c:1234 UCX  WARN  transport 'cxi' is not available"
    loader = ("/usr/local/libexec/osu-micro-benchmarks/mpi/./collective/osu_allreduce: /usr/lib/aarch64-linux-gnu/"
              "libnl-3.so.200: no version information available (required by /usr/lib64/libcxi.so.1)")
    warned = "\n".join([ucx] + lines[:11] + [lines[11] + loader] + lines[12:14] + [ucx] + lines[14:])
    tables = parse_tables(warned)
    # a datatype's table starts at its first row
    assert [[n.line for n in t.notes] for t in tables] == [[ucx, loader], [ucx], []]
    # a second job-script table: its title line starts it, a warning glued to that line included
    two = osu_text("7.2/osu_bw.stdout") + loader + osu_text("7.2/osu_latency.stdout")
    assert [[n.line for n in t.notes] for t in parse_tables(two)] == [[], [loader]]


def test_osu_data_check_lines_keep_the_rows_after_them():
    bw = osu_text(BWC)
    error = "DATA VALIDATION ERROR: /osu/osu_bw exited with status 1 on message size 65536."
    s = parse_tables(swap(bw, ROW_64K + "\n", ROW_64K + "\n" + error + "\n"))[0]
    assert len(s.rows) == 23 and [q.text for q in s.error_lines] == [error]
    assert named(swap(bw, ROW_64K + "\n", ROW_64K + "\n" + error + "\n")) == (
        "validation-failed", "osu_bw: the benchmark's data check failed", error, 21)


def test_the_launchers_lines_name_the_line_and_its_number():
    bw = osu_text(BWC)
    exited = "mpirun detected that one or more processes exited with non-zero status, thus causing"
    assert named(bw + "the job to be terminated.\n" + exited + "\n") == (
        "crashed", "the launcher says a rank exited with a non-zero status", exited, 28)
    failed = swap(bw, ROW_64K, ROW_64K.replace("Pass", "Fail"))
    assert named(failed + exited + "\n") == (
        "validation-failed", "the benchmark's data check failed, then: the launcher says a rank exited with a "
                             "non-zero status", ROW_64K.replace("Pass", "Fail"), 20)
    ucx = "[1700000000.123456] [nid001:1234:0]  ucp_context.c:1234 UCX  WARN  transport 'cxi' is not available"
    assert named("\n" + ucx + "\nsrun: warning: can't honor --ntasks-per-node\n") == (
        "empty", "no benchmark output, only 2 warning line(s)", ucx, 2)


def test_sizes_the_arguments_ask_for_at_both_ends():
    bw72 = osu_text("7.2/osu_bw.stdout")  # 1 B .. 4 MiB
    assert expect_kind(bw72, ["-m", "1:6000000"]) == "ok"  # 8 MiB would be past 6 MB
    assert expect_kind(bw72, ["-m", "0:4194304"]) == "ok"  # OSU refuses 0 and starts at its default, 1 B
    lat = osu_text("5.7/osu_latency.stdout")  # from 0 B
    e = raises(lat, ["-m", "1:4194304"])
    assert (e.kind, e.line.split()[0], e.lineno) == ("unknown-format", "0", 3) and "below the 1 B" in e.message
    only_zero = "\n".join(lat.split("\n")[:3]) + "\n"
    assert named(only_zero) == ("truncated", "osu_latency: the sweep stops at 0 B; the next size, 1 B, is within the "
                                             "0..4194304 B asked for", lat.split("\n")[2], 3)
    e = raises(without_first_row(osu_text(BWC)), [])
    assert (e.kind, e.line.split()[0], e.lineno) == ("truncated", "2", 4)
    assert "the sweep starts at 2 B; 1 B comes first" in e.message
    # nccl-tests rounds -b to whole elements: -b 9 runs from 8 B (two floats)
    assert expect_kind(seed("cscs-nccl-01.txt"), ["-b", "9", "-e", "128M", "-f", "2"]) == "ok"


def test_nccl_errors_name_their_kind_line_and_number():
    text = seed("cscs-nccl-01.txt")  # the run starts at line 9, its rows at 25 (8 B) .. 49 (128 MiB)
    assert named(swap(text, "starting: all_reduce_perf", "starting: foo_perf")) == (
        "unknown-format", "unknown nccl-tests benchmark", "# Collective test starting: foo_perf", 9)
    for bad, message in (("# Collective test starting: foo_perf\n", "unknown nccl-tests benchmark"),
                         ("hello\n", "text before the nccl-tests parameter line")):
        with pytest.raises(UnknownFormatError) as info:
            nccl_tests.parse(bad + text)
        assert (info.value.message, info.value.lineno) == (message, 1)
    assert named(swap(text, NCCL_UNITS, NCCL_UNITS + "\n" + NCCL_DEVICE)) == (
        "unknown-format", "device line outside '# Using devices'", NCCL_DEVICE, 25)
    assert named(swap(text, NCCL_UNITS, NCCL_UNITS + "\n# foo bar")) == (
        "unknown-format", "unknown nccl-tests header line", "# foo bar", 25)
    header = text.split("\n")[22]
    assert named(swap(text, header + "\n", ""))[:3] == ("unknown-format", "unknown nccl-tests header line",
                                                        NCCL_UNITS)  # its units line without it
    assert named(text[:text.index(NCCL_UNITS) + len(NCCL_UNITS) + 1]) == (
        "truncated", "the output ends before the first row", NCCL_UNITS, 24)
    assert named(text[:text.index(NCCL_ROW) + len(NCCL_ROW)]) == (
        "truncated", "the output ends inside its last row (no newline after it)", NCCL_ROW, 49)
    assert named(swap(text, "1916.4", "1e+999")) == (
        "bad-number", "non-finite value '1e+999'", NCCL_ROW.replace("1916.4", "1e+999"), 49)
    two = swap(swap(text, "17.93    0.00    0.00      0", "17.93    0.00    0.00      1"),
               "17.65    0.00    0.00      0", "17.65    0.00    0.00      2")
    kind, message, line, lineno = named(two)
    assert (kind, message, line.split()[:1], lineno) == ("validation-failed", "all_reduce_perf: the benchmark's data "
                                                                              "check failed", ["8"], 25)
    [s] = nccl_tests.parse(text)
    assert (s.title, s.meta["nThread"], s.meta["step"], s.meta["step_kind"]) == (
        "Collective test starting: all_reduce_perf", 1, 2, "factor")


def test_pingpong_header_device_and_summary():
    olcf = (SEEDS / "olcf-pingpong-cpu.txt").read_text()  # rows only
    header = PP.splitlines()[0]
    first = olcf.splitlines()[0]
    e = raises(swap(olcf, first + "\n", first + "\n" + header + "\n"), [])
    assert (e.kind, e.message, e.line, e.lineno) == ("unknown-format", "header after the first row", header, 2)
    assert raises(header + "\n" + PP, []).message == "header after the first row"
    s = parse_output("mpi-pingpong", PP, [])
    assert (s.device, s.meta["summary"], s.meta["mode"], s.version) == (None, "all sizes passed", "cpu", "1.0")
    assert parse_output("mpi-pingpong", PP.replace("mode=cpu", "mode=cuda-aware"), []).device == "CUDA"


def test_the_wrong_benchmarks_title_and_a_missing_row_are_quoted():
    e = raises_for("osu_bw", "\n" + osu_text("7.2/osu_latency.stdout"))
    assert (e.message, e.line, e.lineno) == ("expected osu_bw output, the title is another benchmark's",
                                             "# OSU MPI Latency Test v7.2", 2)
    s = parse_output(None, osu_text("7.2/osu_bw.stdout"), [])
    with pytest.raises(KeyError, match="osu_bw: no row for size 3"):
        s.row(3)
    assert (s.title, s.row(8)["size"]) == ("OSU MPI Bandwidth Test v7.2", 8)


def raises_for(benchmark: str, text: str) -> ParseError:
    with pytest.raises(ParseError) as info:
        parse_output(benchmark, text, [])
    return info.value


def test_commstack_parse_prints_rows_one_table_or_several_and_names_an_unreadable_file(capsys, tmp_path):
    rc, out, _ = commstack_parse(capsys, OSU / "7.2/osu_bw.stdout")
    assert (rc, out) == (0, "lines 1-26: osu_bw (OSU MPI Bandwidth Test v7.2): 23 rows, 1..4194304 B, complete, "
                            "validated: no\n")
    warned = tmp_path / "warned"
    warned.write_text("srun: warning: can't honor --ntasks-per-node\n" + osu_text("7.2/osu_bw.stdout"))
    assert commstack_parse(capsys, warned)[1].splitlines()[1:] == [
        "  note line 1: slurm (srun, salloc or sbatch message): srun: warning: can't honor --ntasks-per-node"]
    rc, out, _ = commstack_parse(capsys, OSU / "7.2/osu_bw-c.stdout", "-c", "--json")
    [doc] = json.loads(out)
    assert rc == 0 and out.startswith('[\n {\n  "benchmark": "osu_bw",\n  "tool"') and doc["validated"] == "yes"
    two = tmp_path / "two"
    two.write_text(osu_text("7.2/osu_bw.stdout") + osu_text("7.2/osu_latency.stdout"))
    rc, out, _ = commstack_parse(capsys, two, "", "--json")
    assert rc == 0 and [(t["benchmark"], t["lines"]) for t in json.loads(out)] == [("osu_bw", [1, 26]),
                                                                                    ("osu_latency", [27, 52])]
    rc, out, err = commstack_parse(capsys, two)
    assert out.splitlines()[1] == ("lines 27-52: osu_latency (OSU MPI Latency Test v7.2): 23 rows, 1..4194304 B, "
                                   "complete, validated: no")
    rc, _, err = commstack_parse(capsys, tmp_path / "missing")
    assert rc == 2 and "cannot read" in err and "No such file or directory" in err


def test_what_a_cut_last_line_changes_and_what_it_does_not():
    """Only a row can be cut inside: a whole end line without its newline is complete, and a garbled number
    in a last row that has its newline is garbled, not cut."""
    assert parse_output("mpi-pingpong", PP[:-1], []).sizes == [8, 16, 32]
    bw = osu_text(BWC)
    e = raises(swap(bw, "2319.16", "23x9.16"), [])
    assert (e.kind, e.lineno) == ("bad-number", 26)
    no_rows = PP.splitlines()[0] + "\n# mpi-pingpong done: all sizes passed\n"
    assert named(no_rows) == ("truncated", "the output ends before the first row",
                              "# mpi-pingpong done: all sizes passed", 2)
    lat = osu_text("5.7/osu_latency.stdout")
    assert named(swap(lat, "\n1                       0.50", "\nx1                      0.50")) == (
        "unknown-format", "not a row of the table: it does not start with a number", "x1                      0.50", 4)
    # OSU refuses -m 0:... and keeps its default start: 5.x osu_bw (no datatype line) from 1 B
    assert expect_kind(osu_text("5.7/osu_bw.stdout"), ["-m", "0:4194304"]) == "ok"


def test_prrte_s_nul_after_the_last_row_leaves_it_whole_and_a_failed_help_line_is_no_check(capsys, tmp_path):
    """prterun ends this real output with the NUL byte of its last help message, no newline after it: the last
    row had its newline, so it is whole. `2 more processes have sent help message ... failed` is Open MPI's
    line, not a failed data check, also when the output is cut inside a row."""
    real = TOP / "tests" / "data" / "corpus" / "osu7" / "osu_latency-7.5.1-h200-cuda-dd-cut.out"
    data = real.read_bytes()
    assert data.endswith(b"157.14\n\x00") and b"\n2 more processes have sent help message" in data
    rc, out, _ = commstack_parse(capsys, real, "-d cuda D D -m 1:1024", "--strict")
    assert rc == 0 and "11 rows, 1..1024 B, complete, validated: no; 11 note(s)" in out
    cut = tmp_path / "cut.out"
    cut.write_bytes(data[:-len(b"7.14\n\x00")])
    rc, out, err = commstack_parse(capsys, cut, "-d cuda D D -m 1:1024", "--strict")
    assert rc == exits.TRUNCATED and "truncated, validated: no" in out and "the output ends inside its last row" in err


def test_another_benchmarks_cut_output_is_unknown_format_for_a_step():
    """The step path: a step of osu_bw given osu_latency's output cut mid-sweep is the wrong output (its title
    says so), not a truncated osu_bw."""
    text = osu_text("7.2/osu_latency.stdout")
    cut = text[:text.index("\n1024 ") + 1]
    e = raises_for("osu_bw", cut)
    assert (e.kind, e.message, e.line) == ("unknown-format", "expected osu_bw output, the title is another "
                                           "benchmark's", "# OSU MPI Latency Test v7.2")
    assert raises_for("osu_latency", cut).kind == "truncated"


def test_untitled_text_is_one_table_over_all_its_lines(tmp_path, capsys):
    """`commstack parse` of text no tool titles: one table, lines 1 to the last, refused naming its first line but
    quoting none (issue 48: it may be any file, a secret given by mistake); --strict, a step's rule, quotes it."""
    path = tmp_path / "out.txt"
    path.write_text("Start of job 17\nhostname: node1\nEnd of job 17\n")
    assert main(["parse", str(path), "--json"]) == EXIT["unknown-format"]
    [t] = json.loads(capsys.readouterr()[0])
    assert (t["lines"], t["verdict"], t["error"]["lineno"], t["error"]["line"], t["notes"]) == \
        ([1, 3], "unknown-format", 1, None, [])
    assert main(["parse", str(path), "--json", "--strict"]) == EXIT["unknown-format"]
    [t] = json.loads(capsys.readouterr()[0])
    assert (t["error"]["lineno"], t["error"]["line"]) == (1, "Start of job 17")
