"""Many checks at once inside one allocation, each an srun step on its own named nodes (`--nodelist`, `--exact`),
at most `max_steps` at a time: this module is their executor for run.lifecycle, as runner is a suite's
(docs/screen.md#one-allocation-no-job-per-node; Ctrl-C: docs/screen.md#bad-input-and-faults).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import queue
import re
import sys
import threading
import time
from collections.abc import Iterator

from commstack import benchmarks
from commstack.results.records import Record
from commstack.run.launch import Launcher, Step, StepResult
from commstack.run.lifecycle import Executor, Lifecycle, launched_step, launches
from commstack.run.runner import substitute
from commstack.run.steps import SuiteStep


#: what a record's step name may not hold (config.SafeName): a site's node or switch name with such a character
UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


@dataclasses.dataclass
class Placed:
    """One check on named nodes: the expanded suite step (argv with its real binaries), where and when."""

    check: SuiteStep
    hosts: tuple[str, ...]    # in rank order: a one-way check's sender is hosts[its benchmark's sender]
    phase: str
    round: int = 0
    not_run: str | None = None   # why it cannot run there (a node without GPUs, a binary not found)

    @property
    def name(self) -> str:
        """check--node (one node), check--a-b-rN (a pair), check--<phase> (a group): a safe file name."""
        where = "-".join(self.hosts) if len(self.hosts) <= 2 else self.phase.replace(" ", "-")
        name = f"{self.check.id}--{where}" + (f"-r{self.round}" if self.round else "")
        return UNSAFE.sub("_", name)[:180]


@dataclasses.dataclass
class Context:
    steps: Lifecycle         # the screen's records
    launcher: Launcher
    facts: dict[str, dict]   # node -> its stack facts (the per-node phase's probe)
    binaries: dict[str, dict[str, str]]  # check id -> placeholder -> path, resolved once per check


@dataclasses.dataclass
class Placement(Executor):
    """The executor of one placed check (lifecycle.Executor): an srun step on its own nodes."""

    ctx: Context
    p: Placed

    def prepare(self, s: SuiteStep, record: Record) -> tuple[Step, dict]:
        step = launched_step(s, substitute(s.step.argv, self.ctx.binaries.get(self.p.check.id, {})))
        return (dataclasses.replace(step, name=self.p.name, hosts=list(self.p.hosts)),
                {"nodes": {h: self.ctx.facts.get(h, {}) for h in self.p.hosts}})

    def repeats(self, s: SuiteStep, step: Step, record: Record) -> Iterator[StepResult]:
        return launches(self.ctx.launcher, self.ctx.steps.dir, s, step, record, keep_failed=False)


def measure(ctx: Context, p: Placed, index: int) -> Record:
    """One placed check, launched, parsed and judged; its record written. Never raises a CommstackError."""
    tags = {**p.check.tags, "screen_phase": p.phase, "screen_round": p.round, "screen_check": p.check.id}
    sender = benchmarks.get(p.check.benchmark).sender
    if sender is not None and len(p.hosts) == 2:  # a one-way check: the node whose data the figure carries
        tags["screen_from"] = p.hosts[sender]
    return ctx.steps.perform(index, dataclasses.replace(p.check, id=p.name, tags=tags), Placement(ctx, p),
                             p.not_run, p.hosts)


def broken(ctx: Context, index: int, p: Placed) -> Record:
    """The record of a check whose worker died of a bug: failed, named so."""
    return ctx.steps.ended(index, dataclasses.replace(p.check, id=p.name), "commstack screen: internal error",
                           p.hosts, "fail")


class Progress:
    """One line on stderr, rewritten in place on a terminal, else printed when it changes (at most every 5 s):
    phase, steps running, nodes done of N, time left."""

    def __init__(self, total_nodes: int, stream=None):
        self.total, self.stream, self.last, self.at = total_nodes, stream or sys.stderr, "", 0.0

    def show(self, phase: str, running: int, done_nodes: int, left_s: float | None) -> None:
        left = f", ~{left_s:.0f} s left" if left_s is not None else ""
        line = f"screen: {phase}: {running} step{'s' if running != 1 else ''} running, {done_nodes}/{self.total} " \
               f"nodes done{left}"
        tty = self.stream.isatty()
        if line == self.last or (not tty and time.monotonic() - self.at < 5):
            return
        self.last, self.at = line, time.monotonic()
        print(("\r\033[K" if tty else "") + line, end="" if tty else "\n", file=self.stream, flush=True)

    def end(self) -> None:
        if self.stream.isatty() and self.last:
            print(file=self.stream, flush=True)
        self.last = ""


def held(p: Placed) -> set[str]:
    """The nodes a placed check holds while it runs: none for one that is not run (it launches nothing)."""
    return set() if p.not_run else set(p.hosts)


def run_all(ctx: Context, placed: list[Placed], phase: str, max_steps: int, progress: Progress,
            first_index: int = 0) -> list[Record]:
    """Every placed check, each as soon as its nodes are free, at most max_steps at once; the records in the
    order given. KeyboardInterrupt: the running steps cancelled and awaited, the rest recorded not-run,
    then raised again with the records so far in `partial` (the exception's attribute)."""
    pending = list(enumerate(placed))
    records: dict[int, Record] = {}
    busy: set[str] = set()
    running: dict[int, threading.Thread] = {}
    done: queue.Queue[tuple[int, Record]] = queue.Queue()
    nodes_of = collections.Counter(h for p in placed for h in p.hosts)
    took: list[float] = []

    def worker(i: int, p: Placed) -> None:
        t0 = time.monotonic()
        try:
            rec = measure(ctx, p, first_index + i)
        finally:  # whatever happened, the main loop hears of it: a silent thread would hold its nodes forever
            took.append(time.monotonic() - t0)
            done.put((i, rec if "rec" in locals() else None))

    try:
        while pending or running:
            for item in list(pending):
                if len(running) >= max_steps:
                    break
                i, p = item
                if p.not_run or not busy & set(p.hosts):
                    pending.remove(item)
                    busy |= held(p)
                    running[i] = threading.Thread(target=worker, args=(i, p), daemon=True)
                    running[i].start()
            with contextlib.suppress(queue.Empty):
                i, rec = done.get(timeout=1.0)
                running.pop(i).join()
                records[i] = rec or broken(ctx, first_index + i, placed[i])
                busy -= held(placed[i])
                nodes_of.subtract(placed[i].hosts)
            waves = (len(pending) + len(running)) / min(max_steps, len(running) or 1)
            progress.show(phase, len(running), sum(1 for n in nodes_of.values() if n == 0),
                          sum(took) / len(took) * waves if took else None)
    except KeyboardInterrupt as e:
        ctx.launcher.stop_all()
        for t in running.values():
            t.join()
        while not done.empty():
            i, rec = done.get()
            records[i] = rec or broken(ctx, first_index + i, placed[i])
        for i, p in pending:
            records[i] = ctx.steps.ended(first_index + i, dataclasses.replace(p.check, id=p.name),
                                         f"interrupted ({ctx.steps.interrupted_by}) before this step", p.hosts)
        for i in running:  # cancelled while it ran: not a verdict on the nodes
            ctx.steps.interrupted(records[i])
        e.partial = [records[i] for i in sorted(records)]
        raise
    finally:
        progress.end()
    return [records[i] for i in sorted(records)]
