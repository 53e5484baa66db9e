#!/usr/bin/env bash
# The binary cache for Spack installs in CI: ci/buildcache.sh read|push
#   read  (merge requests, other branches): installs take binaries from the cache, push nothing
#   push  (default-branch pipelines only): --autopush pushes each package as soon as it is
#         installed, so a build that fails half-way still caches what it finished
# The URL is the CI variable COMMSTACK_BUILDCACHE: never in the repository, so every site and
# fork points at its own; unset, there is no cache. file:// (a filesystem the runners share) or
# oci:// (a registry; COMMSTACK_BUILDCACHE_USER and COMMSTACK_BUILDCACHE_TOKEN, protected CI
# variables, name its credentials: Spack reads them from the environment, they are never written).
# Unsigned: runners hold no signing key; the cache is trusted as its storage is.
set -euo pipefail
mode=${1:?usage: ci/buildcache.sh read|push}
top=$(cd "$(dirname "$0")/.." && pwd)
url=${COMMSTACK_BUILDCACHE:-}
if [ -z "$url" ]; then
  echo "ci/buildcache.sh: COMMSTACK_BUILDCACHE is not set: no binary cache"
  exit 0
fi
spack=${SPACK_ROOT:-$top/.spack/spack}/bin/spack   # as bin/commstack setup left it
export SPACK_PYTHON=${SPACK_PYTHON:-${COMMSTACK_VENV:-$top/.venv}/bin/python}
# the user scope, named: by default Spack writes to the first scope that exists, which on a fresh
# runner is $SPACK_ROOT/etc/spack (a cached clone, or the site's Spack). CI sets
# SPACK_USER_CONFIG_PATH inside the checkout, so a shell runner's own ~/.spack is left alone.
mkdir -p "${SPACK_USER_CONFIG_PATH:-$HOME/.spack}"
"$spack" mirror remove --scope user commstack-ci >/dev/null 2>&1 || true   # an earlier job's
opts=(--scope user --type binary --unsigned)
if [[ $url == oci://* && -n ${COMMSTACK_BUILDCACHE_TOKEN:-} ]]; then
  opts+=(--oci-username-variable COMMSTACK_BUILDCACHE_USER --oci-password-variable COMMSTACK_BUILDCACHE_TOKEN)
fi
case $mode in
  read) "$spack" mirror add "${opts[@]}" commstack-ci "$url" ;;
  push) "$spack" mirror add "${opts[@]}" --autopush commstack-ci "$url" ;;
  *) echo "ci/buildcache.sh: mode must be read or push, not $mode" >&2; exit 2 ;;
esac
echo "ci/buildcache.sh: binary cache commstack-ci ($mode): $url"
