"""The images: Containerfiles rendered by `spack containerize`, EDFs from containers/images.yaml.

Generation is all-or-nothing per file: a failure names the env and quotes Spack, and the
committed file stays as it was.
"""

from __future__ import annotations

import difflib
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import tomli_w

from commstack.config import ImagesFile, load, read_yaml
from commstack.errors import ConfigError
from commstack.files import write_atomic
from commstack.paths import TOP
from commstack.spack import Spack, SpackError

CONTAINERS = TOP / "containers"
IMAGES = CONTAINERS / "images.yaml"
PINS = TOP / "envs" / "common" / "pins.yaml"


class ContainerizeError(SpackError):
    """`spack containerize` failed for an image env; names the env, quotes Spack."""


@dataclass
class Image:
    name: str
    ref: str                       # registry/name:tag, for podman
    edfs: dict[str, dict]          # EDF name -> parsed content
    env: Path                      # envs/images/<name>
    out: Path                      # containers/<name>

    @property
    def containerfile(self) -> Path:
        return self.out / "Containerfile"


def pinned_versions() -> dict[str, str]:
    """The `@x.y.z` of every package pinned with require: in pins.yaml."""
    pins = read_yaml(PINS)["packages"]
    out = {}
    for name, conf in pins.items():
        for item in conf.get("require", []):
            m = re.fullmatch(r"@([\w.-]+)", item.strip()) if isinstance(item, str) else None
            if m:
                out[name] = m.group(1)
    return out


def format_tag(template: str, versions: dict[str, str]) -> str:
    def field(m: re.Match) -> str:
        name, parts = m.group(1), m.group(2)
        if name not in versions:
            raise ConfigError(f"{IMAGES.name}: tag {template!r} names {name!r}, which pins.yaml does not pin")
        v = versions[name]
        return ".".join(v.split(".")[: int(parts)]) if parts else v
    return re.sub(r"\{([\w-]+)(?::(\d))?\}", field, template)


#: the Container Engine annotations CSCS documents (Alps docs, container-engine "hooks"); the EDFs
#: use these and no others
ANNOTATIONS = ("com.hooks.cxi.enabled", "com.hooks.aws_ofi_nccl.enabled", "com.hooks.aws_ofi_nccl.variant")


def edf(ref: str, hooks: dict, cuda: str) -> dict:
    """A Container Engine environment definition, as the seeds write them: image, env, and the
    annotations as dotted keys."""
    registry, _, path = ref.partition("/")
    annotations = {"com.hooks.cxi.enabled": str(hooks.get("cxi", True)).lower()}
    if "aws_ofi_nccl" in hooks:
        annotations["com.hooks.aws_ofi_nccl.enabled"] = str(hooks["aws_ofi_nccl"]).lower()
        if hooks["aws_ofi_nccl"]:  # the hook's plugin build must match the image's CUDA major
            annotations["com.hooks.aws_ofi_nccl.variant"] = f"cuda{cuda.split('.')[0]}"
    return {"image": f"{registry}#{path}",
            "env": {"PMIX_MCA_psec": "native"},  # Open MPI's PMIx wire-up under srun --mpi=pmix
            "annotations": annotations}


def images(path: Path = IMAGES) -> dict[str, Image]:
    spec = load(ImagesFile, path)
    versions = pinned_versions()
    out = {}
    for name, conf in spec.images.items():
        ref = f"{spec.registry}/{name}:{format_tag(conf.tag, versions)}"
        edfs = {e: edf(ref, hooks, versions["cuda"]) for e, hooks in conf.edfs.items()}
        out[name] = Image(name, ref, edfs, TOP / "envs" / "images" / name, CONTAINERS / name)
    return out


def edf_names() -> list[str]:
    """What a suite step's `environments:` may name besides native."""
    return [e for spec in load(ImagesFile, IMAGES).images.values() for e in spec.edfs]


def image(name: str) -> Image:
    known = images()
    if name not in known:
        raise ConfigError(f"unknown image {name!r}; known: {', '.join(known)}")
    return known[name]


def render_containerfile(spack: Spack, img: Image) -> str:
    if not (img.env / "spack.yaml").is_file():
        raise ConfigError(f"image {img.name}: no env at {img.env}/spack.yaml")
    proc = spack("-C", str(CONTAINERS / "spack-config"), "containerize", cwd=img.env, check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise ContainerizeError(f"image {img.name}: spack containerize of {img.env} failed "
                                f"(exit {proc.returncode}):\n{proc.stderr.strip()}")
    return proc.stdout.rstrip("\n") + "\n"


def render_edf(content: dict, name: str) -> str:
    """TOML as the seeds write it: [annotations] with dotted keys (nested tables to a TOML reader)."""
    unknown = set(content["annotations"]) - set(ANNOTATIONS)
    if unknown:
        raise ConfigError(f"EDF {name}: annotations {sorted(unknown)} are not among those CSCS documents")
    plain = tomli_w.dumps({k: v for k, v in content.items() if k != "annotations"})
    notes = "".join(f"{k} = {tomli_w.dumps({'v': v})[4:]}" for k, v in content["annotations"].items())
    return (f"# {name}: generated by `bin/commstack containerize` from containers/images.yaml; "
            f"srun --mpi=pmix --environment=<this file>\n{plain}\n[annotations]\n{notes}")


def rendered(spack: Spack, img: Image) -> dict[Path, str]:
    """Every file of an image as generation would write it."""
    files = {img.containerfile: render_containerfile(spack, img)}
    for name, content in img.edfs.items():
        files[img.out / f"{name}.toml"] = render_edf(content, name)
    return files


def write(files: dict[Path, str]) -> None:
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text)


def drift(files: dict[Path, str]) -> list[str]:
    """Unified diffs between the committed files and freshly rendered ones (empty: no drift)."""
    out = []
    for path, text in files.items():
        old = path.read_text() if path.exists() else ""
        if old != text:
            rel = str(path.relative_to(TOP))
            out.append("".join(difflib.unified_diff(old.splitlines(True), text.splitlines(True),
                                                    f"a/{rel} (committed)", f"b/{rel} (regenerated)")))
    return out


def containerize(spack: Spack, names: list[str], check: bool) -> int:
    """`bin/commstack containerize`: render containers/<image>/ (Containerfile by spack
    containerize, EDFs); with check, diff against the committed files and write nothing."""
    chosen = [image(n) for n in names] or list(images().values())
    diffs = []
    for img in chosen:
        files = rendered(spack, img)  # raises before anything is written
        found = drift(files)
        diffs += found
        if not check:
            write(files)
        print(f"{img.name}: {len(files)} files, " + (f"{len(found)} changed" if found else "unchanged"))
    if check and diffs:
        print("\n".join(diffs))
        print("containers drifted from their envs: run bin/commstack containerize", file=sys.stderr)
        return 1
    return 0


def show_images() -> int:
    """`bin/commstack images`: each image's reference, files, and the commands that build and push it."""
    for img in images().values():
        rel = img.containerfile.relative_to(TOP)
        print(f"{img.name}: {img.ref}\n"
              f"  podman build --platform linux/arm64 -f {rel} -t {img.ref} .\n"
              f"  podman push {img.ref}")
        for name in img.edfs:
            print(f"  EDF {rel.parent / (name + '.toml')}")
    return 0
