# commstack: builtin openmpi, built as the CSCS ompi image (seed 000) builds Open MPI 5.0.8.
import spack_repo.builtin.packages.openmpi.package as builtin
from spack_repo.builtin.packages.openmpi.package import Openmpi as BuiltinOpenmpi

from spack.package import *


class Openmpi(BuiltinOpenmpi):
    """Open MPI (builtin recipe), CUDA-aware as in the CSCS ompi image."""

    # GPU buffers over UCX need a CUDA-enabled UCX; builtin only asks for ucx (spack-packages
    # PR 2555 adds this after v2025.11.0).
    depends_on("ucx +cuda", when="+cuda fabrics=ucx")

    @classmethod
    def determine_variants(cls, exes, version):
        # `spack external find openmpi` raises AttributeError ('Spec' object has no attribute
        # 'cc'): builtin's get_spack_compiler_spec uses the pre-1.0 compiler API (still so on
        # spack-packages develop, 2026-06). An external needs no %compiler in Spack 1.x: skip it.
        lookup, builtin.get_spack_compiler_spec = builtin.get_spack_compiler_spec, lambda _: None
        try:
            return super().determine_variants(exes, version)
        finally:
            builtin.get_spack_compiler_spec = lookup

    def configure_args(self):
        args = super().configure_args()
        if self.spec.satisfies("+cuda"):
            # Seed 000: --with-cuda-libdir=<cuda>/lib64/stubs, so configure and the link find
            # libcuda.so on login nodes without a GPU driver. Builtin derives it from wherever
            # libcudart was found (targets/<arch>/lib on sbsa); the prefix's lib64 is stable.
            stubs = join_path(self.spec["cuda"].prefix, "lib64", "stubs")
            args = [a for a in args if not a.startswith("--with-cuda-libdir=")]
            args.append(f"--with-cuda-libdir={stubs}")
        if self.spec.satisfies("^libevent") and self.spec["libevent"].external:
            # as in our prrte: configure looks for an external libevent in /usr/lib and /usr/lib64
            # only, Debian/Ubuntu keep it in /usr/lib/<multiarch> ("External libevent requested
            # but not found", found by x86-ompi's first build)
            args.append(f"--with-libevent-libdir={self.spec['libevent'].libs.directories[0]}")
        return args
