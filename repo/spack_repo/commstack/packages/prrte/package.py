# commstack: builtin prrte, finding a system libevent where Debian and Ubuntu keep it.
from spack_repo.builtin.packages.prrte.package import Prrte as BuiltinPrrte


class Prrte(BuiltinPrrte):
    """PRRTE (builtin recipe)."""

    def configure_args(self):
        args = super().configure_args()
        # as for pmix's zlib: an external libevent in /usr/lib/<multiarch> is not found from
        # --with-libevent=/usr alone ("libevent library (event_core) in /usr ... not found")
        if self.spec["libevent"].external:
            args.append(f"--with-libevent-libdir={self.spec['libevent'].libs.directories[0]}")
        return args
