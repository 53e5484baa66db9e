"""Spack tier: the committed Containerfiles are what `spack containerize` makes of the image envs,
typed in each env's directory; each image env concretizes to its committed lock, builds only the
communication stack, and the chain comm-fwk < ompi < osu-mb, nccl-tests shares its packages."""

import dataclasses
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from commstack.paths import TOP
from commstack.spack import containers, environment
from commstack.spack.envs import stage

pytestmark = pytest.mark.spack

IMAGES = containers.images()
STACK = ("cuda", "gdrcopy", "libfabric", "ucx", "openmpi", "osu-micro-benchmarks", "nccl-tests", "nccl",
         "aws-ofi-nccl")
#: the chain as the seeds build it (000, 002)
CHAIN = {"ompi": "comm-fwk", "osu-mb": "ompi", "nccl-tests": "ompi"}
#: what the seeds take from the OS image (issue 24)
NOT_BUILT = {"python", "perl", "cmake", "openssl", "krb5", "openssh"}


@pytest.mark.parametrize("name", IMAGES)
def test_containerfile_has_not_drifted(spack, name):
    diffs = containers.drift(containers.rendered(spack, IMAGES[name]))
    assert not diffs, "regenerated files differ (bin/commstack containerize to accept):\n" + "\n".join(diffs)


def typed(argv: list[str], cwd: Path, user: Path, **env: str) -> subprocess.CompletedProcess:
    """A command as a user types it, Spack's user scope at `user` (never this host's ~/.spack)."""
    clean = {k: v for k, v in environment().items() if k not in ("SPACK_ENV", "SPACK_DISABLE_LOCAL_CONFIG")}
    return subprocess.run(argv, cwd=cwd, env={**clean, "SPACK_USER_CONFIG_PATH": str(user), **env},
                          capture_output=True, text=True, timeout=600)


def commstack_setup(spack, top: Path, user: Path) -> subprocess.CompletedProcess:
    """`bin/commstack setup` on the copy `top` with this Spack and spack-packages (no clone)."""
    builtin = yaml.safe_load((TOP / ".spack" / "repos.yaml").read_text())["repos"]["builtin"]
    return typed([str(TOP / "bin" / "commstack"), "setup", "--packages", str(Path(builtin).parents[2])], top, user,
                 COMMSTACK_HOME=str(top), SPACK_ROOT=str(spack.exe.parents[1]))


@pytest.fixture(scope="module")
def registered(spack, tmp_path_factory) -> tuple[Path, Path, str]:
    """A copy of the repo set up by `bin/commstack setup` into a scratch user scope: the copy, the
    scope and setup's output."""
    tmp = tmp_path_factory.mktemp("registered")
    top, user = repo_copy(tmp / "repo"), tmp / "user"  # no user scope yet: setup makes it
    proc = commstack_setup(spack, top, user)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return top, user, proc.stdout


@pytest.mark.parametrize("name", IMAGES)
@pytest.mark.parametrize("how", ["spack containerize", "spack -e . containerize",
                                 "spack env activate . && spack containerize"])
