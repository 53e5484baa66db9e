"""The embedded Slurm a run starts where no cluster answers, and the client side of any Slurm.

  cluster     LocalSlurm: a real Slurm run from a private directory of ours, started, shared and stopped
  config      its files: private directory, ports, slurm.conf, munge key, TaskEpilog
  leases      who uses it: one lease per user, and the lock of start and stop
  namespaces  the nodes of the multi-node cluster: network namespaces on a bridge
  procs       processes on this host: which are ours, how they end, a step's leftovers swept
  clients     which Slurm a run uses (--slurm), and Slurm's clients bounded in time
  __main__    `python -m commstack.slurm task-epilog`: slurmstepd's TaskEpilog
"""
