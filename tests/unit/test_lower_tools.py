"""fi_pingpong, ucx_perftest, fi_info and ucx_info -d readers over the recorded real outputs
(tests/data/fi_pingpong, tests/data/ucx_perftest, tests/data/facts, each with its index.yaml)."""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path

import pytest
import yaml

from commstack.errors import ParseError
from commstack.results.parse import parse_output
from commstack.run.facts import PROBE, nics, parse_probe, transports
from commstack.tools import fi_pingpong, ucx_perftest

DATA = Path(__file__).resolve().parents[1] / "data"
FI = yaml.safe_load((DATA / "fi_pingpong" / "index.yaml").read_text())
UCX = yaml.safe_load((DATA / "ucx_perftest" / "index.yaml").read_text())
FACTS = yaml.safe_load((DATA / "facts" / "index.yaml").read_text())
fi_output = partial(parse_output, "fi_pingpong")  # parsed and checked as the runner does


def kind(call) -> str:
    try:
        call()
    except ParseError as e:
        assert e.line is None or e.line, e  # a named error quotes the line it is about where it has one
        return e.kind
    return "ok"


def fi_text(name: str, stream: str) -> str:
    path = DATA / "fi_pingpong" / "1.17" / f"{name}.{stream}"
    return path.read_text() if path.exists() else ""


def client_args(command: str, tool: str) -> list[str]:
    words = command.split()
    return words[words.index(tool) + 1:]


@pytest.mark.parametrize("name", [n for n, c in FI["cases"].items() if "expect" in c])
def test_fi_pingpong_recorded(name):
    case = FI["cases"][name]
    args = client_args(case["client"], "fi_pingpong")
    stdout = fi_text(name, "client.stdout")
    assert kind(lambda: fi_output(stdout, args)) == case["expect"]
    if case["expect"] == "ok":
        sweep = fi_output(stdout, args)
        assert len(sweep.rows) == case["rows"]
        asked, iterations = fi_pingpong.asked(args)
        # the sizes asked for, up to the provider's largest message where it ends the sweep (udp's dgram)
        assert sweep.sizes == [s for s in asked if s <= case.get("max_size", s)]
        assert {r["iterations"] for r in sweep.rows} == {iterations}
        # the server prints the same table; a pair launch keeps only the client's on stdout
        assert fi_output(fi_text(name, "server.stdout"), args).sizes == sweep.sizes
        if "commstack.run.pair" in case.get("command", ""):  # the launcher's line tells the arguments
            assert fi_output(stdout, []).meta["args"] == args
    for stream, key in (("client.stderr", "stderr_expect"), ("server.stderr", "server_expect")):
        if key in case:
            assert kind(lambda: fi_pingpong.parse_pingpong(fi_text(name, stream))) == case[key]


def test_fi_pingpong_named_errors():
    with pytest.raises(ParseError, match="no provider for the asked provider and endpoint type") as e:
        fi_pingpong.parse_pingpong(fi_text("bad-provider", "server.stderr"))
    assert e.value.line == "fi_getinfo(): util/pingpong.c:1489, ret=-61 (No data available)"
    with pytest.raises(ParseError, match="no server listening on its control port"):
        fi_pingpong.parse_pingpong(fi_text("no-server", "client.stderr"))
    with pytest.raises(ParseError, match=r"stops at 4m; 6m comes next of the 46 sizes") as e:
        fi_output(fi_text("cut-short", "client.stdout"), ["-S", "all", "-I", "50"])
    assert e.value.kind == "truncated" and e.value.line.startswith("4m ")


def test_fi_pingpong_hostile_text():
    good = fi_text("tcp-rdm", "client.stdout")
    cut = good[:good.rindex("148.65")] + "148."
    assert kind(lambda: fi_output(cut, [])) == "truncated"
    with pytest.raises(ParseError, match="not an fi_pingpong row|fields") as e:
        fi_output(good + "done, all sizes\n", [])
    assert e.value.kind == "unknown-format" and e.value.line == "done, all sizes"
    lost = good.replace("=10      20m", "+2      20m")
    assert kind(lambda: fi_output(lost, [])) == "validation-failed"
    assert kind(lambda: fi_output(good, ["-I", "20"])) == "unknown-format"
    assert kind(lambda: fi_output(good.replace("4k ", "5k "), [])) == "unknown-format"
    assert kind(lambda: fi_output(good + good, [])) == "unknown-format"  # two outputs in one
    assert kind(lambda: fi_output("bytes\n", [])) == "unknown-format"
    assert kind(lambda: fi_output(good.replace("0.01", "0.0x", 1), [])) == "bad-number"


