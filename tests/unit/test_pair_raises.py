"""Every refusal of the pair tools' parsers (fi_pingpong, ucx_perftest) through `commstack parse` (issue 37): a
recorded real output changed the one way each raise is for, its named error (kind, message, quoted line),
never a traceback and never a pass; and what they read from a whole output (each figure of a row, the notes
among it) where the reading could go wrong unseen."""

import json

import pytest

from commstack.cli import main as cli
from commstack.errors import UnknownFormatError
from commstack.paths import TOP
from commstack.results.parse import parse_output

FI = TOP / "tests" / "data" / "fi_pingpong" / "1.17"
UCX = TOP / "tests" / "data" / "ucx_perftest" / "1.13"
CORPUS = TOP / "tests" / "data" / "corpus" / "ucx_perftest"  # reproductions of other versions' outputs
PAIR_FI = "# commstack pair client: fi_pingpong -p tcp -e rdm -P 59087 10.77.0.11\n"
PAIR_UCX = "# commstack pair client: ucx_perftest 10.77.0.11 -p 55345 -t tag_bw -s 1048576 -n 200\n"
LOADED = "pair-loaded-tag_lat-8.client.stdout"  # its Final row's interval average is inf


def parse(tmp_path, capsys, text: str, args: str = "") -> dict:
    """The one table `commstack parse FILE --json` reads from `text`."""
    path = tmp_path / "out.txt"
    path.write_text(text)
    rc = cli.main(["parse", str(path), f"--args={args}", "--json"])
    out, err = capsys.readouterr()
    [table] = json.loads(out)
    assert "Traceback" not in err and (rc == 0) == (table["verdict"] == "complete"), err
    return table


def fi(name="tcp-rdm.client.stdout") -> str:
    return (FI / name).read_text()


def ucx(name="pair-slurm-netns-tag_bw.client.stdout") -> str:
    return (UCX / name).read_text()


def changed(size: str, field: int, value: str) -> str:
    """fi_pingpong's recorded output with one field of the row of `size` changed (the fields space-joined)."""
    lines = fi().splitlines(keepends=True)
    i = next(i for i, line in enumerate(lines) if line.split()[:1] == [size])
    fields = lines[i].split()
    fields[field] = value
    return "".join(lines[:i] + [" ".join(fields) + "\n"] + lines[i + 1:])


