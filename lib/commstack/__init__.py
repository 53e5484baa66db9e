"""commstack: the HPC communication stack as Spack environments, and the harness that runs its
benchmarks under Slurm and judges them. docs/architecture.md maps the modules."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("commstack")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"
