"""The main job as a user types it: `commstack run` on the local Slurm, every step recorded and
judged, the report written, and an exit status that says whether everything ran and passed."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from checkouts import without_osu

from commstack.results.records import read_run
from commstack import exits
from commstack.spack import find_spack
from commstack.spack.install import location

pytestmark = pytest.mark.slurm
OSU = os.environ.get("COMMSTACK_OSU_PREFIX")


def commstack(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "commstack", *args], capture_output=True, text=True, timeout=900,
                          env={**os.environ, **(env or {})})


def test_run_without_osu_runs_the_pingpong_and_says_what_did_not_run(tmp_path: Path, slurm_variables):
    """On a checkout with no OSU in reach (this one's local env may have OSU installed: checkouts.without_osu)."""
    env = without_osu(tmp_path, slurm_variables)
    proc = subprocess.run([sys.executable, "-m", "commstack", "run", "--no-build", "--results", str(tmp_path / "r")],
                          capture_output=True, text=True, timeout=900, env=env)
    records = {r.step: r for r in read_run(tmp_path / "r")}
    assert proc.returncode == exits.NOT_RUN, proc.stdout + proc.stderr
    for ran in ("fi_pingpong-N1-n2-host-native", "ucx_perftest-tag_lat-N1-n2-host-native",
                "mpi-pingpong-cpu-N1-n2-host-native"):
        assert records.pop(ran).verdict == "pass", proc.stdout
    assert {r.verdict for r in records.values()} == {"not-run"} and len(records) == 4
    assert all("--osu-prefix PREFIX" in r.reason for r in records.values())  # the way out
    assert proc.stdout.count("no OSU micro-benchmarks here") == 1  # the reason once, with the steps it covers
    assert ("\nnot-run: no OSU micro-benchmarks here: give an OSU install with --osu-prefix PREFIX" in proc.stdout
            and "\n    4 steps: osu_latency-N1-n2-host-native, osu_bw-N1-n2-host-native, " in proc.stdout)
    junit = (tmp_path / "r" / "junit.xml").read_text()
    assert junit.count("<testcase ") == 7 and junit.count("<skipped ") == 4
    page = (tmp_path / "r" / "report" / "index.html").read_text()
    assert "7 steps: 3 pass, 4 not-run" in page


def test_run_gets_osu_from_the_pinned_spack_or_says_how_to(tmp_path: Path, slurm_variables):
    """Without an OSU install, run sets up Spack when there is none and installs OSU in the local env,
    one line per package; offline, without a mirror, the OSU steps are not-run with the fixing command."""
    env = {k: v for k, v in slurm_variables.items() if k != "COMMSTACK_OSU_PREFIX"}
    spack = find_spack()
    installed = location(spack, "osu-micro-benchmarks") if spack else None  # by an earlier run or test
    proc = subprocess.run([sys.executable, "-m", "commstack", "run", "--results", str(tmp_path / "r")],
                          capture_output=True, text=True, timeout=3600, env=env)
    records = read_run(tmp_path / "r")
    osu = [r for r in records if r.tool == "osu"]
    assert len(osu) == 4
    log = tmp_path / "r" / "build" / "spack-install.log"
    if proc.returncode == exits.PASS:  # Spack built OSU 7.5.1: online, or from set-up's source tree (.ci/run)
        # OSU 7.5.1 (the 7.5-1 release) titles its tables v7.5
        assert all(r.version == "7.5" and r.binary["from"] == "the local env's osu-micro-benchmarks" for r in osu)
        assert [r.verdict for r in records] == ["pass"] * 7
        assert ("spack: osu-micro-benchmarks ready in " in proc.stdout) == (installed is None), proc.stdout
        return
    assert proc.returncode == exits.NOT_RUN, proc.stdout + proc.stderr
    assert {r.verdict for r in osu} == {"not-run"}
    reason = osu[0].reason
    assert "bin/commstack mirror create local DIR" in reason and "--osu-prefix PREFIX" in reason
    if "setting up the pinned Spack" in proc.stdout:  # no Spack here: setup ran on the way, and failed offline
        assert "no Spack here, and setting it up failed: cannot clone" in reason
    else:  # Spack here: its install ran, its first error is the reason, its log is kept
        assert "spack: installing osu-micro-benchmarks in the local env" in proc.stdout
        assert re.search(r"^spack: \[\+\] \S+ \(external in /usr\)$", proc.stdout, re.M), proc.stdout
        assert "spack install osu-micro-benchmarks failed: FetchError" in reason and str(log) in reason
        assert "install --fail-fast osu-micro-benchmarks" in log.read_text().splitlines()[0]


@pytest.mark.skipif(not OSU, reason="no OSU install: set COMMSTACK_OSU_PREFIX to run the smoke suite's OSU steps")
def test_run_with_osu_passes_every_smoke_step(tmp_path: Path, slurm_variables):
    proc = commstack("run", "--results", str(tmp_path / "r"), "--osu-prefix", OSU, env=slurm_variables)
    records = read_run(tmp_path / "r")
    assert proc.returncode == exits.PASS, proc.stdout + proc.stderr
    assert [r.verdict for r in records] == ["pass"] * 7
    for r in records:
        assert r.repeats and r.repeats[0] and r.commands[0][0] == "srun"
        raw = tmp_path / "r" / r.outputs[0] / "stdout.txt"
        assert raw.stat().st_size > 0
    assert json.loads((tmp_path / "r" / "steps" / f"smoke--{records[0].step}" / "record.json").read_text())["verdict"]


@pytest.mark.skipif(not OSU, reason="no OSU install: set COMMSTACK_OSU_PREFIX")
def test_a_failed_data_check_is_validation_failed_not_the_crash_that_follows(tmp_path: Path, slurm_variables):
    """OSU 7.2 osu_reduce_scatter -c on 3 ranks prints a Fail row at 64 B and exits 1; srun then
    terminates the step. The verdict names the failed check, not the exit status."""
    (tmp_path / "suites").mkdir()
    suite = tmp_path / "suites" / "check.yaml"
    suite.write_text("name: check\ndescription: OSU's own data check\nsteps:\n"
                     "- {benchmark: osu_reduce_scatter, nodes: 1, ranks_per_node: 3, args: [-i, 20, -x, 2, -c]}\n")
    proc = commstack("suite", str(suite), "--system", "local", "--results", str(tmp_path / "r"), "--osu-prefix", OSU,
                     env=slurm_variables)
    (record,) = read_run(tmp_path / "r")
    stdout = next((tmp_path / "r" / "steps").glob("*/repeat-0/stdout.txt")).read_text()
    if "# OSU MPI Reduce_scatter Latency Test v7.2" not in stdout:
        pytest.skip(f"OSU 7.2 fails this check; {OSU} is another version")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (record.verdict, record.error_kind) == ("fail", "validation-failed"), record.reason
    assert len(record.nodelist) == 1  # known though the step failed (the diagnosis matches steps by their nodes)
    assert "on message size 64." in record.reason and "the step then exited non-zero" in record.reason


def test_a_mistyped_flag_is_refused_before_anything_runs(tmp_path: Path):
    proc = commstack("run", "--sytem", "local", "--results", str(tmp_path / "r"))
    assert proc.returncode == 2 and "unrecognized arguments: --sytem local" in proc.stderr
    assert not (tmp_path / "r").exists()


def test_steps_placed_alike_share_one_probe_of_their_nodes(tmp_path: Path, slurm_variables):
    (tmp_path / "suites").mkdir()
    suite = tmp_path / "suites" / "twice.yaml"
    suite.write_text("name: twice\ndescription: the same placement twice\nsteps:\n" + "".join(
        f"- {{benchmark: mpi-pingpong, mode: cpu, id: {i}, nodes: 1, ranks_per_node: 2, sizes: [8, 8]}}\n"
        for i in "ab"))
    proc = commstack("suite", str(suite), "--system", "local", "--results", str(tmp_path / "r"), env=slurm_variables)
    assert proc.returncode == exits.PASS, proc.stdout + proc.stderr
    a, b = read_run(tmp_path / "r")
    probes = sorted((tmp_path / "r" / "steps").glob("*/probe"))
    assert [p.relative_to(tmp_path / "r").as_posix() for p in probes] == [a.stack["probe"]] == [b.stack["probe"]]
    host = a.nodelist[0]
    assert host in (probes[0] / "stdout.txt").read_text()  # the facts are the probe's own output
    assert a.stack["nodes"] == b.stack["nodes"] and a.stack["nodes"][host]["mpi_library"] == "Open MPI"
    assert len(a.stack["ranks"]) == 2