FI_CASES = {
    "a size field no size": (lambda: changed("64", 0, "6x4"), "bad-number", "'6x4' is not a size or count"),
    "a total no size": (lambda: changed("64", 3, "1.2q"), "bad-number", "'1.2q' is not a size or count"),
    "a time no time": (lambda: changed("64", 4, "0.12"), "bad-number", "not a number as fi_pingpong prints it"),
    "an ack no ack": (lambda: changed("64", 2, "*10"), "bad-number", "'*10' is not an ack count"),
    "lost acks": (lambda: changed("64", 2, "+2"), "validation-failed", "data check failed"),
    "sizes that shrink": (lambda: changed("256", 0, "16"), "unknown-format", "fi_pingpong's sizes grow"),
    "a size not asked for": (lambda: changed("256", 0, "512"), "unknown-format", "size 512 where 256 comes next"),
    "fewer iterations": (lambda: changed("256", 1, "9"), "unknown-format", "9 iterations, 10 asked for"),
    "-S 1k": (lambda: PAIR_FI.replace("-P", "-S 1k -P") + fi().splitlines(keepends=True)[0] +
              fi().splitlines(keepends=True)[3], "unknown-format", "-S 1k: not a plain number"),
    "-I 1e3": (lambda: PAIR_FI.replace("-P", "-I1e3 -P") + fi(), "unknown-format", "-I 1e3: not a plain number"),
    "two pair-launcher lines": (lambda: PAIR_FI + PAIR_FI + fi(), "unknown-format",
                                "the pair launcher's line after the table started"),
    "a pair-launcher line after the header": (lambda: fi().replace("64 ", PAIR_FI + "64 ", 1), "unknown-format",
                                          "the pair launcher's line after the table started"),
    "a header twice": (lambda: fi().splitlines(keepends=True)[0] + fi(), "unknown-format",
                       "a second header: two outputs in one"),
    "rows with no header": (lambda: PAIR_FI + "".join(fi().splitlines(keepends=True)[1:]), "unknown-format",
                            "its header, `bytes #sent #ack ...`, comes first"),
    "a header and no row": (lambda: PAIR_FI + fi().splitlines(keepends=True)[0], "truncated",
                            "the output ends before the first row"),
    "a row of seven fields": (lambda: fi().replace("6.80       0.15", "6.80"), "unknown-format",
                              "an fi_pingpong row has 8 fields, this one 7"),
    "cut mid-row": (lambda: fi()[:fi().index("1m ") + 20], "truncated", "the output ends mid-row"),
    "the last row with no newline": (lambda: fi()[:-1], "truncated", "the output ends inside its last row"),
    "a size twice": (lambda: changed("256", 0, "64"), "unknown-format", "size 64 after 64: fi_pingpong's sizes grow"),
    "a size below the one before": (lambda: changed("1k", 0, "128"), "unknown-format", "size 128 after 256"),
    "two rows of lost acks": (lambda: changed("256", 2, "-1").replace("=10", "+3", 1), "validation-failed",
                              "data check failed"),
    "a provider error": (lambda: fi("bad-provider.server.stderr"), "crashed", "no provider for the asked provider"),
    "the other side failed": (lambda: fi("bad-provider.client.stderr"), "crashed", "the other side closed the control"),
}


#: the line an error quotes where another would be wrong: the launcher's (its arguments), the header (no row
#: after it), the first of two bad rows
FI_LINENO = {"-S 1k": 1, "a header and no row": 2, "two rows of lost acks": 2, "the last row with no newline": 7}


@pytest.mark.parametrize("case", FI_CASES)
def test_fi_pingpong_refuses(tmp_path, capsys, case):
    make, kind, message = FI_CASES[case]
    t = parse(tmp_path, capsys, make())
    assert (t["verdict"], t["benchmark"]) == (kind, "fi_pingpong"), t["error"]
    assert message in t["error"]["message"] and t["error"]["line"] is not None, t["error"]
    assert t["error"]["lineno"] == FI_LINENO.get(case, t["error"]["lineno"]), t["error"]


def test_fi_pingpong_refuses_more_sizes_than_asked(tmp_path, capsys):
    t = parse(tmp_path, capsys, fi(), "-S 64")
    assert t["verdict"] == "unknown-format" and t["error"]["lineno"] == 3, t["error"]
    assert "size 256 where no size comes after the last asked for" in t["error"]["message"]


@pytest.mark.parametrize("args, iterations, printed", [
    ("-p tcp -S", 10, "10"),  # a -S with no value (getopt refuses it): fi_pingpong's defaults
    ("-I5", 5, "5"),  # getopt's attached value
    ("-I 1500", 1500, "1k"),  # cnt_str keeps no decimal: 1k stands for the 1500 asked for
])
def test_fi_pingpong_reads_its_iterations(tmp_path, capsys, args, iterations, printed):
    text = fi().replace("10      =10 ", f"{printed:<7} ={printed:<3}")
    t = parse(tmp_path, capsys, text, args)
    assert t["verdict"] == "complete" and [r["iterations"] for r in t["rows"]] == [iterations] * 6, t["error"]


def test_fi_pingpong_row_as_printed(tmp_path, capsys):
    """Each field of a row: size and total in bytes, the ack as printed, time without its `s`."""
    t = parse(tmp_path, capsys, fi())
    assert t["rows"][0] == {"size": 64, "iterations": 10, "acked": "=10", "total_B": 1228, "elapsed_s": 0.12,
                            "bandwidth_MBps": 0.01, "latency_us": 6017.1, "rate_Mxfers": 0.0}


