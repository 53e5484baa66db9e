"""Issue 48: an env someone else prepared runs nothing of theirs. Each file of an env given by path (its
directory, spack.yaml, an included file, a repository it names, its view) that another user owns or that group
or others may write is refused by name, through every way a user gives an env (`run --env`, `suite --env`, a
system's `install: {env: ...}`, `--dry-run`), before Spack reads it: the planted package.py, which writes a
marker file when imported, never runs. Also `parse` and a planted symlink, and `screen --plan` beyond its bound.
tests/spack/test_env_trust.py takes the view's binaries and the no-driver stubs through an installed env."""

import os
import pwd
import shutil
import subprocess
from pathlib import Path

import pytest

from commstack import exits
from commstack.limits import NODES, STEPS
from commstack.paths import TOP
from commstack.slurm import namespaces
from commstack.slurm.cluster import LocalSlurm
from commstack.slurm.namespaces import MAX_NODES, NamespaceError
from commstack.spack import NO_SPACK

pytestmark = pytest.mark.hostile

NOBODY = pwd.getpwnam("nobody")
#: a group nobody but `nobody` is in: its write bit opens a file to another user
NOGROUP = NOBODY.pw_gid
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


def commstack(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(TOP / "bin" / "commstack"), *args], capture_output=True, text=True, timeout=timeout)


