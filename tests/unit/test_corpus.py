"""The corpus of outputs as the world prints them (tests/data/corpus/, issue 25): every indexed file
through `commstack parse`, each table's verdict, validation and row count against its index entry.

The index holds each file's TRUE result (what the output is), not what the parsers say today, so the
share of matching files is the measure of how much of the world the parsers read. Every file gives its
indexed result but those GAPS names, each with why (issue 37: a share below 100 % let a change that breaks
one version's outputs pass); no bad output passes, no failure is named with another kind."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Literal

import pytest
import yaml
from pydantic import BaseModel, ConfigDict, Field

from commstack.cli import main as cli
from commstack.errors import PARSE_ERRORS
from commstack.paths import TOP

CORPUS = TOP / "tests" / "data" / "corpus"
FAMILIES = ("osu5", "osu6", "osu7", "nccl-tests", "rccl-tests", "jobs", "ucx_perftest", "fi_pingpong")
INDEXES = [CORPUS / "index.yaml", *sorted((CORPUS / "index.d").glob("*.yaml"))]
#: the files `commstack parse` does not yet give their indexed result, and why; a file that gives it leaves this list
GAPS = {"osu7/osu_bibw-7.5-cuda-lnx-bus-error.out":
        "the bus error ends the table mid-sweep: the 13 rows before it are not read back (rows 0 for 13)"}
EXIT = {e.kind: e.exit_status for e in PARSE_ERRORS}

Verdict = Literal["complete", "validation-failed", "truncated", "unknown-format", "crashed", "empty", "bad-number",
                  "timed-out", "node-failure"]


class Table(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    benchmark: str | None
    verdict: Verdict
    validated: Literal["yes", "no", "failed"]
    rows: int = Field(ge=0)


class Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    source: str = Field(pattern=r"^(https?://\S+|reproduction of .+ from \S+.*|recorded by tests/data/corpus/\S+.*)$")
    verbatim: bool
    tool: Literal["osu", "nccl-tests", "rccl-tests", "ucx_perftest", "fi_pingpong"]
    version: str | None
    launcher: Literal["mpirun", "mpiexec", "srun", "aprun", "jsrun", "unknown", "none"]
    mpi: Literal["open-mpi", "mpich", "intel-mpi", "cray-mpich", "mvapich", "spectrum-mpi", "hpe-mpt", "unknown",
                 "none"]
    command: str | None
    args: str
    ranks: int | None = Field(ge=1)
    device: Literal["cpu", "gpu"]
    tables: list[Table] = Field(min_length=1)
    notes: str | None = None


def load_index() -> dict[str, Entry]:
    index: dict[str, Entry] = {}
    for path in INDEXES:
        doc = yaml.safe_load(path.read_text()) or {}
        for name, raw in doc.items():
            assert name not in index, f"{name} is indexed twice ({path.name})"
            index[name] = Entry.model_validate(raw)
    return index


INDEX = load_index()


def results(path: Path, entry: Entry, capsys) -> list[tuple[str | None, str, str, int]]:
    """(benchmark, verdict, validated, rows) of each table `commstack parse FILE --json` finds."""
    argv = ["parse", str(path), f"--args={entry.args}", "--json"]
    if entry.ranks:
        argv += ["--ranks", str(entry.ranks)]
    cli.main(argv)
    out, _ = capsys.readouterr()
    return [(r["benchmark"], r["verdict"], r["validated"], len(r["rows"])) for r in json.loads(out)]


def expected(entry: Entry) -> list[tuple[str | None, str, str, int]]:
    return [(t.benchmark, t.verdict, t.validated, t.rows) for t in entry.tables]


def same(got: list[tuple], want: list[tuple]) -> bool:
    """Each table as indexed; a table whose output names no benchmark (nccl-tests before 2.16.7) is
    anyone's: `commstack parse` cannot know which binary printed it."""
    return len(got) == len(want) and all(g[1:] == w[1:] and g[0] in (None, w[0]) for g, w in zip(got, want))


def test_index_names_every_corpus_file():
    files = sorted(str(p.relative_to(CORPUS)) for f in FAMILIES for p in (CORPUS / f).glob("*") if p.is_file())
    assert sorted(INDEX) == files


def test_the_whole_index_through_commstack_parse(capsys):
    """The share of files whose every table has its indexed result; no bad output passes; no failure is
    named with another kind than the indexed one."""
    matched, mismatched, passed_bad, wrong_kind = 0, [], [], []
    for name, entry in sorted(INDEX.items()):
        got, want = results(CORPUS / name, entry, capsys), expected(entry)
        if same(got, want):
            matched += 1
            continue
        mismatched.append(f"{name}: got {got}, indexed {want}")
        for g, w in zip(got, want):
            if w[1] != "complete" and g[1] == "complete" or w[2] != "yes" and g[2] == "yes":
                passed_bad.append(f"{name}: {g} for {w}")
            elif w[1] != "complete" and g[1] != "complete" and g[1] != w[1]:
                wrong_kind.append(f"{name}: {g[1]}, indexed {w[1]}")
    share = matched / len(INDEX)
    with capsys.disabled():
        print(f"\ncorpus: {matched}/{len(INDEX)} files ({share:.1%}) give their indexed result")
    assert not passed_bad, "bad outputs that pass:\n" + "\n".join(passed_bad)
    assert not wrong_kind, "failures of another kind than indexed:\n" + "\n".join(wrong_kind)
    new = [m for m in mismatched if m.split(":")[0] not in GAPS]
    assert not new, "files that no longer give their indexed result:\n" + "\n".join(new)
    closed = sorted(set(GAPS) - {m.split(":")[0] for m in mismatched})
    assert not closed, f"these give their indexed result now: take them out of GAPS: {closed}"


@pytest.mark.parametrize("name", sorted(set(INDEX) - set(GAPS))[::17])
def test_a_sample_through_bin_commstack(name):
    """The command users type, as a subprocess, on every 17th file: the same results as in process."""
    entry = INDEX[name]
    argv = [str(TOP / "bin" / "commstack"), "parse", str(CORPUS / name), f"--args={entry.args}", "--json"]
    if entry.ranks:
        argv += ["--ranks", str(entry.ranks)]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    got = [(r["benchmark"], r["verdict"], r["validated"], len(r["rows"])) for r in json.loads(p.stdout)]
    assert same(got, expected(entry)), p.stderr
    failed = [t.verdict for t in entry.tables if t.verdict != "complete"]
    assert p.returncode == (EXIT[failed[0]] if failed else 0), p.stderr


def family(entry: Entry) -> str:
    if entry.tool == "osu":
        return f"osu {entry.version.split('.')[0]}.x" if entry.version else "osu (version not printed)"
    return entry.tool


@pytest.mark.parametrize("name", ["osu 5.x", "osu 6.x", "osu 7.x", "nccl-tests", "rccl-tests"])
def test_every_version_family_has_a_complete_output_and_a_bad_one(name):
    verdicts = {t.verdict for e in INDEX.values() if family(e) == name for t in e.tables}
    assert "complete" in verdicts and verdicts - {"complete"}, f"{name}: {sorted(verdicts)}"


def test_the_index_spans_the_mpis_launchers_and_devices():
    assert {e.mpi for e in INDEX.values()} >= {"open-mpi", "mpich", "intel-mpi", "cray-mpich", "mvapich"}
    assert {e.device for e in INDEX.values()} == {"cpu", "gpu"}
    assert {e.launcher for e in INDEX.values()} >= {"mpirun", "mpiexec", "srun"}
