# commstack: builtin osu-micro-benchmarks, linked as the CSCS osu-mb image (seed 000) links it.
from spack_repo.builtin.packages.osu_micro_benchmarks.package import (
    OsuMicroBenchmarks as BuiltinOsuMicroBenchmarks,
)

from spack.package import *


class OsuMicroBenchmarks(BuiltinOsuMicroBenchmarks):
    """OSU micro-benchmarks (builtin recipe), CUDA-linked as in the CSCS osu-mb image."""

    # --enable-cuda compiles util/kernel.cu (device-side validation and the overlap kernels of
    # non-blocking collectives) with nvcc; --enable-cuda=basic (seed 004's example) builds every
    # `-d cuda` benchmark without it, so a toolkit without nvcc (ci/cuda-wheels.py) can build it.
    variant("cuda_kernels", default=True, when="+cuda", description="CUDA kernels (need nvcc)")
    # CUDA 13's cudaMemPrefetchAsync takes a cudaMemLocation and flags: OSU 7.5.1's one call,
    # to build against it
    patch("cuda13-prefetch.patch", when="@7.5.1 +cuda ^cuda@13:")

    def configure_args(self):
        args = super().configure_args()
        if self.spec.satisfies("+cuda"):
            cuda = self.spec["cuda"].prefix
            # Seed 000 configures --with-cuda-include/--with-cuda-libpath and links
            # -lcuda -lnvidia-ml. Spack clears LIBRARY_PATH, so both must be found in the CUDA
            # stubs explicitly (spack-packages issue 2766); -L only, never an rpath: at run time
            # the driver's libcuda.so.1 is the one to load.
            args += [
                f"--with-cuda-include={cuda.include}",
                f"--with-cuda-libpath={cuda.lib64}",
                f"LDFLAGS=-lrt -L{join_path(cuda.lib64, 'stubs')}",
                "LIBS=-lcuda -lnvidia-ml",
            ]
            args = [a for a in args if a != "LDFLAGS=-lrt"]  # replaced by the line above
            if self.spec.satisfies("~cuda_kernels"):
                args = ["--enable-cuda=basic" if a == "--enable-cuda" else a for a in args]
        return args