def test_fi_pingpong_pair_line_gives_the_arguments():
    text = fi_text("tcp-rdm-all", "client.stdout")
    line = "# commstack pair client: /usr/bin/fi_pingpong -p tcp -e rdm -S all -I 20 -P 40001 10.77.0.2\n"
    sweep = fi_output(line + text, [])  # no args given: the line has them
    assert len(sweep.rows) == 46 and sweep.sizes[-1] == 6 << 20 and sweep.meta["args"][:2] == ["-p", "tcp"]
    assert fi_pingpong.title(line.strip()).name == "fi_pingpong" and fi_pingpong.title(text.splitlines()[0])
    assert not fi_pingpong.title("# OSU MPI Bandwidth Test v7.2")
    assert kind(lambda: fi_output(line.replace("-S all ", "") + text, [])) == "unknown-format"


def test_fi_pingpong_size_strings_are_util_pingpongs():
    texts = fi_pingpong.parse_pingpong(fi_text("tcp-rdm-all", "client.stdout")).meta["size_texts"]
    assert texts == [fi_pingpong.size_str(s) for s in fi_pingpong.all_sizes()]
    assert [fi_pingpong.size_str(s) for s in (1500, 1536, 1 << 30, 999)] == ["1.4k", "1.5k", "1g", "999"]
    assert [fi_pingpong.cnt_str(n) for n in (999, 1000, 2_500_000, 3 * 10 ** 9)] == ["999", "1k", "2m", "3b"]
    # one decimal below ten of the unit only (9.5k, 10k for 10.5 KiB), none for 0
    assert [fi_pingpong.size_str(s) for s in (9728, 10752, 9 << 20 | 1 << 19, 0)] == ["9.5k", "10k", "9.5m", "0"]
    # generate_test_sizes stops at the limit whether a power or a power and a half passes it
    assert fi_pingpong.all_sizes(4096)[-3:] == [2048, 3072, 4096]
    assert fi_pingpong.all_sizes(3072)[-3:] == [1536, 2048, 3072]


def ucx_text(name: str, side: str) -> str:
    path = DATA / "ucx_perftest" / f"{name}.{side}.stdout"
    return path.read_text() if path.exists() else ""


@pytest.mark.parametrize("name", [n for n, c in UCX["cases"].items() if "expect" in c])
def test_ucx_perftest_recorded(name):
    case = UCX["cases"][name]
    args = client_args(case["client"], "ucx_perftest")
    client = ucx_text(name, "client")
    assert kind(lambda: ucx_perftest.parse_perftest(client, args)) == case["expect"]
    if "with_server" in case:
        assert kind(lambda: ucx_perftest.parse_perftest(ucx_text(name, "server") + client)) == case["with_server"]
    if case["expect"] == "ok":
        sweep = ucx_perftest.parse_perftest(client, args)
        test, size = ucx_perftest.asked(args)
        assert sweep.benchmark == f"ucx_perftest-{test}" and sweep.sizes == [size]
        assert sweep.rows[0]["iterations"] == int(args[args.index("-n") + 1])
        assert ucx_perftest.parse_perftest(ucx_text(name, "server") + client).rows == sweep.rows
        if "commstack.run.pair" in case.get("command", ""):
            assert ucx_perftest.parse_perftest(client).rows == sweep.rows


def test_ucx_perftest_figures_and_names():
    sweep = ucx_perftest.parse_perftest(ucx_text("1.13/tag_lat-8", "client"), ["-t", "tag_lat", "-s", "8"])
    assert sweep.rows[0]["latency_us"] == 0.341 and sweep.rows[0]["message_rate"] == 2930825
    with pytest.raises(ParseError, match="none of the transports asked for") as e:
        ucx_perftest.parse_perftest(ucx_text("1.13/tls-unknown", "client"))
    assert "no usable transports/devices (asked nosuch on all devices)" in e.value.line
    with pytest.raises(ParseError, match="before its Final row \\(3 progress rows\\)"):
        ucx_perftest.parse_perftest(ucx_text("1.13/cut-short", "client"), ["-t", "tag_bw", "-s", "1048576"])
    with pytest.raises(ParseError, match="names neither its test nor its message size"):
        ucx_perftest.parse_perftest(ucx_text("1.13/tag_lat-8", "client"))
    box = ucx_text("1.13/tag_lat-8", "server")
    with pytest.raises(ParseError, match="the server ran 8 B, the client asked for 16 B"):
        ucx_perftest.parse_perftest(box + ucx_text("1.13/tag_lat-8", "client"), ["-t", "tag_lat", "-s", "8,8"])
    with pytest.raises(ParseError, match="tag_bw prints overhead"):
        ucx_perftest.parse_perftest(ucx_text("1.13/tag_lat-8", "client"), ["-t", "tag_bw"])


