#!/usr/bin/env bash
# Build an env's stack with our recipes: `spack install` of the env, from local source trees when
# the machine has no internet (docs/building.md).
#   ci/build-stack.sh [--env ENV] [--sources DIR] [--jobs N] [--prepare-only] [-- SPEC...]
#     ENV   an env under envs/ (default x86-ompi, the x86_64 twin of gh200-ompi; x86-ompi-cuda13: with CUDA 13)
#     DIR   one source tree per package at its pinned tag, named as the table below says, git
#           submodules included (config/oac). Each tree gets the step a release tarball has had
#           (pre-release suffix stripped, configure generated) and is registered as a Spack develop
#           tree (.spack/develop.yaml, which the env includes), so no recipe checksum is touched.
#           Without --sources, Spack fetches each archive and checks its sha256, as always.
#     SPEC  install only these of the env's specs (and their dependencies); default: all of them
# The CUDA and NCCL externals of the twins come from ci/cuda-wheels.py (run it first; --toolkit 13.0.2 for
# x86-ompi-cuda13).
set -euo pipefail
env=x86-ompi sources="" jobs=2 prepare_only=0
while (($#)); do
  case $1 in
    --env) env=$2; shift 2 ;;
    --sources) sources=$(realpath -s -e -- "$2"); shift 2 ;;   # `--`: a DIR may start with a dash
    --jobs) jobs=$2; shift 2 ;;
    --prepare-only) prepare_only=1; shift ;;
    --) shift; break ;;
    *) echo "ci/build-stack.sh: unknown argument '$1' (see the usage at the top of this file)" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."   # after the arguments: a relative DIR is the caller's
spack=${SPACK_ROOT:-$PWD/.spack/spack}/bin/spack
export SPACK_PYTHON=${SPACK_PYTHON:-${COMMSTACK_VENV:-$PWD/.venv}/bin/python}   # clingo from the venv

# The trees' autogen steps and builds run as us: another user's, or one others may write, would run their
# code (commstack.spack.trust, as for an env); each path goes into develop.yaml as a quoted YAML string.
sources_checked() {
  "$SPACK_PYTHON" -c 'import sys; from commstack.spack.trust import check_tree; from pathlib import Path
try:
    for tree in sys.argv[1:]: check_tree(Path(tree), "ci/build-stack.sh --sources")
except Exception as e: sys.exit(f"ci/build-stack.sh: {e}")' "$@"
}
yaml_string() { "$SPACK_PYTHON" -c 'import json, sys; print(json.dumps(sys.argv[1]))' "$1"; }

# tree | spack spec (exact version) | submodule that must be present | step a release tarball has had
STACK=(
  "ompi|openmpi@=5.0.8|config/oac|perl autogen.pl --no-3rdparty hwloc,libevent,pmix,prrte"  # the env's own hwloc, libevent, PMIx, PRRTE
  "pmix|pmix@=5.0.8|config/oac|./autogen.pl"
  "prrte|prrte@=3.0.11|config/oac|./autogen.pl"
  "hwloc|hwloc@=2.12.2||./autogen.sh"
  "libfabric|libfabric@=1.22.0||./autogen.sh"
  "ucx|ucx@=1.19.0||./autogen.sh"
  "gdrcopy|gdrcopy@=2.5.1||"
  "osu|osu-micro-benchmarks@=7.5.1||"        # the release tree (configure included)
  "nccl-tests|nccl-tests@=2.17.1||"
  "aws-ofi-nccl|aws-ofi-nccl@=1.17.1||./autogen.sh"
)

# A git tag carries its pre-release suffix (VERSION's greek=rc3, a1); make_dist_tarball empties it,
# or the built Open MPI calls itself 5.0.8rc3.
strip_greek() {
  [ -f "$1/VERSION" ] && grep -q '^greek=.' "$1/VERSION" && sed -i 's/^greek=.*/greek=/' "$1/VERSION"
  return 0
}

prepare() {
  local tree spec submodule step dir
  sources_checked "$sources"
  : >.spack/develop.yaml.new
  echo "develop:   # ci/build-stack.sh --sources" >>.spack/develop.yaml.new
  for row in "${STACK[@]}"; do
    IFS='|' read -r tree spec submodule step <<<"$row"
    dir=$sources/$tree
    [ -d "$dir" ] || { echo "ci/build-stack.sh: no source tree $dir for $spec" >&2; exit 1; }
    if [ -n "$submodule" ] && [ -z "$(ls -A "$dir/$submodule" 2>/dev/null)" ]; then
      echo "ci/build-stack.sh: $dir/$submodule is empty: put the git submodule's commit there (docs/building.md)" >&2
      exit 1
    fi
    strip_greek "$dir"
    if [ -n "$step" ] && [ ! -x "$dir/configure" ]; then
      echo "ci/build-stack.sh: $tree: $step"
      (cd "$dir" && $step) >"$dir/.autogen.log" 2>&1 || { echo "ci/build-stack.sh: $tree: '$step' failed, see $dir/.autogen.log" >&2; exit 1; }
    fi
    printf '  %s:\n    spec: %s\n    path: %s\n' "${spec%%@*}" "$spec" "$(yaml_string "$dir")" >>.spack/develop.yaml.new
  done
  mv .spack/develop.yaml.new .spack/develop.yaml
}

mkdir -p .spack
if [ -n "$sources" ]; then
  prepare
else
  rm -f .spack/develop.yaml   # no develop trees: Spack fetches and checks every archive
fi
((prepare_only)) && exit 0
"$spack" -e "envs/$env" concretize --force
exec "$spack" -e "envs/$env" install -j "$jobs" "$@"
