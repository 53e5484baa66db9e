"""The upper bounds of a suite's steps, checked by its schema (commstack.config; docs/harness.md)."""

#: ranks one step may put on one node (a GH200 node has 288 cores), and a system's cores, GPUs, NICs per node
RANKS_PER_NODE = 1024
#: launches of one step
REPEATS = 1000
#: seconds one launch may take: a day, a batch job's usual limit
TIMEOUT_S = 86400
#: nodes one screen may plan for or run on: four times the largest machines' (Frontier: 9,408), and where
#: `screen --plan` still answers in seconds
NODES = 65536
#: concrete steps one suite may expand to on any system: each is a record, an entry of plan.json and a test item;
#: 5000 keep plan.json (about 0.9 kB a step) far below the 16 MiB a run's own files may be read at
STEPS = 5000
