#!/usr/bin/env bash
# On the site's runner (a node of the env's kind: an Alps login node for alps-login or gh200-cray):
# the pinned Spack, the binary cache, the externals checked, then the env installed.
#   ci/site-install.sh ENV     ENV: alps-login or gh200-cray (their committed spack.lock is installed);
#                              gh200-ompi is the images' userland (Ubuntu 24.04), never a login node
# COMMSTACK_BUILDCACHE_MODE (read|push, set by the pipeline's rules): see ci/buildcache.sh.
set -euo pipefail
env=${1:?usage: ci/site-install.sh ENV}
cd "$(dirname "$0")/.."
bin/commstack setup ${COMMSTACK_SETUP_ARGS:-}   # e.g. --packages /mirror/spack-packages offline
spack=${SPACK_ROOT:-$PWD/.spack/spack}/bin/spack
export SPACK_PYTHON=${SPACK_PYTHON:-${COMMSTACK_VENV:-$PWD/.venv}/bin/python}   # clingo from the venv
ci/buildcache.sh "${COMMSTACK_BUILDCACHE_MODE:-read}"
# before a long build: this host runs the env's target (plain Spack does not check), and every
# external the env names exists here, at the version it claims
"${SPACK_PYTHON}" ci/check-host.py "$env"
bin/commstack preflight "$env"
"$spack" -e "envs/$env" install --fail-fast
if [ "${COMMSTACK_BUILDCACHE_MODE:-read}" = push ] && [ -n "${COMMSTACK_BUILDCACHE:-}" ]; then
  # what autopush skipped (already installed before this job) and the index readers search
  "$spack" -e "envs/$env" buildcache push --unsigned --update-index commstack-ci
fi
