# commstack: builtin cuda, with `libs` answerable before CUDA is installed.
from spack_repo.builtin.packages.cuda.package import Cuda as BuiltinCuda

from spack.package import *


class Cuda(BuiltinCuda):
    """CUDA toolkit (builtin recipe; libs known before install, or where the external is gone)."""

    @property
    def libs(self):
        # Builtin searches the prefix for libcudart, so before an install the list is empty and
        # dependents that read libs.directories[0] at configure time (openmpi@5 +cuda) raise
        # IndexError: their arguments can't be inspected on a login node or in CI. The runfile
        # installs libcudart in lib64 on x86_64 and sbsa alike (lib64 -> targets/<arch>/lib).
        # An external is not here either when the lock is made elsewhere (the image's CUDA).
        found = super().libs
        if found:
            return found
        return LibraryList([join_path(self.prefix.lib64, "libcudart.so")])
