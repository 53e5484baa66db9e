"""Validation is a fact (issue 25): every result says whether the benchmark checked its data (yes, no,
failed) in `commstack parse --json`, in a step's record and in the report; a suite or system with
`require_validation: true` fails a step that checked nothing."""

import json

import pytest
from pydantic import ValidationError

from commstack.cli import main as cli
from commstack.config import Suite, System, load_system
from commstack.errors import UnknownFormatError
from commstack.paths import TOP
from commstack.results.parse import parse_output, parse_results, validated
from commstack.results.records import Record
from commstack.results.report import write_report
from commstack.run.lifecycle import evaluate
from commstack.run.steps import SuiteStep

OSU = TOP / "tests" / "data" / "osu" / "7.2"
CORPUS = TOP / "tests" / "data" / "corpus"
TAGS = {"suite": "t", "nodes": 1, "ntasks": 2, "memory": "host", "environment": "native"}


def sweep(name: str, args: str = ""):
    return parse_output(None, (OSU / name).read_text(), args.split())


@pytest.mark.parametrize("name,args,want", [
    ("osu_bw.stdout", "", "no"),                 # no -c: complete, not validated
    ("osu_bw-c.stdout", "-c", "yes"),            # every row Pass
    ("osu_allreduce-f-c.stdout", "-f -c", "yes"),
])
def test_osu_validated_is_what_the_output_shows(name, args, want):
    assert validated(sweep(name, args)) == want


@pytest.mark.parametrize("name,want", [
    ("nccl-tests/all_reduce_perf-2.17.1-c0-not-validated.out", "no"),      # N/A, validation: 0
    ("nccl-tests/broadcast_perf-2.17.1-h100.out", "yes"),                 # #wrong 0
    ("osu7/osu_bibw-7.5-c-fail.out", "failed"),                           # a Fail row
])
def test_commstack_parse_json_says_validated(capsys, name, want):
    cli.main(["parse", str(CORPUS / name), "--json"])
    assert [r["validated"] for r in json.loads(capsys.readouterr().out)] == [want]


def test_a_failed_table_is_validation_failed_and_not_validated():
    [r] = parse_results((CORPUS / "osu7/osu_bibw-7.5-c-fail.out").read_text(), ["-c"])
    assert (r.verdict, r.validated, len(r.sweep.rows)) == ("validation-failed", "failed", 17)


def step(require: bool) -> SuiteStep:
    return SuiteStep("osu_bw-N1-n2-host-native", "osu_bw", "osu", None, tags=TAGS, require_validation=require)


def test_require_validation_fails_a_step_that_checked_nothing():
    system = load_system("local")
    record = evaluate(step(True), [sweep("osu_bw.stdout")], "", {}, system, None)
    assert (record.verdict, record.validated) == ("fail", "no")
    assert record.reason.startswith("not validated: osu_bw checked no data") and "require_validation" in record.reason


def test_without_the_requirement_an_unvalidated_step_keeps_its_verdict_and_says_not_validated():
    system = load_system("local")
    record = evaluate(step(False), [sweep("osu_bw.stdout")], "", {}, system, None)
    assert (record.verdict, record.validated) == ("pass", "no")
    validated_record = evaluate(step(True), [sweep("osu_bw-c.stdout", "-c")], "", {}, system, None)
    assert (validated_record.verdict, validated_record.validated) == ("pass", "yes")


def test_require_validation_is_a_suite_and_a_system_key():
    suite = Suite.model_validate({"name": "s", "require_validation": True, "steps": [{"benchmark": "osu_bw"}]})
    assert suite.require_validation
    local = load_system("local").model_dump(exclude={"path"})
    assert System.model_validate({**local, "require_validation": True}).require_validation
    with pytest.raises(ValidationError, match="require_validaton"):
        Suite.model_validate({"name": "s", "require_validaton": True, "steps": [{"benchmark": "osu_bw"}]})


def test_record_and_report_show_validated_and_notes(tmp_path):
    rec = Record(run_id=tmp_path.name, index=0, suite="t", system="local", step="osu_bw", benchmark="osu_bw",
                 tool="osu", tags=TAGS, metric="bandwidth_MBps", unit="MB/s", verdict="pass",
                 repeats=[sweep("osu_bw.stdout").rows], validated="no",
                 notes=["repeat 1, line 1: slurm (srun, salloc or sbatch message): srun: warning: x"])
    path = rec.write(tmp_path)
    doc = json.loads(path.read_text())
    assert doc["validated"] == "no" and doc["notes"] == rec.notes
    assert Record.read(path).validated == "no"
    write_report(tmp_path)
    md = (tmp_path / "report" / "report.md").read_text()
    assert "| step | verdict | reason | nodes | command | validated |" in md and md.count("| pass |  |  |  | no |") == 1
    assert "## Notes: known launcher and runtime lines" in md and "srun: warning: x" in md
    assert "<th>validated</th>" in (tmp_path / "report" / "index.html").read_text()
    notes = [f"line {i}: nccl (x): y" for i in range(25)]
    many = rec.model_copy(update={"step": "osu_bw-2", "index": 1, "notes": notes})
    many.write(tmp_path)
    write_report(tmp_path)
    md = (tmp_path / "report" / "report.md").read_text()
    assert "line 19: nccl (x): y" in md and "line 20: nccl" not in md and "... 5 more in t--osu_bw-2/record.json" in md


def test_commstack_parse_gives_each_datatype_of_d_all_its_own_lines(capsys):
    """nccl-tests `-d all` prints one head and a sweep per datatype: `commstack parse --json` gives each its
    own result, from its first row to the line before the next one's (the first from the output's start,
    the last to its end)."""
    cli.main(["parse", str(CORPUS / "nccl-tests/all_reduce_perf-2.19.4-d-all.out"), "--json"])
    results = json.loads(capsys.readouterr().out)
    assert [r["lines"] for r in results] == [[1, 20], *([21 + 3 * k, 23 + 3 * k] for k in range(10)), [51, 59]]
    assert [r["meta"]["type"] for r in results] == ["int8", "uint8", "int32", "uint32", "int64", "uint64", "half",
                                                     "float", "double", "bfloat16", "f8e4m3", "f8e5m2"]


def test_a_step_refuses_another_benchmarks_output_naming_its_title():
    """The runner's step ran osu_bw, the output is osu_latency's: unknown-format, quoting the title line."""
    text = (CORPUS / "osu7/osu_latency-7.5.1.out").read_text()
    with pytest.raises(UnknownFormatError, match="expected osu_bw output, the title is another benchmark's") as e:
        parse_output("osu_bw", text, [])
    assert (e.value.lineno, e.value.line) == (2, "# OSU MPI Latency Test v7.5")


def test_a_job_scripts_echo_between_two_tables_is_a_note_of_the_first(tmp_path, capsys):
    """Two OSU runs in one job log with the script's own echo between them: two complete results; the echo,
    known to no pattern, is a note (its line number, source unknown) of the table it follows."""
    table = (CORPUS / "osu7/osu_latency-7.5.1.out").read_text()  # 27 lines: a blank one, then the title
    log = tmp_path / "job.out"
    log.write_text(table + "now the second run\n" + table)
    cli.main(["parse", str(log), "--json"])
    first, second = json.loads(capsys.readouterr().out)
    assert (first["lines"], second["lines"]) == ([2, 29], [30, 55])
    assert (first["verdict"], second["verdict"]) == ("complete", "complete")
    assert [(n["lineno"], n["line"], n["source"]) for n in first["notes"]] == [(28, "now the second run", "unknown")]
    assert second["notes"] == []
