"""`python -m commstack.slurm task-epilog`: slurmstepd's TaskEpilog (commstack.slurm.procs.task_epilog)."""

import sys

from commstack.slurm.procs import task_epilog

if sys.argv[1:] == ["task-epilog"]:
    task_epilog()
else:
    sys.exit("usage: python -m commstack.slurm task-epilog (slurmstepd's TaskEpilog)")
