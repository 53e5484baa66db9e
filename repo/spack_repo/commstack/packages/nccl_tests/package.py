# commstack: builtin nccl-tests, plus the version of the CSCS nccl-tests image (seed 002).
from spack_repo.builtin.packages.nccl_tests.package import NcclTests as BuiltinNcclTests

from spack.package import *


class NcclTests(BuiltinNcclTests):
    """NCCL tests (builtin recipe) up to 2.17.1, as in the CSCS nccl-tests image."""

    # builtin v2025.11.0 stops at 2.16.3; GitHub archive of tag v2.17.1, commit 9a5c15461abc
    version("2.17.1", sha256="ba04264e080e25bc54ca8e529cb0c7429f78e60ad2b04d9fe5104700a3c44072")

    # The seed's plain `make` builds SASS for every arch nvcc knows (slow, large binaries);
    # builtin already passes NVCC_GENCODE for cuda_arch, so require one: sm_90 on GH200.
    conflicts("cuda_arch=none", msg="nccl-tests: set cuda_arch (90 on GH200)")
