#!/usr/bin/env bash
# CI's spack tier: the pinned Spack (bin/commstack setup: toolchain.yaml, or SPACK_ROOT), then
#   ci/spack-tier.sh              the whole spack tier: bin/commstack test -m spack
#   ci/spack-tier.sh ENV...       the concretization matrix: each ENV alone (ci/concretize.py), so
#                                 one job per env fails by itself; the locked ones against their lock
# COMMSTACK_SETUP_ARGS: set-up options for runners without GitHub (--spack-source, --packages).
# COMMSTACK_SPACK_OPTIONAL=1 (GitHub's hosted runners): when the set-up fails, say so and go on;
# the spack tier then skips with its reason, as on any machine without Spack.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! bin/commstack setup ${COMMSTACK_SETUP_ARGS:-}; then
  [ "${COMMSTACK_SPACK_OPTIONAL:-0}" = 1 ] || exit 1
  echo "ci/spack-tier.sh: SKIPPED: bin/commstack setup failed (above); the spack tier skips without Spack"
  (($#)) && exit 0
fi
if (($#)); then
  exec "${COMMSTACK_VENV:-$PWD/.venv}/bin/python" ci/concretize.py "$@"
fi
exec bin/commstack test -m spack
