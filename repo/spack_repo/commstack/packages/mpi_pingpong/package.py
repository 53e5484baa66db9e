# commstack: our own ping-pong (src/mpi-pingpong), after OLCF's (seed 003). Not in builtin.
import os

from spack_repo.builtin.build_systems.makefile import MakefilePackage

from spack.package import *

#: this recipe's own checkout: the sources are fetched from its git history, pinned by commit
COMMSTACK = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 5))


class MpiPingpong(MakefilePackage):
    """MPI ping-pong between two ranks: host buffers, CUDA buffers staged through the host, or
    CUDA buffers handed to a CUDA-aware MPI; every size is checked for correct data."""

    homepage = "https://www.olcf.ornl.gov/tutorials/"  # seed 003's description
    git = f"file://{COMMSTACK}"

    version("1.2", commit="e6ca069bb2d44dce5f92db7fda1a2acf4b26e1b6")  # measured as osu_latency
    version("1.1", commit="6db5240f3875fb1e4977f07ae56866384563234c")  # one page-aligned buffer
    version("1.0", commit="2773eb47f778b608f29b97054194c48f178edacf")

    variant("cuda", default=False, description="staged and cuda-aware modes (cudart only)")

    depends_on("c", type="build")
    depends_on("mpi")
    depends_on("cuda", when="+cuda")

    build_directory = "src/mpi-pingpong"

    @property
    def build_targets(self):
        targets = [f"MPICC={self.spec['mpi'].mpicc}"]
        if self.spec.satisfies("+cuda"):
            targets += ["CUDA=1", f"CUDA_HOME={self.spec['cuda'].prefix}"]
        return targets

    @property
    def install_targets(self):
        return ["install", f"PREFIX={self.prefix}", *self.build_targets]
