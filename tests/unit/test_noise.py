"""The noise classifier (commstack.tools.noise) over real lines of the corpus (tests/data/corpus)."""

import pytest

from commstack.paths import TOP
from commstack.tools import noise
from commstack.tools.lines import Quoted, own_lines

CORPUS = TOP / "tests" / "data" / "corpus"


def corpus_line(name: str, lineno: int) -> str:
    # Open MPI 5's cuMemHostRegister help box prints stray bytes (osu7/*-h200-cuda-*): not this line's
    return (CORPUS / name).read_bytes().decode(errors="replace").splitlines()[lineno - 1]


@pytest.mark.parametrize("pattern", noise.PATTERNS, ids=lambda p: f"{p.source}:{p.what}")
def test_every_pattern_knows_its_example_and_no_earlier_pattern_takes_it(pattern):
    assert noise.classify(pattern.example) is pattern


@pytest.mark.parametrize("frame", noise.FRAMES, ids=lambda p: f"{p.source}:{p.what}")
def test_every_frame_rule_is_its_whole_example_and_a_line_of_the_corpus(frame):
    assert frame.regex.fullmatch(frame.example)
    assert any(frame.example in f.read_bytes().decode(errors="replace").splitlines()
               for f in CORPUS.rglob("*") if f.is_file())


@pytest.mark.parametrize("prefix", noise.PREFIXES, ids=lambda p: f"{p.source}:{p.what}")
def test_every_launcher_prefix_is_taken_from_its_example(prefix):
    rest, found = noise.strip_prefix(prefix.example)
    assert found is prefix and rest and prefix.example.endswith(rest) and rest[0] not in " \x00"


# (corpus file, line number, source, what) of real launcher and runtime lines
KNOWN = [
    ("osu5/osu_allreduce-5.6.3-ompi4-openib-help-boxes.out", 27, "open-mpi", "aggregated help messages"),
    ("osu5/osu_allreduce-5.6.3-ompi4-openib-help-boxes.out", 28, "open-mpi", "how to see every help message"),
    ("osu5/osu_latency-5.4-ompi3-report-bindings.out", 1, "open-mpi", "--report-bindings"),
    ("osu7/osu_alltoall-7.0-pml-ucx-verbose.out", 2, "open-mpi", "MCA component verbose line"),
    ("osu7/osu_bibw-7.5-cuda-lnx-bus-error.out", 1, "open-mpi", "an environment variable set for the job (PRRTE)"),
    ("osu7/osu_latency-7.1-display-map-tag-output.out", 3, "open-mpi", "--display-map job map"),
    ("osu5/osu_latency-5.3-impi5-debug.out", 2, "intel-mpi", "I_MPI_DEBUG startup line"),
    ("osu5/osu_latency-5.3-impi5-debug.out", 7, "intel-mpi", "I_MPI_DEBUG internal function line"),
    ("osu5/osu_bw-5.8-mpich-ucx-warn-before.out", 1, "ucx", "UCX log line"),
    ("osu7/osu_bw-7.3-cray-gtl-debug-inside.out", 15, "cray-mpich", "GPU transport layer (GTL) debug line"),
    ("osu5/osu_latency-5.3-mvapich2-ptmalloc-warning.out", 1, "mvapich", "registration cache warning"),
    ("osu7/osu_latency-7.2-mpich-hydra-verbose.out", 3, "mpich", "Hydra proxy or mpiexec message"),
    ("osu5/osu_bw-5.6.2-impi2019-libfabric-log.out", 7, "libfabric", "libfabric log line"),
    ("osu5/osu_latency-5.3-impi4-dapl-startup.out", 3, "intel-mpi", "I_MPI_DEBUG internal function line"),
    ("osu7/osu_bibw-7.3-rocm-DD-prrte-bindings.out", 1, "open-mpi", "--report-bindings (PRRTE)"),
    ("osu7/osu_latency-7.5.1-h200-cuda-dd.out", 12, "open-mpi", "aggregated help messages (PRRTE)"),
    ("nccl-tests/all_reduce_perf-nccl-info-tuning-table.out", 6, "nccl", "NCCL version line"),
    ("nccl-tests/all_reduce_perf-nccl-info-tuning-table.out", 8, "nccl", "NCCL_DEBUG line"),
    ("nccl-tests/all_reduce_perf-nccl-info-init-complete.out", 24, "nccl", "NCCL_DEBUG line"),
    ("osu5/osu_latency-5.6.2-prterun-ssh-warning.out", 1, "ssh", "known-hosts warning"),
    ("osu7/osu_bibw-7.5-c-ompi5-lnx.out", 1, "shell", "set -x trace line"),
    ("osu7/osu_bw-7.5-cray-mpich-frontier-banner.out", 4, "shell", "prompt and command line"),
    ("osu5/osu_latency-5.3.2-srun-banner.out", 2, "shell", "banner line"),
    ("jobs/osu_latency-osu_bw-5.7-echo-banners.out", 2, "shell", "banner line"),
    ("jobs/osu_latency-osu_bw-5.7-echo-banners.out", 3, "shell", "date line"),
]


