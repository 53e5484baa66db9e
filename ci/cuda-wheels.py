#!/usr/bin/env python3
"""A CUDA and NCCL *build-time toolkit* from NVIDIA's PyPI wheels, for Spack externals.

    ci/cuda-wheels.py [--toolkit 12.8.1|13.0.2] [--wheels DIR] [--cuda PREFIX] [--nccl PREFIX]

It is what a machine without a GPU needs to compile and link CUDA-aware code: headers, libcudart,
ptxas/libdevice, NCCL, and link stubs of the driver (libcuda) and of NVML, which no wheel ships.
The stubs are made the way NVIDIA's own lib64/stubs are: every entry point that cuda.h / nvml.h
declares, returning an error (CUDA_ERROR_STUB_LIBRARY, NVML_ERROR_LIBRARY_NOT_FOUND), with the
driver's SONAME, so that what links them loads the real driver at run time. It is NOT a runtime:
nothing built against it runs CUDA code without a GPU node's driver. lib64/stubs/no-driver names the stubs
as the driver's libraries, so that a CUDA-linked binary can start on a machine without a GPU and run in
host memory (cuInit fails); commstack uses it only on systems whose nodes have no GPUs. CUDA 12.8.1's wheels
have no nvcc; CUDA 13.0.2's have nvcc and cicc (docs/building.md). Without --wheels, pip downloads the
pinned wheels from PyPI.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

#: CUDA release -> its wheels, pinned (PyPI's cuda-toolkit metapackage of that release names the same), the
#: folders under nvidia/ that make its toolkit, and whether it has nvcc
TOOLKITS = {
    "12.8.1": {   # the nvidia/cuda:12.8.1 image's components (seed 000) and its NCCL 2.25.1
        "wheels": {"nvidia-cuda-runtime-cu12": "12.8.90", "nvidia-cuda-nvcc-cu12": "12.8.93",
                   "nvidia-cuda-cccl-cu12": "12.8.90", "nvidia-nvml-dev-cu12": "12.8.90",
                   "nvidia-nccl-cu12": "2.25.1"},
        "parts": ("cuda_runtime", "cuda_nvcc", "cuda_cccl", "nvml_dev"),
        "nvcc": False,   # ptxas, libnvvm and crt/ only
    },
    "13.0.2": {   # cuda-toolkit 13.0.2's components: one nvidia/cu13 tree, nvcc and cicc included
        "wheels": {"nvidia-cuda-runtime": "13.0.96", "nvidia-cuda-nvcc": "13.0.88", "nvidia-cuda-crt": "13.0.88",
                   "nvidia-nvvm": "13.0.88", "nvidia-cuda-cccl": "13.0.85", "nvidia-nvml-dev": "13.0.87",
                   "nvidia-nccl-cu13": "2.27.7"},
        "parts": ("cu13",),
        "nvcc": True,
    },
}
#: stub library -> (its header, the declaration that starts an entry point, its error return)
STUBS = {
    "libcuda.so.1": ("cuda.h", r"CUresult\s+(cu\w+)\s*\(", "CUDA_ERROR_STUB_LIBRARY"),
    "libnvidia-ml.so.1": ("nvml.h", r"nvmlReturn_t\s+(nvml\w+)\s*\(", "NVML_ERROR_LIBRARY_NOT_FOUND"),
}


def fail(message):
    sys.exit(f"ci/cuda-wheels.py: {message}")


def trusted(path, what):
    """`path` (resolved) and the directories above it belong to root or us and nobody else may write them (one
    above with the sticky bit may: /tmp), as commstack.spack.trust holds an env: what goes into the toolkit and
    its stubs is loaded by every CUDA build and run that uses it."""
    path = path.resolve()
    for p in (path, *path.parents):
        st = p.stat()
        if st.st_uid not in (0, os.geteuid()):
            fail(f"{what} {p} belongs to uid {st.st_uid}: use a directory of your own or root's")
        if st.st_mode & 0o022 and not (p != path and st.st_mode & 0o1000):
            fail(f"{what} {p} has mode {st.st_mode & 0o7777:04o}, writable by others: chmod go-w {p}")


def fetch(wheels, wheels_dir, into):
    pins = [f"{name}=={version}" for name, version in wheels.items()]
    source = ["--no-index", "--find-links", str(wheels_dir)] if wheels_dir else []
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
         "--platform", "manylinux2014_x86_64", "--dest", str(into), *source, *pins],
        check=True,
    )
    return sorted(into.glob("*.whl"))


def unpack(wheels, into):
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(into)
    for tool in (*into.glob("nvidia/*/bin/*"), *into.glob("nvidia/*/nvvm/bin/*")):
        tool.chmod(0o755)   # zip keeps no mode bits that extractall applies
    return into / "nvidia"


def merge(tree, prefix):
    """Copy a wheel's include/, lib/, bin/, nvvm/ into the toolkit's layout (lib64, as CUDA's and as
    nvcc.profile's -L names it)."""
    for part, target in (("include", "include"), ("lib", "lib64"), ("bin", "bin"), ("nvvm", "nvvm")):
        source = tree / part
        if source.is_dir():
            shutil.copytree(source, prefix / target, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("__init__.py", "__pycache__"))


def link_names(lib):
    """libfoo.so -> libfoo.so.N: the link-time name the wheels leave out."""
    for real in lib.glob("*.so.*"):
        plain = lib / real.name.split(".so.")[0]
        plain = plain.with_name(plain.name + ".so")
        if not plain.exists():
            plain.symlink_to(real.name)


def stub(include, soname, header, declaration, error, into):
    cpp = subprocess.run(["gcc", "-E", "-P", "-I", str(include), "-x", "c", str(include / header)],
                         check=True, capture_output=True, text=True).stdout
    names = set(re.findall(declaration, cpp))
    if not names:
        fail(f"no entry points found in {include / header}")
    # `#define nvmlInit nvmlInit_v2`: the driver exports both names, and configure scripts test
    # the plain one (UCX: AC_CHECK_LIB([nvidia-ml], [nvmlInit]))
    plain = re.findall(r"^\s*#\s*define\s+(\w+)\s+(\w+_v\d+)\b", (include / header).read_text(), re.M)
    names = sorted(names | {old for old, new in plain if new in names})
    value = re.search(rf"\b{error}\s*=\s*(\d+)", cpp)
    if not value:
        fail(f"{error} not found in {include / header}")
    source = into / f"{soname}.c"
    source.write_text(f"/* link stub of {soname}, made from {header}: not a driver */\n"
                      + "".join(f"int {name}(void) {{ return {value[1]}; }}\n" for name in names))
    library = into / soname.split(".so")[0]
    library = library.with_name(library.name + ".so")
    subprocess.run(["gcc", "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", str(library), str(source)],
                   check=True)
    source.unlink()
    return len(names)


def absolute(path):
    return Path(os.path.abspath(path))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # absolute: a path that starts with a dash never reaches gcc or pip as an option
    parser.add_argument("--wheels", type=absolute, help="a directory holding the pinned wheels (offline)")
    parser.add_argument("--toolkit", choices=TOOLKITS, default="12.8.1", help="the CUDA release (default %(default)s)")
    parser.add_argument("--cuda", type=absolute, help="default /opt/commstack/cuda-TOOLKIT")
    parser.add_argument("--nccl", type=absolute, help="default /opt/commstack/nccl-ITS_NCCL")
    args = parser.parse_args()
    toolkit = TOOLKITS[args.toolkit]
    nccl = next(v for name, v in toolkit["wheels"].items() if name.startswith("nvidia-nccl-"))
    args.cuda = args.cuda or Path(f"/opt/commstack/cuda-{args.toolkit}")
    args.nccl = args.nccl or Path(f"/opt/commstack/nccl-{nccl}")
    if args.wheels:
        trusted(args.wheels, "--wheels")
        for wheel in args.wheels.glob("*.whl"):
            trusted(wheel, "the wheel")
    for prefix in (args.cuda, args.nccl):
        prefix.parent.mkdir(parents=True, exist_ok=True)
        trusted(prefix.parent, "the directory of")
        if os.path.lexists(prefix):
            fail(f"{prefix} exists: remove it to make it anew")
    for prefix in (args.cuda, args.nccl):
        try:
            prefix.mkdir()  # made here, before anything is copied: never a symlink someone planted meanwhile
        except FileExistsError:
            fail(f"{prefix} exists: remove it to make it anew")
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        (scratch / "wheels").mkdir()
        nvidia = unpack(fetch(toolkit["wheels"], args.wheels, scratch / "wheels"), scratch / "tree")
        for part in toolkit["parts"]:
            merge(nvidia / part, args.cuda)
        merge(nvidia / "nccl", args.nccl)
    (args.nccl / "lib").mkdir(exist_ok=True)
    for lib in (args.nccl / "lib64").glob("*"):   # NCCL's own layout is lib/, as libnccl-dev's
        lib.rename(args.nccl / "lib" / lib.name)
    (args.nccl / "lib64").rmdir()
    (args.cuda / "lib").symlink_to("lib64")
    link_names(args.cuda / "lib64")
    link_names(args.nccl / "lib")
    stubs = args.cuda / "lib64" / "stubs"
    stubs.mkdir()
    for soname, (header, declaration, error) in STUBS.items():
        count = stub(args.cuda / "include", soname, header, declaration, error, stubs)
        print(f"{stubs}/{soname.split('.so')[0]}.so: {count} entry points from {header}, each returning {error}")
    # a machine with no GPU and so no driver: the names a CUDA-linked binary loads, for host-memory runs
    # (commstack's --env on a system without GPUs puts this on the benchmark's LD_LIBRARY_PATH alone)
    no_driver = stubs / "no-driver"
    no_driver.mkdir()
    for soname in STUBS:
        (no_driver / soname).symlink_to(f"../{soname.split('.so')[0]}.so")
    (args.cuda / "version.json").write_text(f'{{"cuda": {{"name": "CUDA SDK", "version": "{args.toolkit}"}}}}\n')
    if toolkit["nvcc"]:   # the compiler's own word that it runs here, with the toolkit's cicc and headers
        nvcc = subprocess.run([str(args.cuda / "bin" / "nvcc"), "--version"], check=True, capture_output=True, text=True)
        print(next(line for line in nvcc.stdout.splitlines() if "release" in line))
    print(f"CUDA {args.toolkit} build-time toolkit (no driver, {'with' if toolkit['nvcc'] else 'no'} nvcc): {args.cuda}")
    print(f"NCCL {nccl}: {args.nccl}")


if __name__ == "__main__":
    main()
