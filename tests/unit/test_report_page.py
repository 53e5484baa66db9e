"""The run report's page as `commstack report RUN_DIR` writes it: its sections, tables, counts, links to the PNGs
and the PNGs' titles (issue 37: what the mutation run of results/report.py showed no test reading)."""

import os
import re
import time
from pathlib import Path

import pytest
from matplotlib.figure import Figure
from test_diagnosis import FI_PINGPONG, OSU_BW_NO_CXI, step

from commstack.cli.main import main
from commstack.results import report
from commstack.results.records import Record
from commstack.results.report import NO_PLOT, _bytes

DATE = "2024-05-01"


def rec(run: Path, name: str, values: list[float] | None = None, repeats: int = 1, suite: str = "cscs-images",
        benchmark: str = "osu_latency", metric: str = "latency_us", system: str = "testbox", verdict: str = "pass",
        sizes: tuple[int, ...] = (1024, 4096), **fields) -> Record:
    """A record written into `run`: `values` at `sizes` (one per size), the same in each repeat."""
    unit = {"latency_us": "us", "bandwidth_MBps": "MB/s"}[metric]
    rows = [{"size": s, metric: v} for s, v in zip(sizes, values)] if values is not None else None
    fields = {"tags": {"nodes": 2, "memory": "host"}, **fields}
    r = Record(run_id=run.name, index=len(list(run.glob("steps/*"))), suite=suite, step=name, system=system,
               benchmark=benchmark, tool="osu", metric=metric, unit=unit, verdict=verdict,
               repeats=[rows] * repeats if rows else [], **fields)
    r.write(run)
    return r


def commstack_report(run: Path) -> tuple[str, str]:
    """report.md and index.html as `commstack report RUN_DIR` writes them, dated DATE (the run directory's mtime)."""
    t = time.mktime(time.strptime(f"{DATE} 12:00", "%Y-%m-%d %H:%M"))
    os.utime(run, (t, t))
    assert main(["report", str(run)]) in (0, 1)
    return (run / "report" / "report.md").read_text(), (run / "report" / "index.html").read_text()


def pngs(run: Path) -> list[str]:
    return sorted(p.name for p in (run / "report").glob("*.png"))


@pytest.fixture
def figures(monkeypatch) -> list[dict]:
    """What each PNG the report draws shows as text: its title over all, its panels' titles and y labels."""
    drawn = []

    class Recording(Figure):
        def savefig(self, *args, **kwargs):
            shown = [ax for ax in self.axes if ax.get_visible()]
            drawn.append({"suptitle": self._suptitle.get_text() if self._suptitle else None,
                          "titles": [ax.get_title() for ax in shown], "ylabels": [ax.get_ylabel() for ax in shown]})
            super().savefig(*args, **kwargs)

    monkeypatch.setattr(report, "Figure", Recording)
    return drawn


def test_the_x_ticks_name_whole_binary_units_and_leave_the_margin_below_one_byte_blank():
    sizes = [2 ** 30, 3 * 2 ** 30, 2 ** 31, 2 ** 20, 5 * 2 ** 20, 2 ** 21, 2 ** 10, 3 * 2 ** 10, 2 ** 11, 1536,
             2 ** 20 + 2 ** 10, 1, 7, 0.5, 0]
    assert [_bytes(x) for x in sizes] == ["1G", "3G", "2G", "1M", "5M", "2M", "1K", "3K", "2K", "1536",
                                          "1025K", "1", "7", "", ""]
