"""Exports of a run's figures to the formats other tools read (perflog, jsonl, bmf, elastic); files only, no
network. The formats and what a figure is: docs/harness.md#batch-jobs-history-and-exports.
"""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
from pathlib import Path
from typing import Any, Iterator

from commstack.errors import CommstackError, printable
from commstack.files import make_dirs, write_atomic
from commstack.results.records import Record, read_run

SUFFIX = {"perflog": ".log", "jsonl": ".jsonl", "bmf": ".bmf.json", "elastic": ".bulk.ndjson"}  # every format
PERFLOG_FIELDS = ("timestamp", "run_id", "system", "suite", "step", "benchmark", "size", "metric", "value",
                  "lower", "upper", "unit", "repeats", "verdict", "nodelist")
INDEX = "commstack"


class ExportError(CommstackError):
    """An unknown format, or a run without figures."""


def figures(records: list[Record]) -> Iterator[dict[str, Any]]:
    for r in records:
        for size, every in r.values().items():
            # the repeats with a finite figure: the value, bounds and count are theirs (NaN is no JSON)
            values = [v for v in every if math.isfinite(v)]
            if not values:
                continue
            yield {"timestamp": r.started, "run_id": r.run_id, "system": r.system, "suite": r.suite, "step": r.step,
                   "benchmark": r.benchmark, "size": size, "metric": r.metric, "value": statistics.median(values),
                   "lower": min(values), "upper": max(values), "unit": r.unit, "repeats": len(values),
                   "verdict": r.verdict, "nodelist": ",".join(r.nodelist), "tags": r.tags, "stack": r.stack}


def render(records: list[Record], fmt: str) -> str:
    if fmt not in SUFFIX:
        raise ExportError(f"unknown export format {fmt!r}; known: {', '.join(SUFFIX)}")
    rows = list(figures(records))
    if not rows:
        raise ExportError("the run has no figures (no step produced a result)")
    if fmt == "perflog":
        buf = io.StringIO()
        w = csv.DictWriter(buf, PERFLOG_FIELDS, delimiter="|", extrasaction="ignore", lineterminator="\n")
        w.writeheader()  # a text log, read on terminals: controls of a record's strings shown as escapes
        w.writerows({k: printable(v) if isinstance(v, str) else v for k, v in row.items()} for row in rows)
        return buf.getvalue()
    if fmt == "jsonl":
        return "".join(json.dumps(row, sort_keys=True, default=str) + "\n" for row in rows)
    if fmt == "bmf":
        bmf: dict[str, dict] = {}
        for row in rows:
            name = f"{row['system']}/{row['suite']}/{row['step']}/{row['size']}B"
            bmf.setdefault(name, {})[row["metric"].replace("_", "-").lower()] = {
                "value": row["value"], "lower_value": row["lower"], "upper_value": row["upper"]}
        return json.dumps(bmf, indent=2, sort_keys=True) + "\n"
    out = []  # elastic
    for row in rows:
        doc_id = f"{row['run_id']}/{row['suite']}/{row['step']}/{row['size']}"
        out.append(json.dumps({"index": {"_index": INDEX, "_id": doc_id}}))
        out.append(json.dumps(row, sort_keys=True, default=str))
    return "\n".join(out) + "\n"  # the bulk API wants a final newline


def export(run_dir: Path, fmt: str, output: Path | None = None) -> Path:
    """Write the run's figures as `fmt` to `output` (default: <run>/export/<run>.<suffix>). An `output`
    that exists and is not a regular file (a device, a FIFO, a symlink, a directory) is refused."""
    text = render(read_run(run_dir), fmt)
    if output is None:
        output = make_dirs(run_dir, "export") / (run_dir.name + SUFFIX[fmt])
    write_atomic(output, text)
    return output
