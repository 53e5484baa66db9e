"""Reports of a session's suite results: Markdown with tables and plots (matplotlib), CSV of every
row, and `compare` of two result sets. Inputs are the JSON records the harness keeps per test.

Nothing is half-written: files are rendered in a scratch directory and moved into place at the end.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import statistics
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

from commstack.errors import CommstackError  # noqa: E402
from commstack.benchmarks import METRICS  # noqa: E402
from commstack.results.judge import References  # noqa: E402


class ReportError(CommstackError):
    """No results to report or compare, a missing baseline, sets from different systems."""


def load_records(results: Path) -> list[dict]:
    """Suite records of a results directory (steps/*/record.json), in name order."""
    if not results.is_dir():
        raise ReportError(f"no results directory {results}")
    records = [json.loads(p.read_text()) for p in sorted(results.glob("steps/*/record.json"))]
    records = [r for r in records if r.get("suite") and r.get("repeats")]
    if not records:
        raise ReportError(f"{results}: no suite results (steps/*/record.json with rows)")
    return records


def medians(record: dict) -> dict[int, tuple[float, float, int]]:
    """size -> (median, standard deviation, repeats) of the record's metric."""
    by_size: dict[int, list[float]] = defaultdict(list)
    for rows in record["repeats"]:
        for row in rows:
            by_size[row["size"]].append(row[record["metric"]])
    return {s: (statistics.median(v), statistics.stdev(v) if len(v) > 1 else 0.0, len(v))
            for s, v in sorted(by_size.items())}


def _label(r: dict) -> str:
    return r["step"]  # unique in a suite: benchmark, mode, nodes, ranks, memory, environment


def _title(records: list[dict], what: str, date: str) -> str:
    r = records[0]
    envs = sorted({x["tags"].get("environment", "native") for x in records})  # native or the image's EDF
    return f"{what} - system {r['system']}, suite {r['suite']}, {' / '.join(envs)}, {date}"


def plot_curves(records: list[dict], refs: References | None, path: Path, date: str) -> None:
    """Metric against message size, log axes, one line per run, the reference band if any."""
    first = records[0]
    metric = first["metric"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in records:
        m = medians(r)
        sizes = list(m)
        ax.errorbar(sizes, [m[s][0] for s in sizes], yerr=[m[s][1] for s in sizes], marker="o", ms=3,
                    capsize=2, label=_label(r))
        ref = refs.find(r["benchmark"], r["tags"]) if refs else None
        if ref:
            pts = sorted(ref.points.items())
            xs, ys = [p[0] for p in pts], [p[1] for p in pts]
            lo, hi = (1 + ref.lower, 1 + ref.upper) if METRICS[metric].higher_is_better else (1 - ref.upper, 1 - ref.lower)
            ax.fill_between(xs, [y * lo for y in ys], [y * hi for y in ys], alpha=0.2, label=f"reference {ref.id}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size (B)")
    ax.set_ylabel(f"{metric} ({METRICS[metric].unit})")
    ax.set_title(_title(records, first["benchmark"], date), fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_bars(records: list[dict], path: Path, date: str) -> None:
    """Native against container per node count: mean and standard deviation (seed 001's figures)."""
    first = records[0]
    sizes = sorted({s for r in records for s in medians(r)})
    counts = sorted({r["tags"]["nodes"] for r in records})
    envs = sorted({r["tags"]["environment"] for r in records})
    fig, axes = plt.subplots(1, len(sizes), figsize=(3.2 * len(sizes), 4), squeeze=False)
    width = 0.8 / len(envs)
    for ax, size in zip(axes[0], sizes):
        for i, env in enumerate(envs):
            vals, errs = [], []
            for n in counts:
                m = [medians(r).get(size) for r in records if r["tags"]["nodes"] == n and r["tags"]["environment"] == env]
                vals.append(m[0][0] if m and m[0] else 0.0)
                errs.append(m[0][1] if m and m[0] else 0.0)
            ax.bar([c + i * width for c in range(len(counts))], vals, width, yerr=errs, capsize=2, label=env)
        ax.set_xticks([c + width * (len(envs) - 1) / 2 for c in range(len(counts))], [str(n) for n in counts])
        ax.set_xlabel("nodes")
        ax.set_title(f"{size} B", fontsize=9)
    axes[0][0].set_ylabel(f"{first['metric']} ({METRICS[first['metric']].unit})")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(_title(records, f"{first['benchmark']}: native vs container", date), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_report(results: Path, refs: References | None = None) -> Path:
    """results/report/{report.md, rows.csv, *.png}; returns the report's path."""
    records = load_records(results)
    systems = {r["system"] for r in records}
    date = datetime.fromtimestamp(results.stat().st_mtime).strftime("%Y-%m-%d")
    scratch = Path(tempfile.mkdtemp(prefix=".report-", dir=results))
    try:
        _render(records, refs, scratch, date, systems)
        final = results / "report"
        if final.exists():
            shutil.rmtree(final)
        scratch.rename(final)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return final / "report.md"


def _render(records: list[dict], refs: References | None, out: Path, date: str, systems: set[str]) -> None:
    with open(out / "rows.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["suite", "step", "system", "benchmark", "repeat", "size", "metric", "value", "verdict"])
        for r in records:
            for i, rows in enumerate(r["repeats"]):
                for row in rows:
                    w.writerow([r["suite"], r["step"], r["system"], r["benchmark"], i, row["size"], r["metric"],
                                row[r["metric"]], r["verdict"]])
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in records:
        groups[(r["benchmark"], r["tags"].get("memory", "host"))].append(r)
    suites = sorted({r["suite"] for r in records})
    md = [f"# commstack report: {', '.join(suites)} on {', '.join(sorted(systems))}", "",
          f"{date}; {len(records)} steps; rows in [rows.csv](rows.csv).", "",
          "| step | verdict | nodes | command |", "|---|---|---|---|"]
    for r in records:
        md.append(f"| `{r['step']}` | {r['verdict']} | {', '.join(r.get('nodelist') or [])} | "
                  f"`{' '.join(r['commands'][0])}` |")
    for (bench, memory), rs in sorted(groups.items()):
        name = f"{bench}-{memory}.png"
        if rs[0]["suite"] == "container-vs-native":
            plot_bars(rs, out / name, date)
        else:
            plot_curves(rs, refs, out / name, date)
        metric = rs[0]["metric"]
        md += ["", f"## {bench}, {memory} memory", "", f"![{bench} {memory}]({name})", "",
               "| size (B) | " + " | ".join(_label(r) for r in rs) + " |",
               "|---:|" + "---:|" * len(rs)]
        sizes = sorted({s for r in rs for s in medians(r)})
        for size in sizes:
            cells = []
            for r in rs:
                m = medians(r).get(size)
                cells.append(f"{m[0]:.2f} ± {m[1]:.2f}" if m and m[2] > 1 else f"{m[0]:.2f}" if m else "")
            md.append(f"| {size} | " + " | ".join(cells) + " |")
        md.append(f"\n{metric} in {METRICS[metric].unit}; median (± standard deviation over repeats).")
        for r in rs:
            if r["verdict"] != "pass":
                md += ["", "```", r.get("verdict_detail", r["verdict"]), "```"]
    (out / "report.md").write_text("\n".join(md) + "\n")


# ---- compare ---------------------------------------------------------------------------------------

@dataclass
class Change:
    step: str
    size: int
    a: float
    b: float
    ratio: float
    verdict: str  # same | better | regression


def compare(a_dir: Path, b_dir: Path, tolerance: float = 0.05) -> list[Change]:
    """B against baseline A, per step and size. A change counts when it exceeds both the tolerance
    and twice the larger relative spread (standard deviation / median) of the two repeat sets."""
    if not a_dir.exists():
        raise ReportError(f"no baseline at {a_dir}")
    a, b = load_records(a_dir), load_records(b_dir)
    sa, sb = {r["system"] for r in a}, {r["system"] for r in b}
    if sa != sb:
        raise ReportError(f"cannot compare results of different systems: {sorted(sa)} vs {sorted(sb)}")
    base = {r["step"]: r for r in a}
    out = []
    for r in b:
        if r["step"] not in base:
            continue
        ma, mb = medians(base[r["step"]]), medians(r)
        higher = METRICS[r["metric"]].higher_is_better
        for size in sorted(set(ma) & set(mb)):
            (va, da, _), (vb, db, _) = ma[size], mb[size]
            ratio = vb / va if va else float("inf")
            noise = 2 * max(da / va if va else 0, db / vb if vb else 0)
            change = (ratio - 1) if higher else (1 / ratio - 1 if ratio else 0)
            threshold = max(tolerance, noise)
            verdict = "regression" if change < -threshold else "better" if change > threshold else "same"
            out.append(Change(r["step"], size, va, vb, ratio, verdict))
    if not out:
        raise ReportError(f"{a_dir} and {b_dir} have no step in common")
    return out


def compare_table(changes: list[Change]) -> str:
    buf = io.StringIO()
    buf.write(f"{'step':40s} {'size':>10s} {'A':>12s} {'B':>12s} {'B/A':>7s}  verdict\n")
    for c in changes:
        buf.write(f"{c.step:40s} {c.size:>10d} {c.a:>12.3f} {c.b:>12.3f} {c.ratio:>7.3f}  {c.verdict}\n")
    n = sum(c.verdict == "regression" for c in changes)
    buf.write(f"{len(changes)} points, {n} regressions\n")
    return buf.getvalue()