def test_fi_pingpong_debug_lines_are_notes(tmp_path, capsys):
    """fi_pingpong -v prints PP_DEBUG lines among its rows: kept as notes, in their place among the others."""
    debug = "[debug] util/pingpong.c:1234 : posting recv"
    lines = fi().splitlines(keepends=True)
    text = "srun: job 7 queued and waiting for resources\n" + lines[0] + debug + "\n" + "".join(lines[1:])
    t = parse(tmp_path, capsys, text)
    assert t["verdict"] == "complete" and len(t["rows"]) == 6
    assert [(n["lineno"], n["source"], n["line"]) for n in t["notes"]] == \
        [(1, "slurm", "srun: job 7 queued and waiting for resources"), (3, "fi_pingpong", debug)]


def test_a_datagram_sweep_ending_at_the_last_size_asked_for(tmp_path, capsys):
    """A verbs datagram run of one size (-S 64): its one row is the whole sweep."""
    t = parse(tmp_path, capsys, "".join(fi().splitlines(keepends=True)[:2]), "-p verbs -S 64")
    assert t["verdict"] == "complete" and [r["size"] for r in t["rows"]] == [64] and "max_size" not in t["meta"]


def header_end(text: str) -> int:
    """The offset just after ucx_perftest's five header lines (the launcher's line first)."""
    lines = text.splitlines(keepends=True)
    return sum(len(line) for line in lines[:6])


