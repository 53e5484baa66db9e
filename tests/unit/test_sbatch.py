"""Issue 32 item 6, reopened: a system file's flags become options of sbatch (#SBATCH lines) and of commstack's
salloc, which read them with getopt_long: an abbreviation (`--outp=`) or a bundle of short options (`-vo/x`) was
the option a flags list may not hold. commstack.sbatch resolves each entry as getopt_long does; the table it
resolves against is checked here against the installed Slurm's own, where that is the same version."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from commstack import sbatch
from commstack.config import load_system
from commstack.errors import ConfigError
from commstack.paths import TOP

HEAD = "name: batchy\npartition: debug\nnodes: 1\nnode: {cores: 2, gpus: 0, nics: 1}\n"
ONE_STEP = "name: s\nsteps:\n- {id: pp, benchmark: mpi-pingpong, mode: cpu, ranks_per_node: 2, sizes: [8, 64]}\n"
#: checked against sbatch 22.05.8: each was read as --output, --error, --chdir, --partition, -v -o, -Q -e
BYPASSES = ["--outp=/victim/pwned-%j.txt", "--err=/victim/x", "--chd=/victim", "--par=x", "-vo/victim/pwned",
            "-Qe/victim/x"]
LEGITIMATE = ["--exclusive", "--constraint=gpu", "-Cgpu", "--mem=0", "--exclusive=user", "--overcommit",
              "--tasks-per-node=2", "--gres=gpu:4"]


def commstack(tmp_path: Path, system: str, *args: str) -> subprocess.CompletedProcess:
    """`bin/commstack suite` on a one-step suite and `system`: nothing reaches Slurm (a refused file, or --dry-run)."""
    (tmp_path / "suite.yaml").write_text(ONE_STEP)
    (tmp_path / "system.yaml").write_text(system)
    return subprocess.run([str(TOP / "bin" / "commstack"), "suite", str(tmp_path / "suite.yaml"), "--system",
                           str(tmp_path / "system.yaml"), "--slurm", "off", "--results", str(tmp_path / "results"),
                           *args], capture_output=True, text=True, timeout=300)


def flags(key: str, entries: list[str]) -> str:
    listed = ", ".join(f"'{e}'" for e in entries)
    return HEAD + (f"launcher: {{mpi: pmix, salloc_flags: [{listed}]}}\n" if key == "launcher.salloc_flags"
                   else f"launcher: {{mpi: pmix}}\nbatch: {{sbatch_flags: [{listed}]}}\n")


@pytest.mark.parametrize("key", ["batch.sbatch_flags", "launcher.salloc_flags"])
def test_an_abbreviated_or_bundled_option_the_run_sets_is_refused(tmp_path, key):
    """Every bypass is refused by the command, each entry with its key, before any file is made."""
    proc = commstack(tmp_path, flags(key, BYPASSES), "--submit", "--dry-run", "--pingpong", "/bin/true")
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    assert f"{len(BYPASSES)} problems:" in proc.stderr and "Traceback" not in proc.stderr
    for i, word in enumerate(BYPASSES):
        assert f"  {key}.{i}: Value error, " in proc.stderr and repr(word) in proc.stderr, proc.stderr
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("word, problem", [
    ("--outp=/x", "option '--outp=/x' (to sbatch, --output) is not a flag: the run sets it"),
    ("--par=x", "'--par=x' is ambiguous to sbatch: it abbreviates --parsable, --partition"),
    ("--acc=x", "'--acc=x' is ambiguous to sbatch: it abbreviates --account, --acctg-freq"),
    ("-vo/victim", "'-vo/victim': -v takes no value, and short options are not bundled here"),
    ("--no-shell", "'--no-shell' is not an option of sbatch (Slurm 22.05)"),
    ("-C", "'-C': sbatch's -C takes a value: write -CVALUE"),
    ("--comment", "'--comment': sbatch's --comment takes a value: write --comment=VALUE"),
    ("--overcommit=1", "'--overcommit=1': sbatch's --overcommit takes no value"),
    ("--account=a", "option '--account=a' is not a flag: batch.account gives it"),
    ("--comment=a b", "an #SBATCH value is one word"),
])
def test_each_refusal_names_what_the_option_is_to_sbatch(tmp_path, word, problem):
    (tmp_path / "s.yaml").write_text(HEAD + f"launcher: {{}}\nbatch: {{sbatch_flags: ['{word}']}}\n")
    with pytest.raises(ConfigError, match=re.escape(f"batch.sbatch_flags.0: Value error, {problem}")):
        load_system(str(tmp_path / "s.yaml"))


@pytest.mark.parametrize("word, problem", [
    ("--outp=/x", "'--outp=/x' is not an option of salloc"),
    ("--par=x", "option '--par=x' (to salloc, --partition) is not a flag"),
    ("-N2", "option '-N2' (to salloc, --nodes) is not a flag"),
    ("--no-shell", "'--no-shell' is not an option of sbatch (Slurm 22.05) (a salloc flag is an #SBATCH line of a "
                   "batch job too)"),
    ("--output=/x", "'--output=/x' is not an option of salloc"),
])
def test_a_salloc_flag_is_judged_as_salloc_and_sbatch_read_it(tmp_path, word, problem):
    (tmp_path / "s.yaml").write_text(HEAD + f"launcher: {{salloc_flags: ['{word}']}}\n")
    with pytest.raises(ConfigError, match=re.escape(f"launcher.salloc_flags.0: Value error, {problem}")):
        load_system(str(tmp_path / "s.yaml"))


def test_the_documented_salloc_flags_and_legitimate_flags_make_their_lines(tmp_path):
    """docs/new-system.md's example, `salloc_flags: [--account=..., --constraint=...]`, loads and is the batch job's
    #SBATCH lines too; flags that name nothing the run sets are taken as written."""
    system = flags("launcher.salloc_flags", ["--account=myproject", "--constraint=gpu"])
    system += f"batch: {{sbatch_flags: [{', '.join(LEGITIMATE)}]}}\n"
    (tmp_path / "s.yaml").write_text(system)
    assert load_system(str(tmp_path / "s.yaml")).launcher.salloc_flags == ["--account=myproject", "--constraint=gpu"]
    proc = commstack(tmp_path, system, "--submit", "--dry-run", "--pingpong", "/bin/true")
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("#SBATCH")]
    for want in ("--partition=debug", "--account=myproject", "--constraint=gpu", *LEGITIMATE):
        assert f"#SBATCH {want}" in lines, lines
    assert sum(line.startswith("#SBATCH --account") for line in lines) == 1


