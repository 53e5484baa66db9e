"""Spack tier: an air-gapped site's round trip. `commstack mirror create` on a machine that has the
sources, then `setup --mirror` and an install where the sources cannot be reached.

Only mpi-pingpong's sources are here (this repository's git history): the env of the test is the
local env reduced to it. Its recipe fetches from <checkout>/.git, and Spack files a git source in
the mirror under that URL: the offline side is the same checkout with its .git gone, so the
install can only succeed from the mirror. (Tarball sources, every other recipe, are filed by
name and checksum, wherever the checkout is.)
"""

import os

import pytest
import yaml

from commstack.spack import mirror, setup
from commstack.spack.envs import stage

pytestmark = pytest.mark.spack


def pingpong_only(staged):
    manifest = staged / "spack.yaml"
    text = manifest.read_text()
    assert "  - osu-micro-benchmarks ~cuda\n" in text
    manifest.write_text(text.replace("  - osu-micro-benchmarks ~cuda\n", ""))
    return staged


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    return pingpong_only(stage(tmp_path_factory.mktemp("checkout")))


@pytest.fixture(scope="module")
def made(spack, checkout, tmp_path_factory):
    assert (checkout / ".git").exists()  # the sources: this repository's history
    dest = tmp_path_factory.mktemp("mirror") / "commstack-mirror"
    return mirror.create(spack, "local", dest, staged=checkout)


def test_mirror_holds_the_sources_and_says_what_it_is(made):
    tarballs = list(made.rglob("mpi-pingpong*.tar.gz"))
    assert tarballs, sorted(str(p.relative_to(made)) for p in made.rglob("*"))
    record = yaml.safe_load((made / mirror.RECORD).read_text())
    assert record["env"] == "local" and record["build_cache"] is None
    assert mirror.signed(made) is False


def test_offline_install_takes_the_sources_from_the_mirror(spack, checkout, made, tmp_path):
    offline = checkout
    (offline / ".git").unlink()  # no network, no git history: the recipe's source is gone
    setup.use_mirror(spack, made, offline / ".spack" / "mirrors.yaml")
    mirrors = yaml.safe_load((offline / ".spack" / "mirrors.yaml").read_text())["mirrors"]
    assert mirrors == {"commstack-offline": {"url": made.as_uri(), "signed": False}}
    tree = tmp_path / "install-tree"  # a fresh tree and source cache: nothing reused from before
    proc = spack("-c", f"config:install_tree:root:{tree}", "-c", f"config:source_cache:{tmp_path / 'cache'}",
                 "install", "--fail-fast", "mpi-pingpong",
                 env_dir=offline, timeout=1200, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    binary = next(tree.rglob("bin/mpi-pingpong"))
    assert os.access(binary, os.X_OK)


def test_without_the_mirror_the_install_cannot_fetch(spack, tmp_path):
    """The control: the same offline copy without mirrors.yaml fails to fetch, by name."""
    offline = pingpong_only(stage(tmp_path / "offline"))
    (offline / ".git").unlink()
    proc = spack("-c", f"config:install_tree:root:{tmp_path / 'tree'}", "fetch", "mpi-pingpong",
                 env_dir=offline, timeout=600, check=False)
    assert proc.returncode != 0 and "mpi-pingpong" in proc.stderr
