# commstack: builtin cuda, with `libs` answerable before CUDA is installed.
from spack_repo.builtin.packages.cuda.package import Cuda as BuiltinCuda

from spack.package import *


class Cuda(BuiltinCuda):
    """CUDA toolkit (builtin recipe; libs known before install)."""

    @property
    def libs(self):
        # Builtin searches the prefix for libcudart, so before an install the list is empty and
        # dependents that read libs.directories[0] at configure time (openmpi@5 +cuda) raise
        # IndexError: their arguments can't be inspected on a login node or in CI. The runfile
        # installs libcudart in lib64 on x86_64 and sbsa alike (lib64 -> targets/<arch>/lib).
        found = super().libs
        if found or self.spec.external:
            return found
        return LibraryList([join_path(self.prefix.lib64, "libcudart.so")])
