"""Spack tier: the committed Containerfiles are what `spack containerize` makes of the image envs,
and the image envs are the same stack as envs/gh200-ompi."""

import dataclasses
import shutil

import pytest

from commstack.spack import containers

pytestmark = pytest.mark.spack

IMAGES = containers.images()
STACK = ("cuda", "gdrcopy", "libfabric", "ucx", "openmpi", "osu-micro-benchmarks", "nccl-tests", "nccl",
         "aws-ofi-nccl")


@pytest.mark.parametrize("name", IMAGES)
def test_containerfile_has_not_drifted(spack, name):
    diffs = containers.drift(containers.rendered(spack, IMAGES[name]))
    assert not diffs, "regenerated files differ (bin/commstack containerize to accept):\n" + "\n".join(diffs)


@pytest.mark.parametrize("name", IMAGES)
def test_image_env_is_the_gh200_stack(concrete, name):
    image, full = concrete[f"images/{name}"], concrete["gh200-ompi"]
    assert {n["target"] for n in image.nodes if not n["external"]} == {"neoverse_v2"}
    assert {n["os"] for n in image.nodes if n["name"] in image.roots} == {"ubuntu24.04"}
    shared = [p for p in STACK if p in image.names()]
    assert {"cuda", "gdrcopy", "libfabric", "ucx"} <= set(shared)
    for pkg in shared:  # same version, variants and hash as on the login node: the chain can't diverge
        assert image.one(pkg)["hash"] == full.one(pkg)["hash"], f"{name}: {pkg} differs from gh200-ompi"


def test_a_bad_container_section_names_the_env_and_keeps_the_file(spack, tmp_path):
    img = IMAGES["osu-mb"]
    before = img.containerfile.read_bytes()
    broken = tmp_path / "osu-mb"
    shutil.copytree(img.env, broken)
    manifest = broken / "spack.yaml"
    manifest.write_text(manifest.read_text().replace("format: docker", "format: podman"))
    bad = dataclasses.replace(img, env=broken, out=tmp_path / "out")
    with pytest.raises(containers.ContainerizeError, match=r"image osu-mb: spack containerize of .* failed") as e:
        containers.write(containers.rendered(spack, bad))
    assert "podman" in str(e.value)
    assert img.containerfile.read_bytes() == before and not (tmp_path / "out").exists()


def test_a_template_that_does_not_render_is_an_error(spack, tmp_path):
    img = IMAGES["ompi"]
    broken = tmp_path / "ompi"
    shutil.copytree(img.env, broken)
    manifest = broken / "spack.yaml"
    manifest.write_text(manifest.read_text().replace("commstack/Containerfile", "commstack/missing.Containerfile"))
    with pytest.raises(containers.ContainerizeError, match="missing.Containerfile"):
        containers.rendered(spack, dataclasses.replace(img, env=broken, out=tmp_path / "out"))
