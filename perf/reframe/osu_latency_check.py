"""The ReFrame side of perf/run_overhead.py: the same step commstack runs, as N ReFrame tests.

osu_latency -m 8:8 on 2 ranks, launched as `srun --mpi=pmix -n2 --overcommit ...` like commstack's
local system does, with a sanity check on the table and the 8-byte latency as its performance.
OSU_PREFIX and RFM_OVERHEAD_TESTS come from the environment (perf/run_overhead.py sets both).
"""

import os

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, performance_function, run_before, sanity_function


@rfm.simple_test
class OsuLatencyOverhead(rfm.RunOnlyRegressionTest):
    index = parameter(range(int(os.environ.get("RFM_OVERHEAD_TESTS", "20"))))
    valid_systems = ["*"]
    valid_prog_environs = ["*"]
    executable = os.path.join(os.environ.get("OSU_PREFIX", "/opt/omb72"),
                              "libexec/osu-micro-benchmarks/mpi/pt2pt/osu_latency")
    executable_opts = ["-m", "8:8"]
    num_tasks = 2

    @run_before("run")
    def srun_options(self):
        self.job.launcher.options = ["--mpi=pmix", "-n2", "--overcommit"]

    @sanity_function
    def table(self):
        return sn.assert_found(r"^8\s+\d+\.\d+", self.stdout)

    @performance_function("us")
    def latency(self):
        return sn.extractsingle(r"^8\s+(\S+)", self.stdout, 1, float)
