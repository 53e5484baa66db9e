"""slurmstepd's TaskEpilog, and the reaper a step's program runs under (commstack.slurm.procs); usage below."""

import sys

from commstack.slurm.procs import reap, task_epilog

if sys.argv[1:] == ["task-epilog"]:
    task_epilog()
elif sys.argv[1:3] == ["reap", "--"] and len(sys.argv) > 3:
    sys.exit(reap(sys.argv[3:]))
else:
    sys.exit("usage: python -m commstack.slurm task-epilog (slurmstepd's TaskEpilog) | reap -- PROGRAM ARGS...")