PROGRESS = "[thread 0]               100      1.249  2119.606  2119.606      471.79     471.79         472         472\n"
SERVER = UCX / "pair-slurm-netns-tag_bw.server.stdout"  # its box: tag match bandwidth, 1048576 B
UCX_CASES = {
    "a Final row with no newline": (lambda: ucx()[:-1], "truncated",
                                    "the output ends inside its last row (no newline after it)"),
    "a Final row cut short": (lambda: ucx()[:ucx().index("471.79")], "truncated",
                              "the output ends mid-row (no newline after it)"),
    "a progress row of 9 numbers": (lambda: ucx()[:header_end(ucx())] + PROGRESS.replace("\n", " 7\n") +
                                    ucx()[header_end(ucx()):], "unknown-format", "has 8 numbers, this one 9"),
    "a progress row of 7 numbers": (lambda: ucx()[:header_end(ucx())] + PROGRESS.replace("  472\n", "\n") +
                                    ucx()[header_end(ucx()):], "unknown-format", "has 8 numbers, this one 7"),
    "a number no number": (lambda: ucx().replace("471.79     471.79", "471.79     471.7x"), "unknown-format",
                           "not a complete ucx_perftest row"),
    # a word of 8 fields is no row with text glued to it (tools.lines.cut_row: 8 fields are not more than 8)
    "a word for a number": (lambda: ucx().replace("472         472\n", "472         abc\n"), "unknown-format",
                            "not a complete ucx_perftest row"),
    "a row after the Final row": (lambda: ucx() + PROGRESS, "unknown-format", "output after the Final row"),
    "no Final row": (lambda: ucx()[:header_end(ucx())] + PROGRESS, "truncated", "ends before its Final row"),
    "cut in the header": (lambda: "".join(ucx().splitlines(keepends=True)[:4]), "truncated",
                          "before ucx_perftest's table header"),
    "cut after four header lines": (lambda: "".join(ucx().splitlines(keepends=True)[:5]), "truncated",
                                    "before ucx_perftest's table header"),
    "text glued to the Final row": (lambda: ucx().replace("  472\n", "  472 hello\n"), "unknown-format",
                                    "text glued to the end of a row: 'hello'"),
    "text glued to a progress row": (lambda: ucx()[:header_end(ucx())] + PROGRESS.replace("\n", " hi\n") +
                                     ucx()[header_end(ucx()):], "unknown-format", "text glued to the end of a row: 'hi'"),
    "text glued to an unmarked row": (lambda: ucx()[:header_end(ucx())] + PROGRESS.replace("[thread 0]", "")
                                      .replace("\n", " hi\n") + ucx()[header_end(ucx()):], "unknown-format",
                                      "text glued to the end of a row: 'hi'"),
    "a foreign line": (lambda: ucx().replace("Final:", "hello\nFinal:"), "unknown-format", "not a ucx_perftest line"),
    "-s abc": (lambda: ucx().replace("-s 1048576", "-s abc"), "unknown-format", "-s abc: not a list of sizes"),
    "-t am_lat": (lambda: ucx().replace("-t tag_bw", "-t am_lat"), "unknown-format",
                  "-t am_lat: not one commstack runs"),
    "tag_lat with an overhead table": (lambda: ucx().replace("-t tag_bw", "-t tag_lat"), "unknown-format",
                                       "tag_lat prints latency (usec), this table overhead"),
    "a second launcher line": (lambda: ucx().replace("Final:", PAIR_UCX + "Final:"), "unknown-format",
                               "the pair launcher's line after the table started"),
    "two launcher lines before the table": (lambda: PAIR_UCX + ucx(), "unknown-format",
                                            "the pair launcher's line after the table started"),
    "a UCX error": (lambda: ucx().replace("Final:", "[1700000000.123456] [node1:123  :0]   ucp_worker.c:1 UCX  ERROR "
                                          "no usable transports/devices\nFinal:"), "crashed", "found none of the transports"),
    "a fatal error": (lambda: ucx().replace("Final:", "[node1:1234 :0:1234] ucp_worker.c:123 Fatal: lost\nFinal:"),
                      "crashed", "UCX stopped on a fatal error"),
    # UCX's backtrace banner looks like a job script's `=== x ===`: a crash line all the same
    "a backtrace": (lambda: ucx().replace("Final:", "==== backtrace (tid:   1234) ====\nFinal:"), "crashed",
                    "a rank died"),
    "its usage": (lambda: PAIR_UCX + "  Usage: ucx_perftest [ server-hostname ] [ options ]\n", "crashed",
                  "printed its usage"),
    "an overall figure inf": (lambda: ucx(LOADED).replace("4001.959", "inf"), "bad-number", "not a number: 'inf'"),
    "iterations nan": (lambda: ucx(LOADED).replace("Final:                  1000", "Final:                   nan"),
                       "bad-number", "not a number: 'nan'"),
    "a server of another size": (lambda: SERVER.read_text().replace("1048576", "4096") + ucx(), "unknown-format",
                                 "the server ran 4096 B, the client"),
    "a server of another test": (lambda: SERVER.read_text() + ucx().replace("-t tag_bw", "-t tag_lat"),
                                 "unknown-format",
                                 "the server ran 'tag match bandwidth', the client asked for -t tag_lat"),
    # perftest.c's tag_sync_bw: a test commstack does not run, named by the server's box
    "a server of a test not run": (lambda: SERVER.read_text().replace("tag match", "tag sync match") +
                                   ucx().replace("-t tag_bw", "-t tag_sync_bw"), "unknown-format",
                                   "ucx_perftest test 'tag sync match bandwidth': not one commstack runs (tag_lat, "
                                   "tag_bw)"),
    "a server's message size no number": (lambda: SERVER.read_text().replace("1048576", "1m     ") + ucx(),
                                          "bad-number", "message size '1m'"),
    # a box that names the test: neither it nor the launcher's line (none) names the size
    "a server box with no message size": (lambda: "".join(line for line in SERVER.read_text().splitlines(True)
                                                          if "Message size" not in line) + ucx()[len(PAIR_UCX):],
                                          "unknown-format", "run it through commstack's pair launcher, or give the "
                                          "server's output too"),
    # the server's first line before the launcher's is the title: it names no test, the parser reads -t
    "-t am_lat after the server's first line": (lambda: "Waiting for connection...\n" +
                                                ucx().replace("-t tag_bw", "-t am_lat"), "unknown-format",
                                                "-t am_lat: not one commstack runs"),
    "a header of two layouts": (lambda: ucx().replace("50.0%ile", " typical"), "unknown-format",
                                "not a ucx_perftest line"),
}
#: the line an error quotes where another would be wrong: the last one read (a cut output), the launcher's (the
#: arguments; the server's box before it), else the first
UCX_LINENO = {"cut in the header": 4, "cut after four header lines": 5, "no Final row": 7, "a header of two layouts": 5,
              "a server of another size": 11, "a server of another test": 11, "a server of a test not run": 11,
              "a server's message size no number": 11, "-t am_lat after the server's first line": 2,
              "a server box with no message size": 1}


