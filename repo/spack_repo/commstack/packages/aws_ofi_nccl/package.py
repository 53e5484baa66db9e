# commstack: builtin aws-ofi-nccl, with the choice of how libcudart is linked.
from spack_repo.builtin.packages.aws_ofi_nccl.package import AwsOfiNccl as BuiltinAwsOfiNccl

from spack.package import *


class AwsOfiNccl(BuiltinAwsOfiNccl):
    """NCCL's libfabric plugin (builtin recipe)."""

    # configure links libcudart_static.a unless told otherwise ("requires either CUDA or Neuron
    # runtime" without it); a toolkit with only libcudart.so (ci/cuda-wheels.py) needs dynamic.
    variant(
        "cudart",
        default="static",
        values=("static", "dynamic"),
        description="how libcudart is linked",
    )

    def configure_args(self):
        args = super().configure_args()
        if self.spec.satisfies("cudart=dynamic"):
            args.append("--enable-cudart-dynamic")
        return args
