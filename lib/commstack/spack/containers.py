"""The images: Containerfiles rendered by `spack containerize`, EDFs from containers/images.yaml, and the
static check of the committed chain (docs/containers.md). Generation is all-or-nothing per file: a failure
names the env and quotes Spack, and the committed file stays as it was."""

from __future__ import annotations

import difflib
import io
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import tomli_w
from dockerfile_parse import DockerfileParser

from commstack import exits
from commstack.config import ImagesFile, load
from commstack.yamlfile import read_yaml
from commstack.errors import ConfigError
from commstack.files import write_atomic
from commstack.paths import CONTAINERS, IMAGES, TOP
from commstack.spack import Spack, SpackError, envs

PINS = TOP / "envs" / "common" / "pins.yaml"
#: what the image envs build and take from Ubuntu 24.04 (buildable: true marks the comm stack)
IMAGE_PACKAGES = TOP / "envs" / "images" / "common.yaml"
#: where `spack containerize` puts the env's view (spack.container.writers.PathContext.paths)
VIEW = "/opt/views/view"


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

    @property
    def lock(self) -> Path:
        return self.env / "spack.lock"

    @property
    def env_name(self) -> str:
        """The image's env as `bin/commstack lock` names it."""
        return f"images/{self.name}"


def pinned_versions() -> dict[str, str]:
    """The `@x.y.z` of every package pinned with require: in pins.yaml."""
    pins = ((name, re.fullmatch(r"@([\w.-]+)", item.strip())) for name, conf in read_yaml(PINS)["packages"].items()
            for item in conf.get("require", []) if isinstance(item, str))
    return {name: m.group(1) for name, m in pins if m}


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


def image(name: str) -> Image:
    known = images()
    if name not in known:
        raise ConfigError(f"unknown image {name!r}; known: {', '.join(known)}")
    return known[name]