@pytest.mark.parametrize("case", UCX_CASES)
def test_ucx_perftest_refuses(tmp_path, capsys, case):
    make, kind, message = UCX_CASES[case]
    text = make()
    t = parse(tmp_path, capsys, text)
    assert t["verdict"] == kind, t["error"]
    assert message in t["error"]["message"], t["error"]
    assert t["error"]["lineno"] == UCX_LINENO.get(case, t["error"]["lineno"]), t["error"]
    assert t["error"]["line"] == text.splitlines()[t["error"]["lineno"] - 1].rstrip(), t["error"]  # as printed


def test_ucx_perftest_interval_with_no_iteration_has_no_average(tmp_path, capsys):
    """A loaded machine's Final row right after the last progress row: its report interval ran no iteration,
    and UCX prints the interval's average latency as inf (0/0) and its bandwidth and message rate as 0: none
    of the three is a figure. The run is whole; its overall figures stand."""
    [row] = parse(tmp_path, capsys, ucx(LOADED))["rows"]
    assert (row["latency_avg_us"], row["bandwidth_avg_MiBps"], row["message_rate_avg"]) == (None, None, None)
    assert (row["latency_us"], row["latency_pct_us"], row["message_rate"]) == (4001.959, 4013.479, 250)


def test_ucx_perftest_row_as_printed(tmp_path, capsys):
    """Each figure of the Final row, the message size from the server's box; bandwidth_MBps is the overall
    MiB/s in MB/s (x 1.048576: UCX divides by 1024 * 1024), as OSU's and fi_pingpong's."""
    server = (UCX / "tag_bw-1m.server.stdout").read_text()
    [row] = parse(tmp_path, capsys, server + ucx("tag_bw-1m.client.stdout"))["rows"]
    assert row == {"size": 1048576, "iterations": 20000, "latency_pct_us": 50.737, "latency_avg_us": 54.718,
                   "latency_us": 167.82, "bandwidth_avg_MiBps": 18275.66, "bandwidth_MiBps": 5958.77,
                   "message_rate_avg": 18276, "message_rate": 5959, "bandwidth_MBps": 6248.22321152}


@pytest.mark.parametrize("name, layout, stage", [("1.8-server-client-tag_lat", "1.8", None),
                                                 ("1.10-server-client-tag_bw-openmp", "1.9", "Stage"),
                                                 ("1.11-server-client-tag_lat-no-openmp", "1.9", "Stage")])
def test_ucx_perftest_typical_latency_is_the_median(tmp_path, capsys, name, layout, stage):
    """1.8-1.11 print a `typical` latency, not 1.12's `50.0%ile`: the median of the last interval, the 50th
    percentile. No real output of those versions is recorded: these are the corpus' reproductions from their
    perftest.c."""
    t = parse(tmp_path, capsys, (CORPUS / f"ucx_perftest-{name}.out").read_text())
    assert t["verdict"] == "complete", t["error"]
    assert (t["meta"]["layout"], t["meta"]["stage"], t["meta"]["percentile"]) == (layout, stage, 50.0)


