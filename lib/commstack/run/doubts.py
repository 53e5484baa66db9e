"""What makes a step's figures doubtful, as warnings in its record (the terminal and the report show them): this
machine's load while it ran (load average, less the step's own ranks here; steal, /proc/stat) and a figure FAR_OFF
times off the same step's own history (docs/harness.md#what-run-and-suite-print)."""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path
from typing import Iterator

from commstack.results import history
from commstack.results.records import Record
from commstack.slurm import namespaces

BUSY_LOAD = 1.0    # runnable tasks per CPU, 1-minute load average
BUSY_STEAL = 0.10  # share of all CPU time


def load1() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:  # no load average here
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
    """record.machine: the load average of others than the step (others_load) and the steal share over the step; a
    busy machine, and each size far off the step's history, add a warning to the record."""
    before, load_before = cpu_times(), load1()
    try:
        yield
    finally:
        after, load_after = cpu_times(), load1()
        machine: dict = {"cpus": os.cpu_count() or 1}
        own = ranks_here(record)
        load = others_load(load_before, load_after, own)
        if load is not None:
            machine["load1"] = load
        if own:
            machine["ranks_here"] = own
        if before and after and after[1] > before[1]:
            machine["steal"] = round((after[0] - before[0]) / (after[1] - before[1]), 4)
        record.machine = machine
        note = busy(machine) if record.repeats else None  # a step that took no figure has none to doubt
        record.warnings += ([note] if note else []) + history.far_off(record, run_dir)


def ranks_here(record: Record) -> int:
    """How many of the step's ranks ran on this machine's CPUs: their share on those of its nodes that are this
    host (local) or a network namespace on it (local-multinode); none on a cluster's compute nodes."""
    ntasks, nodes = record.tags.get("ntasks"), record.nodelist
    if type(ntasks) is not int or not nodes:
        return 0
    host = socket.gethostname().split(".")[0]
    here = sum(n == host or Path("/run/netns", namespaces.netns(n)).exists() for n in nodes)
    return -(-ntasks * here // len(nodes))


def others_load(before: float | None, after: float | None, own: int) -> float | None:
    """The 1-minute load average of what is not the step: the higher of its start's and its end's less its `own`
    ranks on this machine (at most as many as the end's load: a short step has not raised it that much)."""
    loads = [x for x in (before, None if after is None else max(0.0, after - own)) if x is not None]
    return round(max(loads), 2) if loads else None


def busy(machine: dict) -> str | None:
    """The warning for a step whose machine was busy, or None."""
    load, cpus, steal = machine.get("load1"), machine.get("cpus", 1), machine.get("steal", 0.0)
    why = ([f"load average {load:.1f} on {cpus} CPUs"] if load is not None and load > BUSY_LOAD * cpus else []) \
        + ([f"{steal:.0%} of CPU time stolen"] if steal > BUSY_STEAL else [])
    return f"taken on a busy machine ({', '.join(why)}): its figures may be off" if why else None