def test_an_account_in_salloc_flags_and_in_batch_is_refused(tmp_path):
    """Both would be the batch job's --account (two #SBATCH lines, the last winning): one is asked for."""
    system = flags("launcher.salloc_flags", ["--account=a"]) + "batch: {account: b}\n"
    proc = commstack(tmp_path, system, "--submit", "--dry-run", "--pingpong", "/bin/true")
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    assert ("launcher.salloc_flags '--account=a' and batch.account both give a batch job's --account: give it once"
            in proc.stderr), proc.stderr


# ---------------------------------------------------------------- against the installed Slurm's getopt_long

#: a getopt_long in front of glibc's: the first call writes the program's table, every call what it read
SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
int getopt_long(int c, char *const v[], const char *s, const struct option *l, int *i) {
  static int (*real)(int, char *const[], const char *, const struct option *, int *);
  static int dumped;
  if (!real) real = dlsym(RTLD_NEXT, "getopt_long");
  FILE *f = fopen(getenv("SHIM_TO"), "a");
  if (!dumped++) {
    fprintf(f, "SHORT %s\n", s);
    for (const struct option *o = l; o->name; o++) fprintf(f, "LONG %s %d %d\n", o->name, o->has_arg, o->val);
  }
  int idx = -1, r = real(c, v, s, l, &idx);
  if (i) *i = idx;
  fprintf(f, "READ %d %s %s\n", r, idx >= 0 ? l[idx].name : "-", optarg ? optarg : "(none)");
  fclose(f);
  return r;
}
"""
USAGE = 367   # --usage's val: the word before it was read whole


@pytest.fixture(scope="module")
def real_getopt(tmp_path_factory):
    """run(program, word) -> (table lines, what getopt_long read), the installed sbatch or salloc reading `word
    --usage` (it prints its usage and exits: nothing is submitted), with a configuration naming no server."""
    missing = [p for p in ("sbatch", "salloc", "cc") if not shutil.which(p)]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed: the table is checked against a real Slurm client")
    d = tmp_path_factory.mktemp("getopt")
    (d / "slurm.conf").write_text("ClusterName=helpcheck\nSlurmctldHost=localhost\nNodeName=localhost CPUs=1\n"
                                  "PartitionName=p Nodes=localhost Default=YES\n")
    (d / "shim.c").write_text(SHIM)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(d / "shim.so"), str(d / "shim.c"), "-ldl"], check=True)
    env = {"PATH": "/usr/bin:/bin", "SLURM_CONF": str(d / "slurm.conf")}
    version = subprocess.run(["sbatch", "--version"], env=env, capture_output=True, text=True, timeout=60).stdout
    if not re.search(r"\b22\.05\.", version):
        pytest.skip(f"the installed Slurm is {version.strip()!r}: the table is sbatch 22.05's")

    def run(program: str, word: str) -> tuple[list[str], list[list[str]]]:
        out = d / "shim.out"
        out.unlink(missing_ok=True)
        subprocess.run([program, word, "--usage"], env={**env, "SHIM_TO": str(out), "LD_PRELOAD": str(d / "shim.so")},
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
        lines = out.read_text().splitlines()
        reads = [x.split(" ", 3)[1:] for x in lines if x.startswith("READ ")]
        return [x for x in lines if not x.startswith("READ ")], reads
    return run


@pytest.mark.parametrize("table", [sbatch.SBATCH, sbatch.SALLOC], ids=lambda t: t.program)
def test_the_option_table_is_the_installed_programs(real_getopt, table):
    lines, _ = real_getopt(table.program, "--usage")
    rows = [x.split()[1:] for x in lines if x.startswith("LONG ")]
    by_val = {}
    for name, has_arg, val in rows:
        by_val.setdefault(val, name)
    assert {name: (by_val[val], ("", "=", "[=]")[int(has_arg)]) for name, has_arg, val in rows} == \
        {name: tuple(o) for name, o in table.long.items()}
    short = lines[0].split()[1].lstrip("+")
    assert {c: by_val[str(ord(c))] for c in re.findall(r"[A-Za-z]", short)} == \
        {c: o.name for c, o in table.short.items()}


WORDS = [*BYPASSES, *LEGITIMATE, "--acc=x", "--e=1", "--no-s", "--x11", "-o/x", "-N2", "--overcommit=1", "-k",
         "--no-kill", "--ntasks-per-n=2", "--chdir=/x", "-D/x", "--account=a"]  # none takes --usage as its value


@pytest.mark.parametrize("program", ["sbatch", "salloc"])
def test_what_commstack_accepts_is_what_slurm_reads(real_getopt, program):
    """Each word, to the real program: commstack refuses it where getopt_long refuses it or reads more than one
    option from it, and where it takes it, getopt_long reads that one option with that value."""
    table = {"sbatch": sbatch.SBATCH, "salloc": sbatch.SALLOC}[program]
    for word in WORDS:
        _, reads = real_getopt(program, word)
        first, rest = reads[0], reads[1:]
        whole = first[0] != "63" and rest[:1] and rest[0][0] == str(USAGE)
        try:
            option, given = sbatch.resolve(word, table)
        except ValueError:
            assert not whole, (word, reads)
            continue
        assert whole, (word, reads)
        name = first[1] if first[1] != "-" else table.short[chr(int(first[0]))].name
        assert (table.long[name].name, given or "(none)") == (option.name, first[2]), (word, reads)
