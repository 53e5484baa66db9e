"""Why a step did not run to its end: what srun and the program left (exit status, stderr, the clock)
to the named LaunchError that says it. The launcher raises it as the step ends; a batch job's saved
steps are classified the same way afterwards.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from commstack.errors import NodeFailureError, SrunError, StepCrashedError, StepTimeoutError, cut

if TYPE_CHECKING:
    from commstack.run.launch import StepResult

NODE_FAILURE = re.compile(r"node failure|NODE_FAIL|DUE TO NODE FAILURE|Node .* not responding|"
                          r"Communication connection failure", re.I)
SRUN_REFUSED = re.compile(r"srun: error: (Unable to (allocate|create step)|invalid|Invalid|.*not available|"
                          r"Requested node configuration is not available|.*unrecognized option)|"
                          r"srun: unrecognized option|srun: fatal:")
# srun may exit 0 when the step never started on a node
NOT_LAUNCHED = re.compile(r"srun: error: task \d+ launch failed|aborted before step completely launched")
SIGNALLED = re.compile(r"task \d+: (Killed|Segmentation fault|Aborted|Bus error|Terminated)|"
                       r"exited on signal|signal \d+")


def classify(r: StepResult, timed_out: bool) -> None:
    """The named LaunchError of a step that did not run to its end, or nothing (a batch job's
    saved steps are classified the same way)."""
    name, raw = r.step.name, str(r.outdir)
    if timed_out:
        raise StepTimeoutError(f"{name}: step timed out after {r.step.timeout_s} s", raw)
    if NODE_FAILURE.search(r.stderr):
        raise NodeFailureError(f"{name}: node failure reported by srun: {_first(NODE_FAILURE, r.stderr)}", raw)
    if NOT_LAUNCHED.search(r.stderr):
        raise SrunError(f"{name}: the step did not launch: {_first(NOT_LAUNCHED, r.stderr)}", raw)
    if r.returncode == 0:
        return
    if SRUN_REFUSED.search(r.stderr) and not r.stdout.strip():
        raise SrunError(f"{name}: srun refused the step: {_first(SRUN_REFUSED, r.stderr)}", raw)
    if r.returncode < 0 or SIGNALLED.search(r.stderr):
        raise StepCrashedError(f"{name}: killed by a signal (exit {r.returncode}): "
                               f"{_first(SIGNALLED, r.stderr) or ''}", raw)
    raise StepCrashedError(f"{name}: exit status {r.returncode}; last stderr line: "
                           f"{cut((r.stderr.strip().splitlines() or [''])[-1])!r}", raw)


def _first(pattern: re.Pattern, text: str) -> str:
    for line in text.splitlines():
        if pattern.search(line):
            return cut(line.strip())
    return ""
