"""What `commstack run` and `commstack suite` show on the terminal: commstack's own view of the run
(docs/harness.md#what-run-and-suite-print), a pytest plugin given to pytest.main, which sends pytest's own output
to results/<run>/pytest.log; plain `pytest suites/NAME.yaml` never loads it and keeps pytest's output.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections import Counter
from pathlib import Path

import pytest
from rich.console import Console
from rich.live import Live
from rich.table import Column, Table
from rich.text import Text

from commstack import exits
from commstack.errors import printable
from commstack.pytest_plugin import NOTES, PROGRESS, RUN, StepItem, time_left
from commstack.results.judge import VERDICTS
from commstack.results.records import Record
from commstack.terminal.figures import duration, figure_text, key_figure
from commstack.terminal.streams import Output, PytestLog

LOG = "pytest.log"
STYLE = {"pass": "green", "no-reference": "cyan", "unstable": "yellow", "degraded": "yellow", "fail": "bold red",
         "not-run": "magenta"}


class View:
    """commstack's own view of one suite run; a pytest plugin (pytest.main(plugins=[...]))."""

    def __init__(self, command: str, suite: str, system: str, launcher: str, results: Path, *,
                 quiet: bool = False, json_lines: bool = False, pytest_output: bool = False):
        self.command, self.suite, self.system, self.launcher, self.results = command, suite, system, launcher, results
        self.out = Output()
        self.console = Console(file=self.out, highlight=False, markup=False, emoji=False)
        if json_lines:
            self.mode = "json"
        elif quiet or pytest_output:  # -v: pytest's own lines tell the steps (and the notes), ours sum up
            self.mode = "quiet"
        else:
            self.mode = "live" if self.console.is_interactive else "lines"
        if self.mode != "live":
            self.console.soft_wrap = True  # a log keeps whole lines: never cut, never wrapped
        self.log = PytestLog(results / LOG, self.out if pytest_output else None)
        self.config: pytest.Config | None = None
        self.items: dict[str, StepItem] = {}
        self.failures: dict[str, str] = {}  # nodeid -> pytest's report of a step that raised
        self.live: Live | None = None
        self.status = ""  # the live line between steps
        self.current: tuple[StepItem, float, float | None] | None = None  # item, start, time left then
        self.t0 = time.monotonic()

    @contextlib.contextmanager
    def session(self):
        """Around pytest.main: pytest writes to its log; the live line stops whatever happens."""
        try:
            with contextlib.redirect_stdout(self.log):
                yield self
        finally:
            if self.live is not None:
                self.live.stop()
                self.live = None
            self.log.close()

    # ---- printing

    def _fit(self) -> None:
        """The terminal's width now, read from our own descriptor (pytest's capture hides 0, 1 and 2)."""
        if self.mode == "live":
            with contextlib.suppress(OSError):
                self.console.width = os.get_terminal_size(self.out.fd).columns

    def _line(self, text: Text | str) -> None:
        if isinstance(text, str):
            text = Text(printable(text))
        self._fit()
        if self.live is not None:
            self.live.refresh()  # the live line of now, not of its last refresh, goes below the printed one
        if self.mode == "live":
            self.console.print(text, no_wrap=True, overflow="ellipsis", crop=True)
        else:
            self.console.print(text)

    def _json(self, event: str, **fields) -> None:
        self.out.write(json.dumps({"event": event, **fields}) + "\n")
        self.out.flush()

    def note(self, line: str) -> None:
        """A line of progress from the run (a Spack build's packages, Ctrl-C and the clean-up)."""
        if self.mode == "json":
            self._json("note", message=line)
        elif self.mode != "quiet":
            self._line(line)

    def _error(self, line: str) -> None:
        if self.mode == "json":
            self._json("error", message=line)
        else:
            self._line(Text(printable(line), style="bold red"))

    def _render(self) -> Text:
        self._fit()
        if self.current is None:
            return Text(printable(self.status), style="dim", no_wrap=True, overflow="ellipsis")
        item, start, left = self.current
        number_, total = len(self.config.stash[PROGRESS]["done"]) + 1, len(self.items)
        spent = time.monotonic() - start
        text = Text(f"[step {number_}/{total}] ", style="bold", no_wrap=True, overflow="ellipsis")
        text.append(printable(item.name))
        rest = None if left is None else left - spent  # None: no estimate yet, or this step took longer
        return text.append(f"  {spent:.0f} s" + (f", about {rest:.0f} s left" if rest is not None and rest >= 1
                                                  else ""), style="dim")

    # ---- pytest hooks

    def pytest_configure(self, config: pytest.Config) -> None:
        self.config = config
        config.stash[NOTES] = self.note

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self._error(f"{report.nodeid or self.suite}: {report.longreprtext.strip()}")

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.items = {i.nodeid: i for i in session.items if isinstance(i, StepItem)}
        if self.mode == "json":
            self._json("run-started", suite=self.suite, system=self.system, launcher=self.launcher,
                       steps=len(self.items), results=str(self.results))
        elif self.mode != "quiet":
            self._line(f"commstack {self.command}: suite {self.suite} on system {self.system}, {len(self.items)} "
                       f"steps, {self.launcher}")
            self._line(f"results: {self.results}")
        if self.mode == "live":
            self.status = "starting"
            self.live = Live(console=self.console, get_renderable=self._render, transient=True,
                             refresh_per_second=2, redirect_stdout=False, redirect_stderr=False)
            self.live.start()

    def pytest_runtest_logstart(self, nodeid: str, location) -> None:
        item = self.items.get(nodeid)
        if item is None:
            return
        left = time_left(self.config)
        number_ = len(self.config.stash[PROGRESS]["done"]) + 1
        self.current = (item, time.monotonic(), left)
        if self.live is not None:
            self.live.refresh()
        if self.mode == "json":
            self._json("step-started", step=item.name, number=number_, total=len(self.items),
                       time_left_s=None if left is None else round(left, 1))
        elif self.mode == "lines":
            self._line(f"[step {number_}/{len(self.items)}] {item.name}"
                       + (f", about {left:.0f} s left" if left is not None else ""))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed and report.nodeid in self.items:
            self.failures.setdefault(report.nodeid, report.longreprtext)

    def pytest_runtest_logfinish(self, nodeid: str, location) -> None:
        if nodeid in self.items and self.current is not None:
            self._ended(self.items[nodeid])

    def _ended(self, item: StepItem) -> None:
        """One line for a step that ended, and one per warning about its figures; its reason is kept for the
        summary (JSON: here)."""
        spent = time.monotonic() - self.current[1]
        self.current, self.status = None, f"{len(self.config.stash[PROGRESS]['done'])}/{len(self.items)} steps done"
        run = self.config.stash.get(RUN, None)
        record = run.records.get((item.suite_step.tags["suite"], item.suite_step.id)) if run else None
        failure = self.failures.get(item.nodeid)
        if record is None and failure is None:  # interrupted before its record: the summary has it
            return
        if record is None or (failure and record.verdict in ("pass", "not-run")):
            # the harness itself failed in this step: pytest's report says where (pytest.log)
            verdict, figure, kind, warnings = "error", None, None, []
            reason = (failure or "no record").strip().splitlines()[-1]
        else:
            verdict, figure, kind = record.verdict, key_figure(record, run.references), record.error_kind
            reason, warnings = record.reason, record.warnings
        if self.mode == "json":
            self._json("step-ended", step=item.name, verdict=verdict, figure=figure, error_kind=kind, reason=reason,
                       warnings=list(warnings), elapsed_s=round(spent, 3))
            return
        if self.mode == "quiet":
            return
        text = Text(f"{verdict:<12s} ", style=STYLE.get(verdict, "bold red"))
        text.append(printable(item.name))
        if figure:
            text.append(f"  {figure_text(figure)}")
        elif kind:
            text.append(f"  [{printable(kind)}]")
        elif verdict == "error":  # no record says why: pytest's report, whole in pytest.log
            text.append(f"  {printable(reason)} ({LOG})")
        text.append(f"  {duration(spent)}", style="dim")
        self._line(text)
        for warning in warnings:
            self._line(Text(f"{'':12s} warning: ", style="bold yellow").append(printable(warning)))

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int):
        """Around the run's end (the step stopped, the allocation and Slurm released, the records and the
        report written): after Ctrl-C, a line before it and one after."""
        interrupted = exitstatus == pytest.ExitCode.INTERRUPTED and self.config.stash.get(RUN, None) is not None
        if self.current is not None:  # the step Ctrl-C stopped: pytest ends it without logfinish
            self._ended(self.current[0])
        self.status = "finishing: releasing the allocation, writing the records and the report"
        t0 = time.monotonic()
        result = yield
        if interrupted:
            self.note(f"interrupted: step stopped, allocation and Slurm released, records and report written "
                      f"({duration(time.monotonic() - t0)})")
        return result

    def pytest_internalerror(self, excrepr, excinfo: pytest.ExceptionInfo) -> None:
        self._error(f"commstack {self.command}: internal error: {excinfo.exconly()} (traceback in {self.log.path})")

    # ---- the end

    def end(self, records: list[Record], status: int, allow_not_run: bool = False) -> int:
        """The summary: counts by verdict, each reason once with the steps it covers, where the results
        and the report are, and the exit status with its meaning."""
        counts = Counter(r.verdict for r in records)
        report = self.results / "report" / "index.html"
        meaning = exits.Status(status).meaning
        if status == exits.PASS and counts["not-run"] and allow_not_run:
            meaning = "every step that ran passed; those that did not run are accepted (--allow-not-run)"
        if self.mode == "json":
            self._json("run-ended", counts={v: counts[v] for v in VERDICTS if counts[v]}, exit=status,
                       meaning=meaning, results=str(self.results), report=str(report) if report.exists() else None,
                       pytest_log=str(self.log.path), elapsed_s=round(time.monotonic() - self.t0, 3))
            return status
        if records:
            self._line(Text(f"{len(records)} steps in {duration(time.monotonic() - self.t0)}: ").append_text(
                Text(", ").join(Text(f"{counts[v]} {v}", style=STYLE[v]) for v in VERDICTS if counts[v])))
        groups: dict[tuple[str, str], list[str]] = {}
        for r in records:
            if r.reason:
                groups.setdefault((r.verdict, r.reason), []).append(r.step)
        # each reason once, with the steps it covers; on a terminal wrapped beside its verdict, never cut:
        # a reason often ends with the command that fixes it
        grid = Table.grid(Column(no_wrap=True), Column(), padding=(0, 1))
        for (verdict, reason), steps in sorted(groups.items(), key=lambda g: VERDICTS.index(g[0][0])):
            covers = (f"{len(steps)} steps: " if len(steps) > 1 else "") + ", ".join(printable(s) for s in steps)
            if self.mode == "live":
                grid.add_row(Text(f"{verdict}:", style=STYLE[verdict]),
                             Text(printable(reason)).append(f"\n{covers}", style="dim"))
            else:
                self._line(Text(f"{verdict}: ", style=STYLE[verdict]).append(printable(reason)))
                self._line(f"    {covers}")
        if grid.row_count:
            self._fit()
            self.console.print(grid)
        for r in records:  # doubts about figures that were taken: a busy machine, far off their history
            for warning in r.warnings:
                self._line(Text("warning: ", style="bold yellow").append(printable(f"{r.step}: {warning}")))
        self._line(f"results: {self.results}")
        if report.exists():
            self._line(f"report: {report}")
        self._line(f"pytest's output: {self.log.path}" if self.log.error is None else
                   f"pytest's output: not saved ({self.log.error.strerror}: {self.log.path})")
        self._line(Text(f"exit {status}" + (f": {meaning}" if meaning else ""),
                        style="bold" + (" green" if status == exits.PASS else "")))
        return status
