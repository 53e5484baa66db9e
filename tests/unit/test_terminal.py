"""What `commstack suite` prints, through the command and without Slurm: OSU steps that cannot run
here (--osu-prefix /nonexistent<ESC>[31m) end at once, not-run, with an escape sequence in the reason.
Piped: plain lines; -q, -v and --json; in a pseudo-terminal of 40 columns: the live view, lines cut
with an ellipsis, colour only without NO_COLOR. And the key figure a step's line shows."""

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from commstack.benchmarks import METRICS
from commstack.results.references import Reference, References
from commstack.results.records import Record
from commstack.terminal.figures import figure_text, key_figure

SUITE = r"""name: two
description: two OSU steps
steps:
- {benchmark: osu_latency, nodes: 1, ranks_per_node: 2, sizes: [8, 64]}
- {benchmark: osu_bw, nodes: 1, ranks_per_node: 2, sizes: [8, 64]}
"""
SHOWN = ["osu_latency-N1-n2-host-native", "osu_bw-N1-n2-host-native"]
PREFIX = "/nonexistent\x1b[31m"  # an escape sequence that the reason quotes: shown as \x1b, never sent raw
REASON = (f"{PREFIX} is not an OSU install (no {PREFIX}/libexec/osu-micro-benchmarks/mpi/pt2pt/osu_latency): "
          "give an OSU install with --osu-prefix PREFIX (or COMMSTACK_OSU_PREFIX=PREFIX), or let `commstack run` "
          "build it with the pinned Spack (without --no-build)")
SHOWN_REASON = REASON.replace("\x1b", r"\x1b")
EXIT_LINE = "exit 3: every step that ran passed, but some did not run (--allow-not-run accepts that)"
COLOUR = re.compile(r"\x1b\[(?:\d+;)*(?:3[0-7]|9[0-7])(?:;\d+)*m")  # a foreground colour (SGR 30-37, 90-97)


@pytest.fixture
def suite(tmp_path) -> Path:
    path = tmp_path / "two.yaml"
    path.write_text(SUITE)
    return path


def env(**more: str) -> dict:
    keep = {k: v for k, v in os.environ.items()
            if not k.startswith(("COMMSTACK_", "SLURM_")) and k not in ("NO_COLOR", "COLUMNS", "LINES")}
    return {**keep, **more}


def argv(suite: Path, results: Path, *more: str) -> list[str]:
    return [sys.executable, "-m", "commstack", "suite", str(suite), "--slurm", "off", "--osu-prefix", PREFIX,
            "--results", str(results), *more]


def piped(suite: Path, results: Path, *more: str) -> subprocess.CompletedProcess:
    return subprocess.run(argv(suite, results, *more), env=env(), capture_output=True, text=True, timeout=120)


def test_piped_one_plain_line_per_event_and_each_reason_once(suite, tmp_path):
    proc = piped(suite, tmp_path / "r")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:3] == ["commstack suite: suite two on system local, 2 steps, srun --mpi=pmix",
                         f"results: {tmp_path / 'r'}", f"[step 1/2] {SHOWN[0]}"], proc.stdout
    took = r"(\d+ min \d\d|\d+\.\d) s"  # a loaded machine may take a minute
    assert re.fullmatch(rf"not-run {{6}}{re.escape(SHOWN[0])}  \[binary-not-found\]  {took}", lines[3]), lines[3]
    assert re.fullmatch(rf"\[step 2/2\] {re.escape(SHOWN[1])}, about \d+ s left", lines[4]), lines[4]
    assert re.fullmatch(rf"2 steps in {took}: 2 not-run", lines[6]), lines[6]
    assert lines[7:9] == [f"not-run: {SHOWN_REASON}", f"    2 steps: {', '.join(SHOWN)}"]  # the reason once, its steps
    assert proc.stdout.count("is not an OSU install") == 1
    assert lines[9:] == [f"results: {tmp_path / 'r'}", f"report: {tmp_path / 'r' / 'report' / 'index.html'}",
                         f"pytest's output: {tmp_path / 'r' / 'pytest.log'}", EXIT_LINE]
    assert "\x1b" not in proc.stdout  # no colour in a pipe, and the reason's escape sequence written out
    for pytests in ("test session starts", "SKIPPED", "short test summary", "generated xml file"):
        assert pytests not in proc.stdout
        assert pytests in (tmp_path / "r" / "pytest.log").read_text()


def test_quiet_prints_the_summary_and_the_exit_status_only(suite, tmp_path):
    proc = piped(suite, tmp_path / "r", "--quiet")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stdout.startswith("2 steps in ") and proc.stdout.endswith(EXIT_LINE + "\n"), proc.stdout
    assert "[step" not in proc.stdout and "commstack suite:" not in proc.stdout


