# commstack: builtin cray-mpich, GPU-aware for its dependents (after LLNL benchpark's subclass).
import os

from spack_repo.builtin.packages.cray_mpich.package import CrayMpich as BuiltinCrayMpich

from spack.package import *


class CrayMpich(BuiltinCrayMpich):
    """Cray MPICH (builtin recipe); with +cuda, dependents link the GPU Transport Layer."""

    @property
    def gtl_lib(self):
        # Builtin searches the PE tree for libmpi_gtl_cuda, so where the PE is not installed (CI,
        # a lock made elsewhere) it raises. The PE lays it out as <mpich>/gtl/lib next to
        # <mpich>/ofi/<compiler>/<version> (the prefix): the same flags without the search.
        if os.path.isdir(self.prefix) or not self.spec.satisfies("+cuda cuda_arch=*"):
            return super().gtl_lib
        mpich = os.path.abspath(join_path(self.prefix, os.pardir, os.pardir, os.pardir))
        gtl = join_path(mpich, "gtl", "lib")
        return {"ldflags": [f"-L{gtl}", f"-Wl,-rpath,{gtl}"], "ldlibs": ["-lmpi_gtl_cuda"]}

    def setup_dependent_build_environment(self, env, dependent_spec):
        super().setup_dependent_build_environment(env, dependent_spec)
        # The Cray compiler wrappers (cc, CC) add the GTL when a GPU target module is loaded;
        # mpicc does not, and without it MPICH_GPU_SUPPORT_ENABLED=1 aborts at MPI_Init. Every
        # link of a dependent gets it through Spack's compiler wrapper.
        gtl = self.gtl_lib
        if gtl:
            env.append_flags("SPACK_LDFLAGS", " ".join(gtl["ldflags"]))
            env.append_flags("SPACK_LDLIBS", " ".join(gtl["ldlibs"]))

    def setup_run_environment(self, env):
        super().setup_run_environment(env)
        if self.spec.satisfies("+cuda"):
            env.set("MPICH_GPU_SUPPORT_ENABLED", "1")  # device buffers through the GTL
