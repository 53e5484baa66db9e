"""ReFrame configuration for perf/run_overhead.py on the local Slurm (SLURM_CONF set by the script).

Partition `salloc`: the local scheduler, tests run as srun steps of the allocation ReFrame runs in.
Partition `batch`: one Slurm batch job per test (squeue: the local Slurm keeps no accounting for sacct).
"""

site_configuration = {
    "systems": [{
        "name": "local",
        "descr": "commstack's embedded single-node Slurm",
        "hostnames": [".*"],
        "partitions": [
            {"name": "salloc", "scheduler": "local", "launcher": "srun", "environs": ["builtin"]},
            {"name": "batch", "scheduler": "squeue", "launcher": "srun", "environs": ["builtin"],
             "access": ["--overcommit"]},
        ],
    }],
    "environments": [{"name": "builtin"}],
    "logging": [{
        "handlers": [{"type": "stream", "name": "stdout", "level": "info", "format": "%(message)s"}],
        "handlers_perflog": [],
    }],
}