@pytest.mark.parametrize("name,lineno,source,what", KNOWN)
def test_real_lines_are_known_with_their_source(name, lineno, source, what):
    p = noise.classify(corpus_line(name, lineno))
    assert (p.source, p.what) == (source, what)


def test_nccl_info_lines_that_end_in_numbers_are_known():
    """`Init COMPLETE` and tuning-table lines end like numbers; whole, they are still NCCL's."""
    lines = (CORPUS / "nccl-tests/all_reduce_perf-nccl-info-tuning-table.out").read_text().splitlines()
    info = [line for line in lines if " NCCL INFO " in line]
    assert len(info) == 6 and all(noise.classify(line).source == "nccl" for line in info)


def test_a_known_line_glued_to_a_row_is_unknown():
    name = "osu5/osu_latency-5.6.2-ssh-warning-glued.out"
    glued = corpus_line(name, 9)
    assert glued.startswith("32 ") and "Warning: Permanently added" in glued
    assert noise.classify(glued) is None
    warning = corpus_line("osu5/osu_latency-5.6.2-ssh-warning-inside.out", 9)
    assert noise.classify(warning).source == "ssh" and noise.classify(warning + "64   15.00") is None
    assert noise.classify("32                     15.00") is None  # a row is never noise


@pytest.mark.parametrize("line,rest,source", [
    ("[1,0]<stdout>:# OSU MPI Latency Test v7.1", "# OSU MPI Latency Test v7.1", "open-mpi"),
    ("[1,0]<stdout>: 1                       1.20", "1                       1.20", "open-mpi"),
    ("[1,1]<stderr>:[node2:1234] pml_ucx.c:313 connecting to proc. 0",
     "[node2:1234] pml_ucx.c:313 connecting to proc. 0", "open-mpi"),
    ("0: # OSU MPI Latency Test v5.3", "# OSU MPI Latency Test v5.3", "slurm"),
    ("\x001 more process has sent help message help-accelerator-cuda.txt / cuMemHostRegister failed",
     "1 more process has sent help message help-accelerator-cuda.txt / cuMemHostRegister failed", "open-mpi"),
    ("\x00", "", "open-mpi"),
    ("1                       1.20", "1                       1.20", None),
])
def test_launcher_prefixes_are_stripped_and_the_line_kept(line, rest, source):
    text, prefix = noise.strip_prefix(line)
    assert text == rest and (prefix.source if prefix else None) == source


def test_open_mpi_help_boxes_back_to_back_are_each_a_frame():
    lines = (CORPUS / "osu5/osu_allreduce-5.6.3-ompi4-openib-help-boxes.out").read_text().splitlines()
    boxes = noise.framed(lines)
    assert sorted(boxes) == list(range(17)) and {b.source for b in boxes.values()} == {"open-mpi"}
    t = own_lines("\n".join(lines) + "\n")  # a blank line is neither the program's nor a note
    assert t.lines[:2] == [Quoted("# OSU MPI Allreduce Latency Test v5.6.3", 19),
                           Quoted("# Size       Avg Latency(us)", 20)]
    assert [n.lineno for n in t.notes if n.what == "help box"] == [i for i in range(1, 18) if lines[i - 1].strip()]
    assert len(t.lines) == 2 + 19 and t.lines[2].text.startswith("4 ")


