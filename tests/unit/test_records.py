"""A step's record.json (commstack.results.records): what its schema takes and refuses, through `commstack
export` of a run directory as a user reads one, and the statistics of its repeats."""

import json
import math
import os
from pathlib import Path

import pytest

from commstack.cli.main import main
from commstack.files import FileWriteError
from commstack.results.records import Plan, Record, RecordError, read_plan, read_run

RUN = "20251122-101010-abcdef"


def record(**changes) -> Record:
    fields = dict(run_id=RUN, index=0, suite="s", system="local", step="osu_bw", benchmark="osu_bw", tool="osu",
                  tags={}, metric="bandwidth_MBps", unit="MB/s", verdict="pass", started=1.0,
                  repeats=[[{"size": 1, "bandwidth_MBps": 1.0}, {"size": 2, "bandwidth_MBps": 2.0}]])
    return Record(**{**fields, **changes})


def exported(tmp_path: Path, capsys, data: dict) -> tuple[int, str]:
    """`commstack export RUN --format jsonl` of a run whose one record.json holds `data`: (exit status, stderr)."""
    path = record().write(tmp_path / RUN)
    path.write_text(json.dumps(data))
    rc = main(["export", str(tmp_path / RUN), "--format", "jsonl", "--output", str(tmp_path / "out.jsonl")])
    return rc, capsys.readouterr().err


def good() -> dict:
    return json.loads(record().model_dump_json())


def row(size=1, **value) -> dict:
    """A record whose first row is the one given, a plain second row after it."""
    return {**good(), "repeats": [[{"size": size, **(value or {"bandwidth_MBps": 1.0})},
                                   {"size": 4, "bandwidth_MBps": 4.0}]]}


@pytest.mark.parametrize("data, message", [
    ({**good(), "colour": "red"}, "Extra inputs are not permitted at colour"),
    ({**good(), "metric": "speed"}, "metric: unknown metric 'speed'; known: "),
    ({**good(), "unit": "GB/s"}, "unit: 'GB/s', but bandwidth_MBps is in MB/s"),
    ({**good(), "step": "s" * 181}, "a name is 1 to 180 letters, digits"),
    (row(size=-1), "repeats.0.0.size: -1; a row's size is a byte count, 0 to 1099511627776"),
    (row(size=2 ** 40 + 1), "repeats.0.0.size: 1099511627777; a row's size is a byte count"),
    (row(size=1.0), "repeats.0.0.size: 1.0; a row's size is a byte count"),
    (row(size=True), "repeats.0.0.size: True; a row's size is a byte count"),
    (row(size=None), "repeats.0.0.size: no size; a row's size is a byte count"),
    (row(bandwidth_MBps="12"), "repeats.0.0.bandwidth_MBps: '12'; the judged figure is a number"),
    (row(latency_us=1.0), "repeats.0.0.bandwidth_MBps: no bandwidth_MBps; the judged figure is a number"),
    (row(bandwidth_MBps="9" * 60), "repeats.0.0.bandwidth_MBps: '" + "9" * 39 + "; the judged figure is a number"),
    (row(size="9" * 60), "repeats.0.0.size: '" + "9" * 39 + "; a row's size is a byte count"),
], ids=["unknown key", "unknown metric", "another unit", "a step name of 181", "size -1", "size 2**40 + 1",
        "size 1.0", "size true", "no size", "a figure in a string", "no figure",
        "a long figure quoted to 40", "a long size quoted to 40"])
def test_a_record_that_breaks_its_schema_is_refused_naming_the_file_and_the_rule(tmp_path, capsys, data, message):
    rc, err = exported(tmp_path, capsys, data)
    assert rc == 2 and "record.json: not a commstack record (" in err and message in err, err


@pytest.mark.parametrize("data", [
    {**good(), "step": "s" * 180}, row(size=0), row(size=2 ** 40), row(bandwidth_MBps=None), row(bandwidth_MBps=3),
], ids=["a step name of 180", "size 0", "size 2**40", "a figure not finite (null)", "a whole number"])
def test_a_record_at_the_edges_of_its_schema_is_read(tmp_path, capsys, data):
    assert exported(tmp_path, capsys, data) == (0, "")