def planted_env(root: Path) -> dict[str, Path]:
    """An env whose repository's package.py writes `marker` when imported, with an included file and a view;
    every part root's (or ours) and writable by nobody else. Returns its parts by name."""
    root.mkdir(mode=0o755)
    env, repo, view = root / "env", root / "repo", root / "view"
    marker = root / "PWNED-at-import"
    package = repo / "packages" / "planted" / "package.py"
    package.parent.mkdir(parents=True)
    (repo / "repo.yaml").write_text("repo:\n  namespace: planted\n")
    package.write_text(f"open({str(marker)!r}, 'w').close()\n")
    (view / "bin").mkdir(parents=True)
    env.mkdir()
    (env / "included.yaml").write_text("packages: {}\n")
    (env / "spack.yaml").write_text(f"spack:\n  include: [included.yaml]\n  repos: [{repo}]\n  specs: [planted]\n"
                                    f"  view: {view}\n")
    (env / "spack.lock").write_text("{}\n")
    system = root / "system.yaml"
    system.write_text((TOP / "systems" / "local.yaml").read_text()
                      + f"install:\n  env: {env}\n")
    for p in [root, *root.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    return {"env dir": env, "spack.yaml": env / "spack.yaml", "spack.lock": env / "spack.lock",
            "included file": env / "included.yaml", "named repo": repo, "package.py of the repo": package,
            "view": view, "marker": marker, "system": system}


#: how a user gives the env: (argv without the env, whether it is the system file's install: {env: ...})
WAYS = {"run --env --dry-run": (["run", "--dry-run", "--env"], False),
        "run --env": (["run", "--env"], False),
        "suite --env": (["suite", "smoke", "--env"], False),
        "install: {env:} --dry-run": (["suite", "smoke", "--dry-run", "--system"], True),
        "install: {env:}": (["suite", "smoke", "--system"], True)}
PARTS = ("env dir", "spack.yaml", "spack.lock", "included file", "named repo", "package.py of the repo", "view")


def damage(path: Path, how: str) -> None:
    if how == "owned by nobody":
        os.lchown(path, NOBODY.pw_uid, -1)
    elif how == "group-writable":
        os.chown(path, -1, NOGROUP)
        os.chmod(path, path.stat().st_mode | 0o020)
    else:
        os.chmod(path, path.stat().st_mode | 0o002)


def refused(proc: subprocess.CompletedProcess, env: dict[str, Path], part: str, how: str) -> None:
    """Refused by name, before Spack read the env: the planted package.py did not run."""
    said = proc.stderr
    assert proc.returncode == exits.USAGE, proc.stdout + said
    assert f"env {env['env dir']}" in said, said
    if how == "owned by nobody":
        assert f"{env[part]} belongs to another user (owner nobody, uid {NOBODY.pw_uid}" in said, said
        assert f"`chown root {env[part]}`" in said
    else:
        assert f"{env[part]} is writable by group or others" in said, said
        assert f"`chmod go-w {env[part]}`" in said
    assert "or copy it into a directory of your own" in said
    assert not env["marker"].exists(), "the planted package.py ran"


@needs_root
@pytest.mark.parametrize("how", ["owned by nobody", "group-writable", "writable by others"])
@pytest.mark.parametrize("part", PARTS)
def test_an_env_part_another_user_could_change_is_refused_by_a_dry_run(tmp_path, part, how):
    env = planted_env(tmp_path / "e")
    damage(env[part], how)
    refused(commstack("run", "--dry-run", "--env", str(env["env dir"])), env, part, how)


@needs_root
@pytest.mark.parametrize("way", [w for w in WAYS if w != "run --env --dry-run"])
@pytest.mark.parametrize("part", PARTS)
def test_an_env_part_another_user_could_change_is_refused_every_way_it_is_given(tmp_path, part, way):
    """Each way a user gives an env, the damage alternating by part; refused before a results directory is made."""
    env = planted_env(tmp_path / "e")
    how = "owned by nobody" if PARTS.index(part) % 2 else "group-writable"
    damage(env[part], how)
    argv, through_system = WAYS[way]
    results = tmp_path / "results"
    refused(commstack(*argv, str(env["system"] if through_system else env["env dir"]), "--results", str(results)),
            env, part, how)
    assert not results.exists()


@needs_root
def test_a_directory_above_the_env_that_another_user_owns_is_refused(tmp_path):
    """Whoever owns a directory on the way can rename the env away and put theirs in its place."""
    env = planted_env(tmp_path / "e")
    os.chown(tmp_path / "e", NOBODY.pw_uid, -1)
    proc = commstack("run", "--env", str(env["env dir"]), "--dry-run")
    assert proc.returncode == exits.USAGE
    assert f"{tmp_path / 'e'} belongs to another user (owner nobody" in proc.stderr
    assert not env["marker"].exists()


@needs_root
def test_a_symlink_to_the_env_is_followed_only_where_it_is_trusted(tmp_path):
    """A link root owns, to a trusted env, is followed; one another user owns is refused by name."""
    env = planted_env(tmp_path / "e")
    link = tmp_path / "link"
    link.symlink_to(env["env dir"])
    proc = commstack("run", "--env", str(link), "--dry-run", "--results", str(tmp_path / "r"))
    assert "belongs to another user" not in proc.stderr and "writable by group" not in proc.stderr
    os.lchown(link, NOBODY.pw_uid, -1)
    proc = commstack("run", "--env", str(link), "--dry-run")
    assert proc.returncode == exits.USAGE and f"{link} belongs to another user (owner nobody" in proc.stderr
    assert not env["marker"].exists()


def test_an_env_that_names_a_repository_or_include_it_cannot_check_is_refused(tmp_path):
    """A git repository or a remote include is what Spack fetches: nothing commstack could check first."""
    env = planted_env(tmp_path / "e")
    text = env["spack.yaml"].read_text()
    for named, said in (("  repos:\n    remote: {git: https://example.org/r.git}\n", "repository remote is not a "
                                                                                    "local path"),
                        ("  include:\n  - git: https://example.org/c.git\n    paths: [c.yaml]\n",
                         "is not a local path: commstack cannot check what Spack would fetch"),
                        ("  include: [$user_cache_path/x.yaml]\n", "commstack cannot tell which path Spack makes")):
        lines = [ln for ln in text.splitlines(keepends=True) if not ln.startswith(("  repos:", "  include:"))]
        env["spack.yaml"].write_text(lines[0] + named + "".join(lines[1:]))
        proc = commstack("run", "--env", str(env["env dir"]), "--dry-run")
        assert proc.returncode == exits.USAGE and said in proc.stderr, proc.stderr
    assert not env["marker"].exists()


@needs_root
def test_an_include_of_an_include_is_checked_too(tmp_path):
    env = planted_env(tmp_path / "e")
    deeper = tmp_path / "e" / "deeper.yaml"
    deeper.write_text("packages: {}\n")
    os.chmod(deeper, 0o644)
    env["included file"].write_text(f"include: [{deeper}]\n")
    os.chown(deeper, NOBODY.pw_uid, -1)
    proc = commstack("run", "--env", str(env["env dir"]), "--dry-run")
    assert proc.returncode == exits.USAGE and f"{deeper} belongs to another user" in proc.stderr
    assert not env["marker"].exists()


def test_a_trusted_env_passes_the_check_and_goes_on_to_spack(tmp_path):
    """The control: the same env, root's and writable by nobody else, reaches Spack (or is told there is none)."""
    env = planted_env(tmp_path / "e")
    proc = commstack("run", "--env", str(env["env dir"]), "--dry-run", "--results", str(tmp_path / "r"))
    assert "belongs to another user" not in proc.stderr and "writable by group" not in proc.stderr
    assert NO_SPACK in proc.stderr or "env_view.py" in proc.stderr, proc.stderr  # Spack ran, or would have


# ------------------------------------------------------------------------------- parse and a planted link

SEED = TOP / "systems" / "references" / "seeds" / "cscs-osu-01.txt"


def test_parse_refuses_a_symlink_given_as_the_file_and_quotes_nothing_behind_it(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("root:*:20228:0:99999:7:::\n")
    link = tmp_path / "link.txt"
    link.symlink_to(secret)
    proc = commstack("parse", str(link))
    assert proc.returncode == exits.USAGE
    assert f"{link}: is a symlink; commstack reads this file only as a regular file" in proc.stderr
    assert "root:*" not in proc.stdout + proc.stderr
    linked_dir = tmp_path / "dirlink"
    linked_dir.symlink_to(tmp_path)
    proc = commstack("parse", str(linked_dir))
    assert proc.returncode == exits.USAGE and f"{linked_dir}: is a symlink" in proc.stderr


def test_parse_dir_refuses_a_planted_symlink_fifo_and_device_and_reads_the_rest(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    secret = tmp_path / "secret"
    secret.write_text("root:*:20228:0:99999:7:::\n")
    (logs / "link.txt").symlink_to(secret)
    (logs / "null").symlink_to("/dev/null")
    os.mkfifo(logs / "fifo")
    shutil.copy(SEED, logs / "good.txt")
    proc = commstack("parse", str(logs))
    assert proc.returncode == exits.USAGE, proc.stdout + proc.stderr
    lines = dict(line.split(": ", 1) for line in proc.stdout.splitlines())
    assert lines["link.txt"].startswith("unreadable: ") and "is a symlink" in lines["link.txt"]
    assert lines["null"].startswith("unreadable: ") and "is a symlink" in lines["null"]
    assert lines["fifo"].startswith("unreadable: ") and "is a FIFO, not a regular file" in lines["fifo"]
    assert lines["good.txt"].startswith("complete: osu_")
    assert "root:*" not in proc.stdout + proc.stderr


def test_parse_quotes_no_line_of_a_file_that_holds_no_output_it_knows(tmp_path):
    """A file given by mistake (or as bait: a copy of a secret) is named unknown-format, its lines not shown."""
    secret = tmp_path / "shadow"
    secret.write_text("root:*:20228:0:99999:7:::\ndaemon:*:20228:0:99999:7:::\n")
    for argv in (["parse", str(secret)], ["parse", "--json", str(secret)]):
        proc = commstack(*argv)
        assert "unknown-format" in proc.stdout + proc.stderr
        assert "root:*" not in proc.stdout + proc.stderr and "daemon" not in proc.stdout + proc.stderr


# ------------------------------------------------------------------------------- the plan's bound

@pytest.mark.parametrize("nodes", [NODES + 1, 1_000_000_000, 2 ** 63])
def test_a_plan_beyond_the_node_bound_is_refused_at_once(nodes):
    proc = commstack("screen", "--plan", "--nodes", str(nodes), "--system", "alps-gh200", timeout=60)
    assert proc.returncode == exits.USAGE
    assert f"--nodes {nodes}: at most {NODES} nodes" in proc.stderr


def test_a_plan_at_the_node_bound_answers(tmp_path):
    proc = commstack("screen", "--plan", "--nodes", str(NODES), "--system", "alps-gh200", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"of {NODES} nodes on alps-gh200" in proc.stdout


def test_a_screen_file_of_more_checks_than_a_suite_may_have_steps_is_refused(tmp_path):
    """20,000 per-node checks (1.4 MB) took 23 s to plan, and a file of the 16 MiB an input may be, minutes."""
    screen = tmp_path / "s.yaml"
    text = (TOP / "screens" / "maintenance.yaml").read_text()
    assert text.count("\nper_node:\n") == 1
    checks = "".join(f"- {{id: c{i}, benchmark: osu_latency, nodes: 1, ranks_per_node: 2}}\n" for i in range(STEPS))
    screen.write_text(text.replace("\nper_node:\n", "\nper_node:\n" + checks))
    proc = commstack("screen", str(screen), "--plan", "--nodes", "64", "--system", "alps-gh200")
    assert proc.returncode == exits.USAGE, proc.stdout + proc.stderr
    assert f"checks: a screen may have at most {STEPS} (commstack.limits)" in proc.stderr


def test_a_screen_rule_that_can_never_call_a_node_slow_is_refused_by_its_key(tmp_path):
    """`mads: .inf` passed `ge=3`: a screen file that names no bad node whatever it measures."""
    screen = tmp_path / "s.yaml"
    text = (TOP / "screens" / "maintenance.yaml").read_text()
    assert "  mads: 4\n" in text
    screen.write_text(text.replace("  mads: 4\n", "  mads: .inf\n"))
    proc = commstack("screen", str(screen), "--plan", "--nodes", "64", "--system", "alps-gh200")
    assert proc.returncode == exits.USAGE
    assert "rule.mads: Input should be a finite number (got inf)" in proc.stderr


@pytest.mark.parametrize("given", ["screen file", "system file"])
def test_a_number_of_thousands_of_digits_in_a_yaml_file_is_a_named_error(tmp_path, given):
    """`seed: 1000...` (5,000 digits) in a screen file was a traceback (Python converts at most 4,300 digits)."""
    long = "1" + "0" * 5000
    if given == "screen file":
        f = tmp_path / "s.yaml"
        text = (TOP / "screens" / "maintenance.yaml").read_text()
        assert "  seed: 1\n" in text
        f.write_text(text.replace("  seed: 1\n", f"  seed: {long}\n"))
        argv = ["screen", str(f), "--plan", "--nodes", "64", "--system", "alps-gh200"]
    else:
        f = tmp_path / "sys.yaml"
        f.write_text((TOP / "systems" / "local.yaml").read_text() + f"# a number\nbogus: {long}\n")
        argv = ["suite", "smoke", "--dry-run", "--system", str(f)]
    proc = commstack(*argv)
    assert proc.returncode == exits.USAGE and "Traceback" not in proc.stderr, proc.stderr
    assert f"{f}: a number too long to read: Exceeds the limit (4300 digits)" in proc.stderr


def test_a_local_cluster_larger_than_its_subnet_is_refused_before_anything_starts(tmp_path):
    """node<i> is 10.77.0.(10+i) in one /24: `slurm start --nodes 245` made 244 namespaces and their slurmd before
    `ip addr add 10.77.0.255/24` failed. Refused first now (checked in process before the commands run, so that a
    regression fails here rather than start namespaces beside someone's cluster)."""
    with pytest.raises(NamespaceError, match=f"at most {MAX_NODES} nodes"):
        LocalSlurm.multinode(MAX_NODES + 1)
    results = tmp_path / "r"
    for argv in (["slurm", "start", "--nodes", str(MAX_NODES + 1)],
                 ["screen", "--system", "local-multinode", "--nodes", str(MAX_NODES + 1), "--results", str(results)]):
        proc = commstack(*argv)
        assert proc.returncode == exits.USAGE, proc.stdout + proc.stderr
        assert (f"--nodes {MAX_NODES + 1}: the local multi-node cluster has at most {MAX_NODES} nodes (10.77.0.11 to "
                "10.77.0.254)") in proc.stderr
    assert not results.exists() and f"cs-node{MAX_NODES + 1}" not in namespaces.present()


@needs_root
def test_a_history_another_user_could_have_written_is_refused(tmp_path):
    """`--history` in a sticky shared directory (/tmp's mode), or a file of another user's: root wrote the schema
    into nobody's file and read it as its history; in a sticky directory another user can make `NAME-journal`
    first, which SQLite rolls back into the file. Refused by name, the file untouched."""
    sticky, theirs = tmp_path / "sticky", tmp_path / "theirs"
    sticky.mkdir()
    theirs.mkdir()
    os.chmod(sticky, 0o1777)
    for history, said in ((sticky / "h.sqlite", f"its directory {sticky} has mode 1777, writable by group or "
                                                "others"),
                          (theirs / "h.sqlite", f"{theirs / 'h.sqlite'} belongs to uid {NOBODY.pw_uid} with mode 0644: "
                                                "it must be yours (uid 0)")):
        history.touch(mode=0o644)
        os.chown(history, NOBODY.pw_uid, -1)
        proc = commstack("history", "--history", str(history))
        assert proc.returncode == exits.USAGE, proc.stdout + proc.stderr
        assert said in proc.stderr
        assert history.stat().st_size == 0


# ------------------------------------------------------------------------------- the CI scripts' directories

@needs_root
def test_build_stack_refuses_source_trees_another_user_could_change_and_takes_odd_names(tmp_path):
    """--sources relative to the caller, starting with a dash, with a space and a '#' (a YAML comment unquoted)."""
    sources = tmp_path / "-a b #c"
    (sources / "ompi").mkdir(parents=True)
    os.chown(sources / "ompi", NOBODY.pw_uid, -1)
    proc = subprocess.run([str(TOP / "ci" / "build-stack.sh"), "--sources", sources.name, "--prepare-only"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert f"ci/build-stack.sh: ci/build-stack.sh --sources: {sources / 'ompi'} belongs to another user" in proc.stderr
    assert "Traceback" not in proc.stderr and not (TOP / ".spack" / "develop.yaml.new").exists()


def test_cuda_wheels_takes_a_dash_path_as_a_path_and_refuses_a_directory_others_may_write(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    proc = subprocess.run([str(TOP / "ci" / "cuda-wheels.py"), "--cuda=-x", "--nccl", str(shared / "nccl")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert f"the directory of {shared} has mode 0777, writable by others: chmod go-w {shared}" in proc.stderr
    assert not (tmp_path / "-x").exists() and not (shared / "nccl").exists()  # nothing made before the checks


def test_a_screen_file_asking_all_pairs_of_thousands_of_nodes_is_refused_by_its_key(tmp_path):
    """Unbounded, `all_pairs_up_to: 1000000` with `--plan --nodes 20000` ran on past two minutes."""
    screen = tmp_path / "s.yaml"
    text = (TOP / "screens" / "maintenance.yaml").read_text()
    assert "all_pairs_up_to: 32\n" in text
    screen.write_text(text.replace("all_pairs_up_to: 32\n", "all_pairs_up_to: 1000000\n"))
    proc = commstack("screen", str(screen), "--plan", "--nodes", "20000", "--system", "alps-gh200", timeout=60)
    assert proc.returncode == exits.USAGE, proc.stdout + proc.stderr
    assert "all_pairs_up_to" in proc.stderr and "1024" in proc.stderr


# ------------------------------------------------------------------------------- directories a command writes into

#: the commands that write into a directory they are given: argv with DIR for it
WRITERS = {"screen --results": ["screen", "--system", "local", "--slurm", "off", "--results", "DIR"],
           "mirror create": ["mirror", "create", "local", "DIR"]}


@needs_root
@pytest.mark.parametrize("command", list(WRITERS))
def test_a_directory_to_write_into_that_another_user_could_change_is_refused_by_name(tmp_path, command):
    """`screen --results` took another user's empty directory (they could plant `report -> /root/...` in it);
    `mirror create` wrote Spack's mirror into another user's directory, or where a symlink of theirs led. Each
    is refused, exit 2, nothing written into it."""
    what = "mirror directory" if command == "mirror create" else "results directory"
    theirs, link, shared = tmp_path / "theirs", tmp_path / "link", tmp_path / "shared"
    theirs.mkdir()
    shared.mkdir()
    os.chown(theirs, NOBODY.pw_uid, -1)
    os.chmod(shared, 0o777)
    link.symlink_to(theirs)
    for given, said in ((theirs, f"{what} {theirs} belongs to uid {NOBODY.pw_uid}, not to you (uid 0)"),
                        (theirs / "below", f"{theirs / 'below'}: its parent {theirs} belongs to uid {NOBODY.pw_uid}"),
                        (link, f"{what} {link} is a symlink, not a directory"),
                        (shared, f"{what} {shared} has mode 0777, writable by others; chmod go-w {shared}")):
        proc = commstack(*[str(given) if a == "DIR" else a for a in WRITERS[command]])
        assert proc.returncode == exits.USAGE, proc.stdout + proc.stderr
        assert said in proc.stderr, proc.stderr
        assert os.listdir(theirs) == [] and os.listdir(shared) == []