def test_ucx_perftest_hostile_text():
    good = ucx_text("1.13/tag_bw-1m", "client")
    args = ["-t", "tag_bw", "-s", "1048576"]
    assert kind(lambda: ucx_perftest.parse_perftest(good[:-10], args)) == "truncated"  # cut inside Final
    with pytest.raises(ParseError) as e:
        ucx_perftest.parse_perftest(good + "all done\n", args)
    assert e.value.kind == "unknown-format" and e.value.line == "all done"
    assert kind(lambda: ucx_perftest.parse_perftest(good.replace("5958.77", "59x8.77"), args)) == "unknown-format"
    assert kind(lambda: ucx_perftest.parse_perftest(good.replace("overhead", "latency"), args)) == "unknown-format"
    assert kind(lambda: ucx_perftest.parse_perftest("\n".join(good.splitlines()[:3]) + "\n", args)) == "truncated"
    line = "# commstack pair client: ucx_perftest 10.77.0.2 -p 40000 -t tag_bw -s 1048576 -n 20000\n"
    assert ucx_perftest.parse_perftest(line + good).sizes == [1 << 20]
    assert ucx_perftest.title(line.strip()).name == "ucx_perftest-tag_bw"
    assert ucx_perftest.title(good.splitlines()[0]) is ucx_perftest.UNNAMED  # its own first line names no test
    with pytest.raises(ParseError, match="names neither its test nor its message size"):
        ucx_perftest.parse_perftest(good)  # the client's table alone: no box, no pair line
    assert ucx_perftest.title("# OSU MPI Bandwidth Test v7.2") is None


def test_ucx_perftest_1_19_reproduction_has_the_window_line():
    server = ucx_text("1.19/tag_bw-1m", "server")
    sweep = ucx_perftest.parse_perftest(server + ucx_text("1.19/tag_bw-1m", "client"))
    assert sweep.meta["window_size"] == "32" and sweep.meta["progress_rows"] == 2 and sweep.sizes == [1 << 20]


def providers(text: str) -> list[str]:
    """The providers of an `fi_info -l` output as the facts probe reads them: its grep, then parse_probe."""
    grep = re.compile(re.search(r"grep -E '(\^\[a-z0-9_;\+:\]\+:\$)'", PROBE).group(1))
    lines = "".join(f"@@ 0 n1 fi_providers {line}\n" for line in text.splitlines() if grep.match(line))
    return parse_probe(lines)["nodes"]["n1"]["libfabric_providers"]


def test_fi_info_and_ucx_info_readers():
    facts = DATA / "facts"
    for name, case in FACTS.items():
        text = (facts / name).read_text()
        if "providers" in case:
            assert len(providers(text)) == case["providers"], name
        if "entries" in case:
            assert len(nics(text)) == case["entries"], name
        if "transports" in case:
            assert len(transports(text)) == case["transports"], name
    assert "tcp" in providers((facts / "debian12/fi_info-l.txt").read_text())
    assert "cxi" not in providers((facts / "debian12/fi_info-l.txt").read_text())
    cxi = nics((facts / "reproduced/fi_info-v-p-cxi-1.22.txt").read_text())
    down = [(n["domain"], n["link_state"]) for n in cxi if n["link_state"] != "FI_LINK_UP"]
    assert down == [("cxi2", "FI_LINK_DOWN")]
    assert "link_state" not in nics((facts / "debian12/fi_info-v-p-tcp.txt").read_text())[0]
    gh200 = transports((facts / "reproduced/ucx_info-d-1.19-gh200.txt").read_text())
    gh200 = {t["transport"] for t in gh200}
    assert {"cuda_copy", "gdr_copy", "cuda_ipc"} <= gh200
    with pytest.raises(ParseError, match="not a line of ucx_info -d"):
        transports("# Memory domain: tcp\nsegfault\n")