def test_a_record_is_written_as_json_indented_by_two(tmp_path):
    path = record().write(tmp_path / RUN)
    assert path == tmp_path / RUN / "steps" / "s--osu_bw" / "record.json"
    lines = path.read_text().splitlines()
    assert lines[1] == f'  "run_id": "{RUN}",' and Record.read(path) == record()


def test_a_record_that_cannot_be_written_is_a_named_error(tmp_path):
    (tmp_path / RUN).write_text("a file where the run's directory goes")
    with pytest.raises(FileWriteError, match=rf"cannot write {tmp_path / RUN}/steps/s--osu_bw: "):
        record().write(tmp_path / RUN)


def test_a_new_record_has_spent_no_time_yet():
    assert record().elapsed_s == 0.0  # the batch runner adds each repeat's time to it


def test_the_statistics_of_one_two_and_a_lost_repeat():
    one = record(repeats=[[{"size": 1, "bandwidth_MBps": 2.0}]])
    assert one.medians() == {1: (2.0, 0.0, 1)} and one.means() == {1: (2.0, 0.0)}
    two = record(repeats=[[{"size": 1, "bandwidth_MBps": 1.0}], [{"size": 1, "bandwidth_MBps": 3.0}]])
    assert two.medians() == {1: (2.0, math.sqrt(2), 2)} and two.means() == {1: (2.0, math.sqrt(2))}
    lost = record(repeats=[[{"size": 1, "bandwidth_MBps": 1.0}], [{"size": 1, "bandwidth_MBps": None}]])
    (median, stdev, count), = lost.medians().values()
    assert math.isnan(stdev) and count == 2


def test_a_records_first_problem_is_the_one_named(tmp_path, capsys):
    rc, err = exported(tmp_path, capsys, {**good(), "index": "first", "suite": "../second"})
    assert rc == 2 and "(Input should be a valid integer, unable to parse string as an integer at index)" in err, err


def test_a_record_json_that_is_a_symlink_is_refused(tmp_path):
    path = record().write(tmp_path / RUN)
    elsewhere = tmp_path / "elsewhere.json"
    path.rename(elsewhere)
    path.symlink_to(elsewhere)
    with pytest.raises(RecordError, match=r"record\.json: is a symlink"):
        read_run(tmp_path / RUN)


def test_a_missing_run_directory_is_a_named_error_and_reading_one_leaves_no_file_open(tmp_path):
    record().write(tmp_path / RUN)
    with pytest.raises(RecordError, match=rf"^{tmp_path}/missing: no such results directory$"):
        read_run(tmp_path / "missing")
    fds = set(os.listdir("/proc/self/fd"))
    assert [r.step for r in read_run(tmp_path / RUN)] == ["osu_bw"]
    assert set(os.listdir("/proc/self/fd")) == fds


def test_a_plan_is_written_indented_by_two_and_read_back_with_its_defaults(tmp_path):
    (tmp_path / RUN).mkdir()
    Plan(system="local", steps=[record(verdict="not-run")]).write(tmp_path / RUN)
    lines = (tmp_path / RUN / "plan.json").read_text().splitlines()
    assert lines[1] == '  "system": "local",'
    plan = read_plan(tmp_path / RUN)
    assert plan.native_only is False and plan.job_id is None and [s.verdict for s in plan.steps] == ["not-run"]


def test_a_plan_with_a_key_it_does_not_know_is_refused(tmp_path):
    (tmp_path / RUN).mkdir()
    (tmp_path / RUN / "plan.json").write_text(json.dumps({"system": "local", "colour": "red"}))
    with pytest.raises(RecordError, match=r"plan\.json: not a commstack plan \(Extra inputs are not permitted at colour\)"):
        read_plan(tmp_path / RUN)