def render_containerfile(spack: Spack, img: Image) -> str:
    if not (img.env / "spack.yaml").is_file():
        raise ConfigError(f"image {img.name}: no env at {img.env}/spack.yaml")
    # -e .: the env's config (envs/images/common.yaml) names this checkout's templates, registered
    # or not; a plain `spack containerize` there (templates registered by setup) prints the same
    proc = spack("-e", ".", "containerize", cwd=img.env, check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise ContainerizeError(f"image {img.name}: spack containerize of {img.env} failed "
                                f"(exit {proc.returncode}):\n{proc.stderr.strip()}")
    return proc.stdout  # byte for byte: the file is what `spack containerize` prints


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


# ---- static check: the committed Containerfiles and locks, no Spack needed ----------------------

def shown(path: Path) -> str:
    """A path as messages give it: from the top of the repository where it is in it."""
    return str(path.relative_to(TOP)) if path.is_relative_to(TOP) else str(path)


def nvidia_base() -> str:
    """The one base image outside the chain: NVIDIA's CUDA devel image at the pinned CUDA."""
    return f"docker.io/nvidia/cuda:{pinned_versions()['cuda']}-devel-ubuntu24.04"


def fully_qualified(ref: str) -> bool:
    """registry/path:tag, the registry a host (a dot or a port) or localhost: podman's
    short-name resolution never applies to it."""
    registry, sep, path = ref.partition("/")
    host = "." in registry or ":" in registry or registry == "localhost"
    return bool(sep) and host and ":" in path.rsplit("/", 1)[-1]


def stages(img: Image) -> list[dict]:
    return DockerfileParser(fileobj=io.BytesIO(img.containerfile.read_bytes())).structure


def base_of(img: Image) -> str:
    """The image a Containerfile is built FROM (its only stage)."""
    froms = [i["value"].split() for i in stages(img) if i["instruction"] == "FROM"]
    if len(froms) != 1:
        raise ConfigError(f"image {img.name}: {len(froms)} FROM lines in {shown(img.containerfile)}; "
                          "one stage expected, FROM the image below it")
    return next(t for t in froms[0] if not t.startswith("--"))


def buildable() -> set[str]:
    """The packages the image envs may build: the communication stack of envs/images/common.yaml."""
    packages = read_yaml(IMAGE_PACKAGES)["packages"]
    return {name for name, conf in packages.items() if name != "all" and conf.get("buildable") is True}


def built_from_source(lock: Path) -> list[str]:
    """The nodes of a lock that `spack install` builds (every other one is an external)."""
    return sorted(name for name, node in envs.lock_nodes(lock).items() if not node["external"])


def static_problems(known: dict[str, Image] | None = None) -> list[str]:
    """What is wrong with the committed images, each line naming the image (the checks: docs/containers.md,
    "The static check")."""
    known = known or images()
    refs = {img.ref: name for name, img in known.items()}
    nvidia, allowed = nvidia_base(), buildable()
    out = []
    for name, img in known.items():
        rel = shown(img.containerfile)
        try:
            base = base_of(img)
        except ConfigError as e:
            out.append(str(e))
            continue
        if not fully_qualified(base):
            out.append(f"image {name}: {rel}: base image {base!r} is not fully qualified (registry/name:tag, "
                       f"as docker.io/{base}); podman refuses short names in enforcing mode")
        elif base != nvidia and base not in refs:
            out.append(f"image {name}: {rel}: base image {base!r} is neither {nvidia} (the pinned CUDA) "
                       f"nor an image of containers/images.yaml ({', '.join(refs)})")
        out += install_problems(img)
        if not img.lock.is_file():
            out.append(f"image {name}: no {shown(img.lock)}: run bin/commstack lock {img.env_name}")
            continue
        extra = sorted(set(built_from_source(img.lock)) - allowed)
        if extra:
            out.append(f"image {name}: {shown(img.lock)} builds {', '.join(extra)} from source; the images "
                       f"build only the communication stack ({IMAGE_PACKAGES.relative_to(TOP)})")
        parent = known.get(refs.get(base, ""))
        if parent is not None and list(known).index(parent.name) > list(known).index(name):
            out.append(f"image {name}: containers/images.yaml lists it before {parent.name}, the image it is "
                       "built FROM; list the chain in build order")
        if parent is not None and parent.lock.is_file():
            mine = envs.lock_nodes(img.lock)
            for pkg, node in envs.lock_nodes(parent.lock).items():
                if mine.get(pkg, {}).get("hash") != node["hash"]:
                    out.append(f"image {name}: {pkg} is {mine.get(pkg, {}).get('hash', 'missing')} in its lock and "
                               f"{node['hash']} in {parent.name}'s, the image it is built FROM: run bin/commstack "
                               f"lock {parent.env_name} {img.env_name}")
    return out + path_problems(known, refs)


def install_problems(img: Image) -> list[str]:
    """The lock is copied into the env before `spack install`, which installs it as it is."""
    steps = stages(img)
    lock = f"envs/images/{img.name}/spack.lock /opt/commstack/envs/images/{img.name}/spack.lock"
    copy = next((i for i, s in enumerate(steps) if s["instruction"] == "COPY" and s["value"] == lock), None)
    runs = [(i, s["value"]) for i, s in enumerate(steps) if s["instruction"] == "RUN"]
    install = next((i for i, run in runs if re.search(r"\bspack -e \. install\b", run)), None)
    rel, out = shown(img.containerfile), []
    if install is None:
        out.append(f"image {img.name}: {rel}: no `spack -e . install` step")
    elif copy is None or copy > install:
        out.append(f"image {img.name}: {rel}: the lock is not copied before the install (COPY {lock})")
    elif "--only-concrete" not in steps[install]["value"]:
        out.append(f"image {img.name}: {rel}: the install may concretize (no --only-concrete)")
    if any(re.search(r"\bspack\b.*\bconcretize\b", run) for _, run in runs):
        out.append(f"image {img.name}: {rel}: a build step concretizes; the image installs its committed lock")
    return out


def path_problems(known: dict[str, Image], refs: dict[str, str]) -> list[str]:
    """Every image has the view first on PATH and LD_LIBRARY_PATH: set by the chain's root, not
    undone by an image above it."""
    out = []
    for name, img in known.items():
        chain = [img]
        while (parent := refs.get(safe_base(chain[-1]))) and parent not in {i.name for i in chain}:
            chain.append(known[parent])
        for var, sub in (("PATH", "bin"), ("LD_LIBRARY_PATH", "lib")):
            values = [v for i in chain for v in env_values(i, var)]
            if not values or not values[0].startswith(f"{VIEW}/{sub}:"):
                out.append(f"image {name}: {var} does not start with the view's {VIEW}/{sub} "
                           f"(set in {chain[-1].name}'s ENV, kept by the images above it)")
    return out


def safe_base(img: Image) -> str:
    try:
        return base_of(img)
    except ConfigError:  # static_problems names it
        return ""


def env_values(img: Image, var: str) -> list[str]:
    """The values an image's ENV lines give var, the last first."""
    return [v for step in stages(img) if step["instruction"] == "ENV"
            for k, v in re.findall(r"([A-Za-z_]\w*)=(\S+)", step["value"]) if k == var][::-1]


def lock_drift(spack: Spack, chosen: list[Image]) -> list[str]:
    """Each image env concretized now, on a staged copy, against its committed lock: one line per
    node that moved (a pin changed, the lock not refreshed)."""
    out = []
    with tempfile.TemporaryDirectory(prefix="commstack-images-") as tmp:
        done = envs.concretize_all(spack, [img.env_name for img in chosen], envs.stage(Path(tmp)),
                                   options=("-c", "concretizer:concretization_cache:enable:false"))  # as lock
        for img in chosen:
            if not img.lock.is_file():
                continue  # static_problems names it
            diff = envs.lock_diff(img.lock, done[img.env_name].lock)
            if diff:
                out.append(f"image {img.name}: {shown(img.lock)} no longer matches its env "
                           f"(bin/commstack lock {img.env_name}):\n  " + "\n  ".join(diff))
            else:
                print(f"{img.name}: {shown(img.lock)} is what its env concretizes to")
    return out


def containerize(spack: Spack, names: list[str], check: bool) -> int:
    """`bin/commstack containerize [--check]` (docs/containers.md); the static check runs either way."""
    chosen = [image(n) for n in names] or list(images().values())
    diffs = []
    for img in chosen:
        files = rendered(spack, img)  # raises before anything is written
        found = drift(files)
        diffs += found
        if not check:
            write(files)
        print(f"{img.name}: {len(files)} files, " + (f"{len(found)} changed" if found else "unchanged"))
    problems = static_problems() + (lock_drift(spack, chosen) if check else [])
    if check and diffs:
        print("\n".join(diffs))
        problems.append("containers drifted from their envs: run bin/commstack containerize")
    for problem in problems:
        print(problem, file=sys.stderr)
    return exits.FAILED if problems else exits.PASS


def show_images() -> int:
    """`bin/commstack images`: each image's reference and base, files, and the commands that build
    and push it, in the order of the chain (images.yaml lists each after the image it is built FROM)."""
    for img in images().values():
        rel = Path(shown(img.containerfile))
        print(f"{img.name}: {img.ref}, FROM {safe_base(img)}\n"
              f"  podman build --platform linux/arm64 -f {rel} -t {img.ref} .\n"
              f"  podman push {img.ref}")
        for name in img.edfs:
            print(f"  EDF {rel.parent / (name + '.toml')}")
    return 0