def test_pytest_output_shows_pytest_and_keeps_it_in_the_log(suite, tmp_path):
    proc = piped(suite, tmp_path / "r", "-v")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    log = (tmp_path / "r" / "pytest.log").read_text()
    assert "test session starts" in log and "SKIPPED" in log
    assert proc.stdout.startswith(log) and proc.stdout.endswith(EXIT_LINE + "\n")  # pytest's output, then ours


def test_json_one_object_per_line(suite, tmp_path):
    proc = piped(suite, tmp_path / "r", "--json")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [e["event"] for e in events] == ["run-started"] + ["step-started", "step-ended"] * 2 + ["run-ended"]
    assert [e["step"] for e in events if e["event"] == "step-ended"] == SHOWN
    ended = events[2]
    assert (ended["verdict"], ended["error_kind"], ended["reason"], ended["figure"]) == \
        ("not-run", "binary-not-found", REASON, None)
    assert events[-1] | {"elapsed_s": 0} == {
        "event": "run-ended", "counts": {"not-run": 2}, "exit": 3, "meaning": EXIT_LINE.removeprefix("exit 3: "),
        "results": str(tmp_path / "r"), "report": str(tmp_path / "r" / "report" / "index.html"),
        "pytest_log": str(tmp_path / "r" / "pytest.log"), "elapsed_s": 0}


def on_a_terminal(cmd: list[str], columns: int, **more: str) -> str:
    """Everything `cmd` writes to a pseudo-terminal of `columns` columns."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    proc = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave, env=env(TERM="xterm-256color", **more),
                            start_new_session=True)
    os.close(slave)
    out = b""
    while True:
        ready, _, _ = select.select([master], [], [], 120)
        assert ready, "no output for 120 s"
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the terminal's last writer closed it
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert proc.wait(timeout=60) == 3, out
    return out.decode()


@pytest.mark.parametrize("no_color", [False, True], ids=["colour", "NO_COLOR"])
def test_a_narrow_terminal_cuts_the_lines_with_an_ellipsis(suite, tmp_path, no_color):
    out = on_a_terminal(argv(suite, tmp_path / "r"), 40, **({"NO_COLOR": "1"} if no_color else {}))
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out)  # the text, without the terminal's control sequences
    lines = [line for line in re.split(r"\r\n|\r|\n", shown) if line]
    assert "commstack suite: suite two on system lo…" in lines  # the header, cut to the terminal's 40 columns
    assert max(len(line) for line in lines) <= 40, lines
    assert EXIT_LINE not in shown and "exit 3: every step that ran passed, but" in shown  # wrapped, not cut
    assert f"{PREFIX} is" not in out and r"/nonexistent\x1b[31m is" in shown
    assert bool(COLOUR.search(out)) is not no_color


def record(benchmark: str, metric: str, rows: list[dict], verdict: str = "pass") -> Record:
    return Record(run_id="r", index=0, suite="s", system="x", step=f"{benchmark}-N2-n2", benchmark=benchmark,
                  tool="osu", tags={"nodes": 2}, metric=metric, unit=METRICS[metric].unit, verdict=verdict,
                  repeats=[rows, rows])


def test_the_key_figure_of_a_rate_a_time_and_a_step_that_did_not_run():
    bw = record("osu_bw", "bandwidth_MBps", [{"size": s, "bandwidth_MBps": v}
                                             for s, v in ((8, 10.0), (4 << 20, 23100.0), (8 << 20, 23500.0))])
    refs = References(system="x", references=[Reference(
        id="bw", benchmark="osu_bw", tags={"nodes": 2}, metric="bandwidth_MBps", points={8: 11.0, 4 << 20: 24062.5},
        tolerance={"lower": -0.1, "upper": 0.15})])
    assert figure_text(key_figure(bw, refs)) == "osu_bw 4 MiB: 23.1 GB/s, 96 % of reference"  # a size it holds
    assert figure_text(key_figure(bw, None)) == "osu_bw 8 MiB: 23.5 GB/s"  # no reference: the largest size
    lat = record("osu_latency", "latency_us", [{"size": s, "latency_us": v} for s, v in ((8, 1.92), (64, 2.5))])
    assert figure_text(key_figure(lat, refs)) == "osu_latency 8 B: 1.92 µs"  # a time: the smallest size
    assert key_figure(record("osu_bw", "bandwidth_MBps", [], "not-run"), refs) is None
