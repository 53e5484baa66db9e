# commstack: builtin gdrcopy, with a library-only build.
from spack_repo.builtin.packages.gdrcopy.package import Gdrcopy as BuiltinGdrcopy

from spack.package import *


class Gdrcopy(BuiltinGdrcopy):
    """GDRCopy (builtin recipe); its test programs optional."""

    # builtin always builds the test programs (gdrcopy_sanity, _copybw...), whose .cu files need
    # nvcc: a toolkit without one (ci/cuda-wheels.py) can build the library that UCX and
    # libfabric load, and nothing else.
    variant("exes", default=True, description="the test programs (gdrcopy_copybw, ...): need nvcc")

    def build(self, spec, prefix):
        make("lib")
        if spec.satisfies("+exes"):
            make("exes")

    def install(self, spec, prefix):
        mkdir(prefix.include)
        mkdir(prefix.lib64)
        make("lib_install", f"prefix={prefix}")
        if spec.satisfies("+exes"):
            make("exes_install", f"prefix={prefix}")