def test_ucx_perftest_reads_attached_option_values(tmp_path, capsys):
    """getopt's -ttag_bw -s1048576 are -t tag_bw -s 1048576; a list of sizes (-s 524288,524288) is its sum."""
    for args, size in (("-ttag_bw -s1048576", 1048576), ("-t tag_bw -s 524288,524288", 1048576),
                       ("-ttag_bw -s9", 9)):
        t = parse(tmp_path, capsys, ucx().replace("-t tag_bw -s 1048576", args))
        assert (t["verdict"], t["benchmark"], [r["size"] for r in t["rows"]]) == \
            ("complete", "ucx_perftest-tag_bw", [size]), args


def test_fi_pingpong_rows_take_the_sizes_asked_for_in_bytes(tmp_path, capsys):
    """fi_pingpong prints `1k` for 1024 (and for 1025): each row's size is the one asked for, the default sweep's
    without -S; a verbs datagram endpoint (largest message 1024 B) ends it at 1k, complete."""
    table = parse(tmp_path, capsys, fi())
    assert [r["size"] for r in table["rows"]] == [64, 256, 1024, 4096, 65536, 1048576]
    # a total as printed: 1.2k is 1228 B (1280 sent: size_str keeps one decimal), 5k 5120 B
    assert [r["total_B"] for r in table["rows"][:2]] == [1228, 5120]
    table = parse(tmp_path, capsys, "".join(fi().splitlines(keepends=True)[:4]), "-p verbs -e dgram")
    assert [r["size"] for r in table["rows"]] == [64, 256, 1024] and table["verdict"] == "complete"
    assert table["meta"]["max_size"] == "the datagram endpoint's largest message"


@pytest.mark.parametrize("provider, last", [("verbs", "256"), ("verbs", "512"), ("verbs", "1k"), ("verbs", "2k"),
                                            ("verbs", "4k"), ("udp", "1k")])
def test_a_datagram_sweep_of_all_sizes_ends_at_the_providers_largest_message(tmp_path, capsys, provider, last):
    """`-S all` over a datagram endpoint stops at the endpoint's largest message: verbs' is the port's MTU (256
    to 4096 B), udp's 1472 B. fi_pingpong's real -S all output, cut after that size's row, is complete; cut one
    size later, it is truncated."""
    lines = fi("tcp-rdm-all.client.stdout").splitlines(keepends=True)
    end = next(i for i, line in enumerate(lines) if line.split()[0] == last) + 1
    table = parse(tmp_path, capsys, "".join(lines[:end]), f"-p {provider} -e dgram -S all -I 20")
    assert table["verdict"] == "complete" and table["meta"]["max_size"] == "the datagram endpoint's largest message"
    table = parse(tmp_path, capsys, "".join(lines[:end + 1]), f"-p {provider} -e dgram -S all -I 20")
    assert table["verdict"] == "truncated" and table["error"]["line"] == lines[end].rstrip("\n")


@pytest.mark.parametrize("printed, total", [("1.5g", 3 << 29), ("2m", 2 << 20), ("7k", 7 << 10), ("999", 999)])
def test_fi_pingpong_totals_in_each_unit(tmp_path, capsys, printed, total):
    table = parse(tmp_path, capsys, changed("64", 3, printed))
    assert table["verdict"] == "complete" and table["rows"][0]["total_B"] == total


@pytest.mark.parametrize("printed, count", [("1k", 1000), ("2m", 2_000_000), ("1b", 10 ** 9)])
def test_fi_pingpong_iteration_counts_in_each_unit(tmp_path, capsys, printed, count):
    """util/pingpong.c's cnt_str: powers of 1000; every row sent and acked that many."""
    text = fi().replace("10      =10 ", f"{printed:<7} ={printed:<3}")
    table = parse(tmp_path, capsys, text, f"-I {count}")
    assert table["verdict"] == "complete" and {r["iterations"] for r in table["rows"]} == {count}


