"""The benchmark registry: every benchmark of every tool (commstack.tools), and every column they print. Adding a
benchmark is one entry in its tool's module.
"""

from __future__ import annotations

from commstack.errors import ConfigError
from commstack.tools import MODULES, Benchmark, Column


def _columns() -> dict[str, Column]:
    out: dict[str, Column] = {}
    for m in MODULES:
        for name, column in m.COLUMNS.items():
            if out.setdefault(name, column) != column:  # one name, one meaning
                raise ValueError(f"column {name}: {m.TOOL.name} gives it {column}, another tool {out[name]}")
    return out


#: canonical column name -> Column, of every tool
COLUMNS: dict[str, Column] = _columns()
#: the metrics a reference may name: the columns with a direction
METRICS = {name: c for name, c in COLUMNS.items() if c.higher_is_better is not None}


def shown(metric: str) -> tuple[str, str, float]:
    """How a metric is shown (report, terminal, compare): label, unit, factor from the recorded unit (its
    tool's column says)."""
    column = COLUMNS.get(metric)
    return column.shown if column and column.shown else (metric, "", 1.0)


def shown_value(v: float) -> str:
    """A shown figure: four significant digits (one decimal from 1000 up), without an exponent from 1e-4 up."""
    return f"{v:.1f}" if abs(v) >= 1000 else f"{v:.4g}"

BENCHMARKS: dict[str, Benchmark] = {name: b for m in MODULES for name, b in m.BENCHMARKS.items()}


def get(name: str) -> Benchmark:
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise ConfigError(f"unknown benchmark {name!r}; known: {', '.join(sorted(BENCHMARKS))}") from None
