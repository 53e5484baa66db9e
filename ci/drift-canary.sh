#!/usr/bin/env bash
# Drift canary (scheduled; reports, never gates): concretize every env against the newest
# spack-packages release instead of the pinned one and print what would change, as
# `bin/commstack lock` prints it: a heads-up for the next pin bump in toolchain.yaml. Exits 0
# whatever the envs do; only a failure to reach the release (network) is an error. Spack stays
# the pinned one. .spack/repos.yaml is put back on exit, so it is safe on a workstation too.
set -euo pipefail
cd "$(dirname "$0")/.."
bin/commstack venv
py=${COMMSTACK_VENV:-$PWD/.venv}/bin/python   # the venv bin/commstack made
pin() { $py -c "import yaml; print(yaml.safe_load(open('toolchain.yaml'))['spack_packages']['$1'])"; }
url=$(pin url)
pinned=$(pin tag)
# release tags are vYYYY.MM.N: the highest version is the newest release (sed reads all: no SIGPIPE)
newest=$(git ls-remote --tags --refs --sort=-version:refname "$url" 'v20*' | sed -n '1s|.*refs/tags/||p')
[ -n "$newest" ] || { echo "drift canary: no release tag at $url" >&2; exit 1; }
echo "drift canary: spack-packages $newest (pinned: $pinned)"
dest=.spack/spack-packages-$newest
[ -d "$dest" ] || git -c advice.detachedHead=false clone -q --depth=1 --branch "$newest" "$url" "$dest"
if [ -f .spack/repos.yaml ]; then
  cp .spack/repos.yaml .spack/repos.yaml.pinned
  trap 'mv .spack/repos.yaml.pinned .spack/repos.yaml' EXIT
else
  trap 'rm -f .spack/repos.yaml' EXIT
fi
# setup uses a given checkout in place: .spack/repos.yaml names the newest builtin until exit
bin/commstack setup --packages "$dest"
$py ci/concretize.py --report-only
