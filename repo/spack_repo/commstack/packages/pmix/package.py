# commstack: builtin pmix, finding a system zlib where Debian and Ubuntu keep it.
from spack_repo.builtin.packages.pmix.package import Pmix as BuiltinPmix


class Pmix(BuiltinPmix):
    """PMIx (builtin recipe)."""

    def configure_args(self):
        args = super().configure_args()
        # builtin passes --with-zlib=/usr for an external zlib, and configure looks only in
        # /usr/lib and /usr/lib64: "zlib library (z) in /usr ... not found" on Debian/Ubuntu,
        # which keep it in /usr/lib/<multiarch>. Give the directory the library is in.
        if self.spec["zlib-api"].external:
            args.append(f"--with-zlib-libdir={self.spec['zlib-api'].libs.directories[0]}")
        return args
