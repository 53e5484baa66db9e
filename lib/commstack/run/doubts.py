"""What makes a step's figures doubtful, as warnings in its record (the terminal and the report show them):
this machine's load while it ran (the load average, and the CPU time the hypervisor gave to others: steal,
/proc/stat), and a figure FAR_OFF times off the same step's own history, with references or without.

Busy: more runnable tasks than CPUs (the benchmark's ranks wait for a CPU), or more than BUSY_STEAL of the
CPU time stolen. Measured on the host that runs commstack, which is the node for the local systems; on a
cluster it tells only about the login or batch host."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator

from commstack.results import history
from commstack.results.records import Record

BUSY_LOAD = 1.0    # runnable tasks per CPU, 1-minute load average
BUSY_STEAL = 0.10  # share of all CPU time


def load1() -> float | None:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def cpu_times() -> tuple[int, int] | None:
    """(steal, total) jiffies of all CPUs since boot, from /proc/stat's first line."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    # user nice system idle iowait irq softirq steal guest guest_nice: guest time is in user already
    return (fields[7] if len(fields) > 7 else 0), sum(fields[:8])


@contextlib.contextmanager
def checked(record: Record, run_dir: Path) -> Iterator[None]:
    """record.machine: the load average (the higher of the step's start and end) and the steal share over
    the step; a busy machine, and each size far off the step's history, add a warning to the record."""
    before, load_before = cpu_times(), load1()
    try:
        yield
    finally:
        after, load_after = cpu_times(), load1()
        cpus = os.cpu_count() or 1
        machine: dict = {"cpus": cpus}
        loads = [x for x in (load_before, load_after) if x is not None]
        if loads:
            machine["load1"] = max(loads)
        if before and after and after[1] > before[1]:
            machine["steal"] = round((after[0] - before[0]) / (after[1] - before[1]), 4)
        record.machine = machine
        note = busy(machine) if record.repeats else None  # a step that took no figure has none to doubt
        record.warnings += ([note] if note else []) + history.far_off(record, run_dir)


def busy(machine: dict) -> str | None:
    """The warning for a step whose machine was busy, or None."""
    load, cpus, steal = machine.get("load1"), machine.get("cpus", 1), machine.get("steal", 0.0)
    why = ([f"load average {load:.1f} on {cpus} CPUs"] if load is not None and load > BUSY_LOAD * cpus else []) \
        + ([f"{steal:.0%} of CPU time stolen"] if steal > BUSY_STEAL else [])
    return f"taken on a busy machine ({', '.join(why)}): its figures may be off" if why else None
