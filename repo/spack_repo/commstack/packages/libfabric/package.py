# commstack: builtin libfabric, configured as the CSCS comm-fwk image (seed 000) configures it.
from spack_repo.builtin.packages.libfabric.package import Libfabric as BuiltinLibfabric


class Libfabric(BuiltinLibfabric):
    """libfabric (builtin recipe), loading CUDA and GDRCopy at run time as seed 000's build."""

    def configure_args(self):
        args = super().configure_args()
        # builtin's bare --with-cuda links libcuda and NVML at build time: configure fails where
        # no driver is installed ("CUDA runtime not available"), e.g. any login node or CI runner.
        # Seed 000 (and Cray's build) dlopen them on the GPU node instead.
        if self.spec.satisfies("+cuda"):
            args.append("--enable-cuda-dlopen")
        if self.spec.satisfies("+gdrcopy"):
            args.append("--enable-gdrcopy-dlopen")  # seed 000: --enable-gdrcopy-dlopen
        return args