def test_a_rule_line_with_no_closing_one_or_around_rows_is_no_frame():
    rule = "-" * 74
    assert noise.framed([rule, "some text"]) == {}
    rows = ["####################", "1                       1.20", "####################"]
    assert noise.framed(rows) == {}
    banner = (CORPUS / "osu7/osu_bw-7.5-cray-mpich-frontier-banner.out").read_text().splitlines()
    assert sorted(noise.framed(banner)) == [0, 1, 2]


def test_a_box_after_a_line_of_the_jobs_own_is_found_wherever_it_starts():
    rule = "-" * 74
    assert sorted(noise.framed(["job started", rule, "inside the box", rule, "after"])) == [1, 2, 3]
    assert sorted(noise.framed(["job", "started", rule, "inside the box", rule])) == [2, 3, 4]


def test_notes_keep_line_numbers_and_the_tag_output_lines_become_the_programs():
    lines = (CORPUS / "osu7/osu_latency-7.4-tag-output-stderr-line.out").read_text().splitlines()
    t = own_lines("\n".join(lines) + "\n")
    assert [(n.lineno, n.source) for n in t.notes] == [(11, "open-mpi")]
    assert t.lines[0] == Quoted("# OSU MPI Latency Test v7.4", 1) and len(t.lines) == len(lines) - 1
    assert str(t.notes[0]).startswith("line 11: open-mpi (MCA component verbose line): [node2:1234]")


def test_unknown_lines_stay_the_programs_own():
    t = own_lines("Start NCCL all_reduce local test\nWARNING: unknown\n")
    assert [q.text for q in t.lines] == ["Start NCCL all_reduce local test", "WARNING: unknown"] and t.notes == []


def test_commstack_parse_keeps_every_known_line_of_a_real_output_as_a_note_with_its_source():
    from commstack.results.parse import parse_results
    text = (CORPUS / "osu5/osu_allreduce-5.6.3-ompi4-openib-help-boxes.out").read_text()
    [r] = parse_results(text, [])
    assert (r.verdict, len(r.sweep.rows), r.first) == ("complete", 19, 19)
    assert [(n.lineno, n.source) for n in r.notes] == [(n, "open-mpi") for n in (1, 2, 3, 4, 5, 7, 8, 9, 11, 12, 13, 15,
                                                                                  16, 17, 27, 28, 29)]
    banners = (CORPUS / "jobs/osu_latency-osu_bw-5.7-echo-banners.out").read_text()
    assert [[(n.lineno, n.source, n.what) for n in r.notes] for r in parse_results(banners, [])] == [
        [(1, "shell", "set -x trace line"), (2, "shell", "banner line"), (3, "shell", "date line"),
         (31, "shell", "set -x trace line"), (32, "shell", "banner line"), (33, "shell", "date line")],
        [(59, "shell", "date line")]]


def box(inner: int) -> list[str]:
    """An Open MPI help box of `inner` lines between its rules."""
    rule = "-" * 74
    return [rule, *(f"  Local device {i}: mlx5_{i} has no active port" for i in range(inner)), rule]


@pytest.mark.parametrize("inner,verdict,notes", [(0, "complete", 2), (1, "complete", 3),
                                                 (59, "complete", 61),
                                                 (60, "unknown-format", 0)])
def test_a_help_box_right_after_the_title_up_to_its_longest(tmp_path, capsys, inner, verdict, notes):
    """Through `commstack parse`: a box (its closing rule at most 60 lines after the opening one: FRAME_MAX_LINES,
    an empty one too) right after a real output's title is notes; a longer one's lines are looked at one by one,
    and the first is unknown."""
    import json
    from commstack.cli import main as cli
    lines = (CORPUS / "osu7/osu_latency-7.5.1.out").read_text().splitlines()
    title = next(i for i, line in enumerate(lines) if line.startswith("# OSU MPI Latency Test"))
    path = tmp_path / "out.txt"
    path.write_text("\n".join(lines[:title + 1] + box(inner) + lines[title + 1:]) + "\n")
    cli.main(["parse", str(path), "--args=-i 20 -x 2", "--json"])
    [t] = json.loads(capsys.readouterr()[0])
    assert t["verdict"] == verdict and len(t["notes"]) == notes, t["error"]
    assert {n["what"] for n in t["notes"]} <= {"help box"}
    if verdict != "complete":
        assert t["error"]["lineno"] == title + 2 and t["error"]["line"] == "-" * 74
