"""The embedded Slurm a run starts where no cluster answers, and the client side of any Slurm (its modules:
docs/architecture.md).
"""