def test_ucx_perftest_warnings_are_notes(tmp_path, capsys):
    """UCX's WARN and DIAG log lines (a transport asked for and missing, ...) are kept as notes in their place."""
    warn = ("[1795498764.926467] [vm:7095 :0]     ucp_context.c:1014 UCX  WARN  transport 'nosuch' is not "
            "available, please use one or more of: cma, mm, posix, self, shm, sm, sysv, tcp")
    text = ucx().replace("Final:", warn + "\nFinal:")
    t = parse(tmp_path, capsys, "srun: job 7 queued and waiting for resources\n" + text)
    assert t["verdict"] == "complete"
    assert [(n["lineno"], n["source"], n["line"]) for n in t["notes"]] == \
        [(1, "slurm", "srun: job 7 queued and waiting for resources"),
         (text.splitlines().index(warn) + 2, "ucx", warn)]


def test_ucx_perftest_without_s_runs_8_bytes(tmp_path, capsys):
    """perftest.c's msg_size_list is {8} where -s is not given: a run without it is an 8-byte run."""
    t = parse(tmp_path, capsys, ucx("pair-loaded-tag_lat-8.client.stdout").replace(" -s 8 ", " "))
    assert (t["verdict"], t["benchmark"], [r["size"] for r in t["rows"]]) == \
        ("complete", "ucx_perftest-tag_lat", [8])


def test_ucx_perftest_s_with_no_value_is_its_default(tmp_path, capsys):
    """A trailing -s (getopt refuses it) asks for nothing: perftest.c's 8 bytes."""
    text = ucx("pair-loaded-tag_lat-8.client.stdout").replace("-s 8 -n 1000", "-n 1000 -s")
    t = parse(tmp_path, capsys, text)
    assert (t["verdict"], [r["size"] for r in t["rows"]]) == ("complete", [8]), t["error"]


def test_ucx_perftest_transcript_keeps_the_servers_lines(tmp_path, capsys):
    server = (UCX / "tag_bw-1m.server.stdout").read_text()
    t = parse(tmp_path, capsys, server + ucx("tag_bw-1m.client.stdout"))
    assert t["verdict"] == "complete" and t["meta"]["message_size"] == "1048576"
    assert t["meta"]["server"] == ["Waiting for connection...", "Accepted connection from 127.0.0.1:58684"]


def test_ucx_perftest_of_another_test_than_the_steps_quotes_the_launchers_line():
    with pytest.raises(UnknownFormatError) as e:
        parse_output("ucx_perftest-tag_lat", ucx(), [])
    assert e.value.message == "expected ucx_perftest-tag_lat output, the title is another benchmark's"
    assert (e.value.lineno, e.value.line) == (1, PAIR_UCX.rstrip("\n"))


def test_ucx_perftest_transcript_of_another_test_than_the_steps_quotes_its_first_line():
    """A transcript names its test in the server's box, not in its first line: the step's check after the
    parse quotes the table's first line, the server's."""
    server = (UCX / "tag_bw-1m.server.stdout").read_text()
    with pytest.raises(UnknownFormatError) as e:
        parse_output("ucx_perftest-tag_lat", server + ucx("tag_bw-1m.client.stdout"), [])
    assert e.value.message == "expected ucx_perftest-tag_lat output, the title is another benchmark's"
    assert (e.value.lineno, e.value.line) == (1, "Waiting for connection...")


def test_ucx_perftest_transcript_with_a_bad_s_quotes_the_launchers_line(tmp_path, capsys):
    """The server's output first, then the client's: `-s abc` is refused quoting the client's launcher line."""
    server = (UCX / "tag_bw-1m.server.stdout").read_text()
    t = parse(tmp_path, capsys, server + ucx().replace("-s 1048576", "-s abc"))
    assert (t["verdict"], t["error"]["message"]) == ("unknown-format", "-s abc: not a list of sizes in bytes")
    assert (t["error"]["lineno"], t["error"]["line"]) == \
        (len(server.splitlines()) + 1, PAIR_UCX.replace("-s 1048576", "-s abc").rstrip("\n"))
