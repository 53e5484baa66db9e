"""The upper bounds of a suite's steps, and their names one each, checked by its schema (commstack.config;
docs/harness.md)."""

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


def check_steps(steps: list) -> None:
    """ValueError unless each of a suite's steps (config.StepSpec) has a name of its own, and they expand (as
    run.steps.expand does, on any system) to at most STEPS."""
    first: dict[str, int] = {}
    for i, spec in enumerate(steps):
        if first.setdefault(spec.name, i) != i:
            raise ValueError(f"steps {first[spec.name]} and {i} are both named {spec.name!r} (their id, else "
                             "their benchmark): each step's records need a name of their own; give it an `id`")
    most = sum(len(s.memory) * len(s.environments) * len(s.mode or "-") * (s.node_counts["max"].bit_length()
               if isinstance(s.node_counts, dict) else len(s.node_counts or "-")) for s in steps)
    if most > STEPS:
        raise ValueError(f"the steps expand to up to {most} steps; a suite may have at most {STEPS} "
                         "(split it into several suites)")