def test_spack_containerize_typed_in_the_env_dir_gives_the_committed_file(spack, registered, tmp_path, name, how):
    """No -C, no commstack: plain, the templates bin/commstack setup registered in Spack's user scope;
    with the env (-e, activated), the env's own config (envs/images/common.yaml) and an empty user scope."""
    img = IMAGES[name]
    top, user, _ = registered
    if how == "spack containerize":  # typed in the set-up copy, nothing active
        proc = typed([str(spack.exe), "containerize"], top / img.env.relative_to(TOP), user)
    elif how.startswith("spack env activate"):  # what `spack env activate .` exports
        proc = typed([str(spack.exe), "containerize"], img.env, tmp_path, SPACK_ENV=str(img.env))
    else:
        proc = typed([str(spack.exe), "-e", ".", "containerize"], img.env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.encode() == img.containerfile.read_bytes()  # `spack containerize | cmp - Containerfile`


def test_setup_registers_the_templates_before_spacks_own_and_says_how_to_undo(spack, tmp_path):
    top, user = repo_copy(tmp_path / "repo"), tmp_path / "user"
    for _ in range(2):  # idempotent
        proc = commstack_setup(spack, top, user)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    entry = f"config:template_dirs:{top / 'containers' / 'templates'}"
    assert (f"setup: Containerfile templates {top / 'containers' / 'templates'} registered in Spack's user scope "
            f"({user / 'config.yaml'}), for a plain `spack containerize` in envs/images/*; "
            f"undo: spack config --scope user remove {entry}\n") in proc.stdout
    assert (user.stat().st_mode & 0o777) == 0o700
    merged = yaml.safe_load(typed([str(spack.exe), "config", "get", "config"], top, user).stdout)["config"]
    assert merged["template_dirs"] == [str(top / "containers" / "templates"), "$spack/share/spack/templates"]
    undo = proc.stdout.split("undo: ")[1].splitlines()[0]
    assert typed(undo.replace("spack", str(spack.exe), 1).split(), top, user).returncode == 0
    merged = yaml.safe_load(typed([str(spack.exe), "config", "get", "config"], top, user).stdout)["config"]
    assert merged["template_dirs"] == ["$spack/share/spack/templates"]
    proc = typed([str(spack.exe), "containerize"], top / "envs" / "images" / "ompi", user)
    assert proc.returncode != 0 and "commstack/Containerfile" in proc.stderr


def test_without_the_registration_spack_names_the_template_and_the_docs_say_what_to_do(spack, tmp_path):
    """Spack's own message is the bare template name; docs/containers.md quotes it with the fix."""
    proc = typed([str(spack.exe), "containerize"], IMAGES["ompi"].env, tmp_path)
    assert proc.returncode == 3 and not proc.stdout
    assert proc.stderr.strip() == "==> Error: commstack/Containerfile"
    docs = (TOP / "docs" / "containers.md").read_text()
    assert f"$ spack containerize\n{proc.stderr.strip()}\n" in docs
    assert "bin/commstack setup" in docs[docs.index(proc.stderr.strip()):][:600]


@pytest.mark.parametrize("name", IMAGES)
def test_image_env_is_the_gh200_stack_and_the_chain_shares_its_packages(concrete, name):
    image, full = concrete[f"images/{name}"], concrete["gh200-ompi"]
    assert {n["target"] for n in image.nodes if not n["external"]} == {"neoverse_v2"}
    assert {n["os"] for n in image.nodes} == {"ubuntu24.04"}
    shared = [p for p in STACK if p in image.names()]
    assert {"cuda", "gdrcopy", "libfabric", "ucx"} <= set(shared)
    for pkg in shared:  # the same stack as the GH200 env: version and variants
        mine, theirs = image.one(pkg), full.one(pkg)
        assert (mine["version"], mine["variants"]) == (theirs["version"], theirs["variants"]), pkg
    if name in CHAIN:  # the image below's packages at the same hashes: installed once, reused
        below = concrete[f"images/{CHAIN[name]}"]
        ours = {n["name"]: n["hash"] for n in image.nodes}
        moved = [n["name"] for n in below.nodes if ours.get(n["name"]) != n["hash"]]
        assert not moved, f"{name} differs from {CHAIN[name]} in {moved}"


@pytest.mark.parametrize("name", IMAGES)
def test_image_builds_only_the_communication_stack(concrete, name):
    """Concretized now (not only the committed lock): the nodes `spack install` builds, printed."""
    c = concrete[f"images/{name}"]
    built = sorted(n["name"] for n in c.nodes if not n["external"])
    print(f"\n{name}: {len(c.nodes)} nodes, {len(built)} built from source: {', '.join(built)}")
    assert not set(built) & NOT_BUILT
    assert set(built) <= containers.buildable()
    assert built == containers.built_from_source(IMAGES[name].lock)
    if name == "ompi":
        assert set(built) == {"gdrcopy", "libfabric", "ucx", "libcxi", "cxi-driver", "cassini-headers", "openmpi",
                              "pmix", "prrte", "hwloc", "libevent", "compiler-wrapper", "gcc-runtime"}
        for pkg in NOT_BUILT & set(c.names()):  # there, as the image's Ubuntu packages
            assert c.one(pkg)["external"] and c.one(pkg)["prefix"] == "/usr", pkg


def test_the_chain_installs_its_locks_each_image_only_what_the_one_below_lacks(spack, tmp_path):
    """What each Containerfile's install step runs (`spack -e . install --only-concrete`), in chain
    order into one install tree, with --fake (this host is not the image): nothing is concretized,
    and each image installs exactly its lock's built nodes that the image below has not."""
    top = repo_copy(tmp_path / "repo")
    tree = tmp_path / "software"
    installed: dict[str, list[str]] = {}
    for name in IMAGES:  # images.yaml lists them in build order
        proc = spack("-c", f"config:install_tree:root:{tree}", "-e", ".", "install", "--only-concrete",
                     "--fail-fast", "--fake", cwd=top / "envs" / "images" / name,
                     extra_env={"SPACK_DISABLE_LOCAL_CONFIG": "1"})
        assert "oncretiz" not in proc.stdout + proc.stderr
        installed[name] = sorted(line.split("Successfully installed ")[1].rsplit("-", 2)[0]
                                 for line in proc.stdout.splitlines() if "Successfully installed" in line)
        below = set(containers.built_from_source(IMAGES[CHAIN[name]].lock)) if name in CHAIN else set()
        assert installed[name] == sorted(set(containers.built_from_source(IMAGES[name].lock)) - below), name
    print("\n" + "\n".join(f"{name} installs {len(p)}: {', '.join(p)}" for name, p in installed.items()))
    assert installed["osu-mb"] == ["osu-micro-benchmarks"] and installed["nccl-tests"] == ["nccl-tests"]


def repo_copy(where: Path) -> Path:
    """What `bin/commstack containerize` reads, copied: the envs, recipes, containers/ and the set-up."""
    top = stage(where)
    shutil.copytree(TOP / "containers", top / "containers")
    for f in ("toolchain.yaml", "pyproject.toml"):
        shutil.copy(TOP / f, top / f)
    for img in IMAGES.values():  # stage() leaves the locks out
        shutil.copy(img.lock, top / img.lock.relative_to(TOP))
    return top


def test_a_pin_changed_without_relocking_fails_containerize_check(spack, tmp_path):
    """A pin moved, the locks not refreshed: `bin/commstack containerize --check` names each image
    and the node, writes nothing, and exits 1 before anything is built."""
    top = repo_copy(tmp_path)
    pins = top / "envs" / "common" / "pins.yaml"
    pins.write_text(pins.read_text().replace('- "@2.5.1"               # seed 000 comm-fwk image',
                                             '- "@2.4.4"               # a pin changed, no relock'))
    before = {p: p.read_bytes() for p in (top / "containers").rglob("*") if p.is_file()}
    env = {**os.environ, "COMMSTACK_HOME": str(top), "SPACK_ROOT": str(spack.exe.parents[1])}
    proc = subprocess.run([str(TOP / "bin" / "commstack"), "containerize", "--check"], env=env,
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    for name in IMAGES:
        assert f"image {name}: envs/images/{name}/spack.lock no longer matches its env " \
               f"(bin/commstack lock images/{name}):\n  ~ gdrcopy: version 2.5.1 -> 2.4.4" in proc.stderr, proc.stderr
    assert {p: p.read_bytes() for p in (top / "containers").rglob("*") if p.is_file()} == before


def test_a_short_base_name_written_by_containerize_is_named(spack, tmp_path):
    """The env names its base as podman's short name: `bin/commstack containerize` writes the
    Containerfile, then its static check names the image and the base, and exits 1."""
    top = repo_copy(tmp_path)
    manifest = top / "envs" / "images" / "comm-fwk" / "spack.yaml"
    manifest.write_text(manifest.read_text().replace("docker.io/nvidia/cuda:", "nvidia/cuda:"))
    env = {**os.environ, "COMMSTACK_HOME": str(top), "SPACK_ROOT": str(spack.exe.parents[1])}
    proc = subprocess.run([str(TOP / "bin" / "commstack"), "containerize", "comm-fwk"], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr.splitlines()[0] == (
        "image comm-fwk: containers/comm-fwk/Containerfile: base image 'nvidia/cuda:12.8.1-devel-ubuntu24.04' "
        "is not fully qualified (registry/name:tag, as docker.io/nvidia/cuda:12.8.1-devel-ubuntu24.04); "
        "podman refuses short names in enforcing mode"), proc.stderr
    assert "FROM --platform=linux/arm64 nvidia/cuda:" in (top / "containers" / "comm-fwk" / "Containerfile").read_text()


def test_a_bad_container_section_names_the_env_and_keeps_the_file(spack, tmp_path):
    img = IMAGES["osu-mb"]
    before = img.containerfile.read_bytes()
    top = repo_copy(tmp_path)
    manifest = top / "envs" / "images" / "osu-mb" / "spack.yaml"
    manifest.write_text(manifest.read_text().replace("format: docker", "format: podman"))
    bad = dataclasses.replace(img, env=manifest.parent, out=tmp_path / "out")
    with pytest.raises(containers.ContainerizeError, match=r"image osu-mb: spack containerize of .* failed") as e:
        containers.write(containers.rendered(spack, bad))
    assert "podman" in str(e.value)
    assert img.containerfile.read_bytes() == before and not (tmp_path / "out").exists()


def test_a_template_that_does_not_render_is_an_error(spack, tmp_path):
    img = IMAGES["ompi"]
    top = repo_copy(tmp_path)
    manifest = top / "envs" / "images" / "ompi" / "spack.yaml"
    manifest.write_text(manifest.read_text().replace("commstack/Containerfile", "commstack/missing.Containerfile"))
    with pytest.raises(containers.ContainerizeError, match="missing.Containerfile"):
        containers.rendered(spack, dataclasses.replace(img, env=manifest.parent, out=tmp_path / "out"))
