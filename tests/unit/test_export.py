"""The four export files of a run built from seed 000's recorded osu_bw tables, read back with real
parsers: csv for the pipe-separated perflog, json for JSON Lines, BMF and the Elasticsearch bulk body."""

import csv
import json
from pathlib import Path

import pytest

from commstack.cli.main import main
from commstack.paths import TOP
from commstack.results.export import ExportError, export, render
from commstack.tools.osu import parse_osu
from commstack.results.records import Record, read_run

SEEDS = TOP / "systems" / "references" / "seeds"
STEP = "osu_bw-inter-N2-n2-host-osu-mb"


@pytest.fixture
def run(tmp_path) -> Path:
    """Three repeats: seed 000's osu_bw with the CXI hook (twice) and the run without it (cscs-osu-10)."""
    with_hook = parse_osu((SEEDS / "cscs-osu-01.txt").read_text())[0].rows
    without = parse_osu((SEEDS / "cscs-osu-10.txt").read_text())[0].rows
    d = tmp_path / "20251122-101010-abcdef"
    Record(run_id=d.name, index=0, suite="cscs-images", system="alps-gh200", step=STEP, benchmark="osu_bw",
           tool="osu", tags={"nodes": 2}, metric="bandwidth_MBps", unit="MB/s", verdict="unstable",
           repeats=[with_hook, with_hook, without], started=1763800000.0, nodelist=["nid001", "nid002"]).write(d)
    Record(run_id=d.name, index=1, suite="cscs-images", system="alps-gh200", step="never-ran", benchmark="osu_bw",
           tool="osu", tags={}, metric="bandwidth_MBps", unit="MB/s", verdict="not-run", reason="no GPUs").write(d)
    return d


def sizes() -> list[int]:
    return [r["size"] for r in parse_osu((SEEDS / "cscs-osu-01.txt").read_text())[0].rows]


def test_perflog_is_pipe_separated_one_line_per_figure(run):
    path = export(run, "perflog")
    assert path == run / "export" / f"{run.name}.log"
    rows = list(csv.DictReader(path.open(), delimiter="|"))
    assert [int(r["size"]) for r in rows] == sizes()
    big = rows[-1]
    assert big["step"] == STEP and big["unit"] == "MB/s" and big["repeats"] == "3"
    assert big["nodelist"] == "nid001,nid002"
    assert float(big["lower"]) < 5000 < 20000 < float(big["value"]) == float(big["upper"])  # the no-CXI repeat


def test_jsonl_has_one_object_per_figure(run, tmp_path):
    out = tmp_path / "figures.jsonl"
    assert main(["export", str(run), "--format", "jsonl", "--output", str(out)]) == 0
    docs = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(docs) == len(sizes()) and {d["verdict"] for d in docs} == {"unstable"}
    assert docs[0]["tags"] == {"nodes": 2} and docs[0]["metric"] == "bandwidth_MBps"


def test_bmf_is_benchmark_measure_value_with_bounds(run):
    bmf = json.loads(export(run, "bmf").read_text())
    name = f"alps-gh200/cscs-images/{STEP}/4194304B"
    assert set(bmf) == {f"alps-gh200/cscs-images/{STEP}/{s}B" for s in sizes()}
    m = bmf[name]["bandwidth-mbps"]
    assert set(m) == {"value", "lower_value", "upper_value"} and m["lower_value"] <= m["value"] <= m["upper_value"]
    assert all(len(measure) <= 64 for b in bmf.values() for measure in b)  # bencher's slug limit


def test_elastic_bulk_pairs_an_action_with_each_document(run):
    lines = export(run, "elastic").read_text().split("\n")
    assert lines[-1] == ""  # the bulk API wants the body to end with a newline
    pairs = list(zip(lines[0:-1:2], lines[1:-1:2]))
    assert len(pairs) == len(sizes())
    for action, doc in pairs:
        a, d = json.loads(action), json.loads(doc)
        assert a["index"]["_index"] == "commstack" and a["index"]["_id"].endswith(f"/{STEP}/{d['size']}")
        assert d["system"] == "alps-gh200" and d["value"] > 0


def test_unknown_format_and_empty_runs_are_named_errors(run, tmp_path):
    with pytest.raises(ExportError, match="unknown export format 'csv'"):
        export(run, "csv")
    with pytest.raises(ExportError, match="unknown export format 'csv'"):
        render(read_run(run), "csv")
    empty = tmp_path / "empty"
    Record(run_id="empty", index=0, suite="s", system="local", step="x", benchmark="osu_bw", tool="osu", tags={},
           metric="bandwidth_MBps", unit="MB/s", verdict="not-run").write(empty)
    with pytest.raises(ExportError, match="no figures"):
        export(empty, "jsonl")
    with pytest.raises(ExportError, match="unknown export format 'csv'"):  # the format first, before the run
        export(empty, "csv")
    assert main(["export", str(empty), "--format", "bmf"]) == 2


def test_a_repeat_without_a_finite_figure_is_left_out_of_its_size(tmp_path):
    """A repeat whose row has no figure (null) or a non-finite one: that size's value, bounds and count are of
    the other repeats, and every file stays strict JSON (no NaN)."""
    rows = [[{"size": 1, "bandwidth_MBps": 1.0}, {"size": 2, "bandwidth_MBps": 2.0}],
            [{"size": 1, "bandwidth_MBps": None}, {"size": 2, "bandwidth_MBps": 3.0}],
            [{"size": 1, "bandwidth_MBps": 3.0}, {"size": 2, "bandwidth_MBps": float("nan")}]]
    d = tmp_path / "20251122-101010-abcdef"
    Record(run_id=d.name, index=0, suite="s", system="local", step="osu_bw", benchmark="osu_bw", tool="osu",
           tags={}, metric="bandwidth_MBps", unit="MB/s", verdict="pass", repeats=rows, started=1.0).write(d)
    out = tmp_path / "figures.jsonl"
    assert main(["export", str(d), "--format", "jsonl", "--output", str(out)]) == 0
    docs = [json.loads(line, parse_constant=pytest.fail) for line in out.read_text().splitlines()]
    assert [(x["size"], x["value"], x["lower"], x["upper"], x["repeats"]) for x in docs] == \
        [(1, 2.0, 1.0, 3.0, 2), (2, 2.5, 2.0, 3.0, 2)]


def test_every_format_writes_its_keys_sorted_so_that_two_exports_diff_line_by_line(run):
    for line in export(run, "jsonl").read_text().splitlines():
        assert line == json.dumps(json.loads(line), sort_keys=True)
    text = export(run, "bmf").read_text()
    assert text == json.dumps(json.loads(text), indent=2, sort_keys=True) + "\n"
    docs = export(run, "elastic").read_text().splitlines()[1::2]
    assert docs and all(doc == json.dumps(json.loads(doc), sort_keys=True) for doc in docs)


def test_an_output_through_a_file_is_refused_before_the_work(run, tmp_path, capsys):
    """`--output afile/x.jsonl` where afile is a file: a named error (exit 5), no traceback."""
    (tmp_path / "afile").write_text("")
    out = tmp_path / "afile" / "x.jsonl"
    assert main(["export", str(run), "--format", "jsonl", "--output", str(out)]) == 5
    assert capsys.readouterr().err.strip() == f"commstack export: error: cannot write {out}: Not a directory"
