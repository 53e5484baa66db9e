"""The report of a run (docs/harness.md#suites-reports-and-compare): index.html with the plots inline,
report.md, rows.csv and the PNGs, each record's text made safe for where it is shown (results.markup). It is
rendered into a directory of its own, and `report` is a symlink swapped onto it in one rename.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import io
import math
import os
import secrets
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from matplotlib.figure import Figure  # no pyplot: files only, no display and no global figure state
from matplotlib.ticker import FuncFormatter

from commstack.dirfd import make_dir, remove_tree, swap_link, write_in
from commstack.files import UnsafePathError, results_dir
from commstack import benchmarks
from commstack.benchmarks import METRICS, shown_value, shown
from commstack.results.markup import file_name, html_text, md_code, md_text, mpl_text, spans
from commstack.results.diagnosis import against_references, by_layer, diagnose
from commstack.results.judge import VERDICTS
from commstack.results.references import References
from commstack.results.records import Record, binary_source, read_run


#: the sizes seed 001 shows for osu_alltoall against node counts
SEED_001_SIZES = (1024, 32768, 65536, 1048576)


def _bytes(x: float, _pos: object = None) -> str:
    for unit, n in (("G", 2 ** 30), ("M", 2 ** 20), ("K", 2 ** 10)):
        if x >= n and x % n == 0:
            return f"{int(x // n)}{unit}"
    return f"{int(x)}" if x >= 1 else ""  # no message is smaller than 1 B; the margin gets no tick label


def shared_reasons(records: list[Record]) -> dict[str, int]:
    """Each reason that several steps give, numbered in order of first use: the report says it once."""
    counts = Counter(r.reason for r in records if r.reason)
    return {reason: i for i, reason in enumerate((r for r in counts if counts[r] > 1), 1)}


def _title(records: list[Record], what: str, date: str) -> str:
    systems, suites = (", ".join(sorted({getattr(r, key) for r in records})) for key in ("system", "suite"))
    return mpl_text(f"{what} — system {systems}, suite {suites}, {date}")  # each the plotted steps ran on


def _drawn(stats: dict[int, tuple]) -> dict[int, tuple]:
    """The sizes whose figure a log scale can draw: finite and above zero."""
    return {s: v for s, v in stats.items() if math.isfinite(v[0]) and v[0] > 0}


def _size_axis(ax, ylabel: str) -> None:
    """The figure against message size, both on log scales, with the grid and the legend."""
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(_bytes))
    ax.set_yscale("log")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)


def curves_figure(records: list[Record], refs: References | None, line_rate_MBps: float | None,
                  date: str) -> Figure:
    """The metric against message size: one line per step, reference points with their tolerance
    bars (never interpolated), and the NIC line rate where the system declares it."""
    first = records[0]
    label, unit, factor = shown(first.metric)
    fig = Figure(figsize=(8, 5))
    ax = fig.subplots()
    for r in records:
        m = _drawn(r.medians())
        sizes = list(m)
        ys = [m[s][0] * factor for s in sizes]
        if len(r.repeats) > 1:
            ax.errorbar(sizes, ys, yerr=[m[s][1] * factor for s in sizes], marker="o", ms=3, capsize=2, label=r.step)
        else:  # one repeat: no spread to draw
            ax.plot(sizes, ys, marker="o", ms=3, label=r.step)
        ref = refs.find(r.benchmark, r.tags) if refs else None
        if ref:
            xs = sorted(ref.points)
            ys = [ref.points[x] * factor for x in xs]
            lo, hi = (ref.lower, ref.upper) if METRICS[first.metric].higher_is_better else (-ref.upper, -ref.lower)
            ax.errorbar(xs, ys, yerr=[[-y * lo for y in ys], [y * hi for y in ys]], fmt="D", ms=5, capsize=4,
                        color="black", label=mpl_text(f"reference {ref.id} ({lo:+.0%}/{hi:+.0%})"))
    known = benchmarks.BENCHMARKS.get(first.benchmark)  # a record's benchmark is shown, whatever it names
    limit = known.line_rate_factor if known else None
    if line_rate_MBps and limit and first.metric == "bandwidth_MBps":
        ax.axhline(line_rate_MBps * limit * factor, color="red", ls="--", lw=1,
                   label=f"NIC line rate x{limit} ({line_rate_MBps * limit * factor:g} {unit})")
    _size_axis(ax, f"{label} ({unit})")
    ax.set_title(_title(records, f"{first.benchmark}, {first.tags.get('memory', 'host')} memory", date), fontsize=10)
    # fixed margins: the figure's size is fixed, and tight_layout would draw it once more to measure
    fig.subplots_adjust(left=0.12, right=0.97, bottom=0.1, top=0.93)
    return fig


def native_vs_container_figure(records: list[Record], date: str) -> Figure:
    """Seed 001's figures: the mean with standard-deviation error bars, one series per environment;
    against message size on one node count, else against node count for a few message sizes."""
    first = records[0]
    label, unit, factor = shown(first.metric)
    environments = sorted({r.tags["environment"] for r in records}, key=lambda e: (e != "native", e))
    counts = sorted({r.tags["nodes"] for r in records})
    if len(counts) == 1:
        fig = Figure(figsize=(8, 5))
        ax = fig.subplots()
        for r in sorted(records, key=lambda r: environments.index(r.tags["environment"])):
            means = _drawn(r.means())
            ax.errorbar(list(means), [v[0] * factor for v in means.values()],
                        yerr=[v[1] * factor for v in means.values()], marker="o", ms=3, capsize=3,
                        label=mpl_text(r.tags["environment"]))
        _size_axis(ax, f"{label} ({unit}), mean ± sd")
        fig.suptitle(_title(records, f"{first.benchmark} on {counts[0]} nodes: native vs container", date),
                     fontsize=10)
    else:
        sizes = sorted({s for r in records for s in r.medians()})
        panels = [s for s in SEED_001_SIZES if s in sizes] or sizes[:: max(1, len(sizes) // 4)][:4]
        cols = 2 if len(panels) > 1 else 1
        rows = -(-len(panels) // cols)
        fig = Figure(figsize=(6 * cols, 4 * rows))
        axes = fig.subplots(rows, cols, squeeze=False)
        for ax, size in zip(axes.flat, panels):
            for environment in environments:
                pts = sorted((r.tags["nodes"], _drawn(r.means())[size]) for r in records
                             if r.tags["environment"] == environment and size in _drawn(r.means()))
                ax.errorbar([n for n, _ in pts], [v[0] * factor for _, v in pts], yerr=[v[1] * factor for _, v in pts],
                            marker="o", ms=4, capsize=3, label=mpl_text(environment))
            ax.set_xscale("log", base=2)
            ax.set_xticks(counts, [str(n) for n in counts])
            ax.set_xlabel("nodes")
            ax.set_ylabel(f"{label} ({unit}), mean ± sd")
            ax.set_title(f"{_bytes(size)}B messages", fontsize=9)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
        for ax in list(axes.flat)[len(panels):]:
            ax.set_visible(False)
        fig.suptitle(_title(records, f"{first.benchmark}: native vs container", date), fontsize=10)
    fig.tight_layout()
    return fig


NOTES_SHOWN = 20  # a step's notes the report lists; its record holds them all


def write_report(run_dir: Path, refs: References | None = None, line_rate_MBps: float | None = None) -> Path:
    """run_dir/report/{index.html, report.md, rows.csv, *.png}; returns the HTML page's path. The run's directory
    is opened once (files.results_dir: ours, not writable by others) and everything is written, swapped and
    removed through its fd (commstack.dirfd)."""
    records = read_run(run_dir)
    run_fd = results_dir(run_dir)
    try:
        date = datetime.fromtimestamp(os.fstat(run_fd).st_mtime).strftime("%Y-%m-%d")
        name = f".report-{secrets.token_hex(4)}"
        out_fd = make_dir(run_fd, name, run_dir / name)
        try:
            _render(records, refs, line_rate_MBps, date,
                    lambda file, data: write_in(out_fd, file, data, run_dir / name / file))
            os.fsync(out_fd)  # on disk before the swap makes it the report
            old = swap_link(run_fd, "report", name, run_dir / "report")
        except BaseException:
            with contextlib.suppress(OSError):
                remove_tree(run_fd, name)
            raise
        finally:
            os.close(out_fd)
        if old and old.startswith(".report"):  # the previous report; a symlink there was planted: left alone
            with contextlib.suppress(OSError, UnsafePathError):
                remove_tree(run_fd, old)
    finally:
        os.close(run_fd)
    return run_dir / "report" / "index.html"


NO_PLOT = "No plot: no step has a finite figure above zero (a log scale)."


def _plot(rs: list[Record], suite: str, refs: References | None, line_rate: float | None, date: str) -> bytes | None:
    """The PNG of one benchmark's steps; None when none has a figure a log scale can draw."""
    if not any(_drawn(r.medians()) for r in rs):
        return None
    png = io.BytesIO()
    if suite == "container-vs-native" and len({str(r.tags.get("environment")) for r in rs}) > 1 and all(
            isinstance(r.tags.get("nodes"), int) and isinstance(r.tags.get("environment"), str) for r in rs):
        fig = native_vs_container_figure(rs, date)
    else:
        fig = curves_figure(rs, refs, line_rate, date)
    fig.savefig(png, format="png", dpi=100)
    return png.getvalue()


def _figure(median: tuple[float, float, int] | None, factor: float) -> str:
    """A table cell's figure: the median, ± the standard deviation where there are several repeats."""
    if not median:
        return ""
    value, stdev, n = median
    return f"{shown_value(value * factor)} ± {shown_value(stdev * factor)}" if n > 1 else shown_value(value * factor)


def _code(text: str) -> tuple[str, str]:
    """A table cell in a code span: (Markdown, HTML)."""
    return md_code(text), f"<td><code>{html_text(text)}</code></td>"


def _text(text: str) -> tuple[str, str]:
    return md_text(text), f"<td>{html_text(text)}</td>"


@dataclass
class _Pages:
    """report.md and the page's body, built side by side: each call adds one content to both."""

    md: list[str]
    html: list[str]

    def add(self, md: list[str], html: list[str]) -> None:
        self.md += md
        self.html += html

    def section(self, title: str, html_after: str = "") -> None:
        self.add(["", f"## {md_text(title)}", ""], [f"<h2>{html_text(title)}</h2>{html_after}"])

    def faults(self, title: str, items: list[tuple[str, str]]) -> None:
        """A section listing (code, text) items: each `code` (a step) with what is said of it."""
        self.section(title, "<ul class='fault'>")
        self.add([f"- {md_code(code)}{md_text(text)}" for code, text in items],
                 [*(f"<li><code>{html_text(code)}</code>{html_text(text)}</li>" for code, text in items), "</ul>"])

    def table(self, header: list[str], rows, title: str = "", align: str = "---", html_line: bool = False) -> None:
        """A table in a section of its own, or after a blank line: `rows` of (the <tr>'s attributes, cells), each
        cell (Markdown, <td>); `html_line`: the HTML table on one line."""
        if title:
            self.section(title)
        else:
            self.md.append("")
        self.md += ["| " + " | ".join(md_text(h) for h in header) + " |", "|" + f"{align}|" * len(header)]
        html = ["<table><tr>" + "".join(f"<th>{html_text(h)}</th>" for h in header) + "</tr>"]
        for attrs, cells in rows:
            self.md.append("| " + " | ".join(m for m, _ in cells) + " |")
            html.append(f"<tr{attrs}>" + "".join(h for _, h in cells) + "</tr>")
        self.html += ["".join(html) + "</table>"] if html_line else [*html, "</table>"]


def _render(records: list[Record], refs: References | None, line_rate: float | None, date: str, put) -> None:
    """The report's files, each given to `put(name, bytes)`."""
    rows_csv = io.StringIO(newline="")
    w = csv.writer(rows_csv)
    w.writerow(["suite", "step", "system", "benchmark", "repeat", "size", "metric", "unit", "value", "verdict"])
    w.writerows([r.suite, r.step, r.system, r.benchmark, i, row["size"], r.metric, r.unit, row[r.metric], r.verdict]
                for r in records for i, rows in enumerate(r.repeats) for row in rows)
    put("rows.csv", rows_csv.getvalue().encode())
    counts = Counter(r.verdict for r in records)
    summary = ", ".join(f"{counts[v]} {v}" for v in VERDICTS if counts[v])
    suites = sorted({r.suite for r in records})
    systems = sorted({r.system for r in records})
    head = f"commstack report: {', '.join(suites)} on {', '.join(systems)}"
    pages = _Pages(
        [f"# {md_text(head)}", "", f"{date}, run {md_code(records[0].run_id)}: **{len(records)} steps: {summary}**. "
         "Rows in [rows.csv](rows.csv)."],
        [f"<h1>{html_text(head)}</h1>",
         f"<p>{date}, run <code>{html_text(records[0].run_id)}</code>: <b>{len(records)} steps: {summary}</b>. "
         "Rows in <a href='rows.csv'>rows.csv</a>, Markdown in <a href='report.md'>report.md</a>.</p>"])
    findings = diagnose(records, against_references(records, refs))
    if findings:  # above the table: the first thing to read after a maintenance
        pages.faults("Lowest layer at fault", [(f.step, f" on {', '.join(f.nodes)}: {f.message}") for f in findings])
    shared = shared_reasons(records)
    steps = []
    for r in records:
        command = " ".join(r.commands[0]) if r.commands else ""
        verdict = f"{r.verdict} ({r.error_kind})" if r.error_kind else r.verdict
        n = shared.get(r.reason)
        md_reason, html_reason = spans(r.reason)
        reason = ((f"[reason {n}](#reasons-several-steps-give)", f"<td><a href='#reason-{n}'>reason {n}</a></td>")
                  if n else (md_reason, f"<td>{html_reason}</td>"))
        steps.append((f" class='{r.verdict}'", [
            _code(r.step), _text(verdict), reason, _text(", ".join(r.nodelist)),
            (md_code(command) if command else "", f"<td><code>{html_text(command)}</code></td>"),
            _text(r.validated or "")]))
    pages.table(["step", "verdict", "reason", "nodes", "command", "validated"], steps)
    if shared:  # each once, with the steps that give it (the terminal's summary does the same)
        pages.section("Reasons several steps give", "\n<ol>")
        for reason, n in shared.items():
            given = [r.step for r in records if r.reason == reason]
            md_reason, html_reason = spans(reason)
            pages.add([f"{n}. {md_reason} ({len(given)} steps: {', '.join(md_code(s) for s in given)})"],
                      [f"<li id='reason-{n}'>{html_reason} ({len(given)} steps: "
                       + ", ".join(f"<code>{html_text(s)}</code>" for s in given) + ")</li>"])
        pages.html.append("</ol>")
    warned = [(r.step, f": {w}") for r in records for w in r.warnings]
    if warned:  # doubts about the figures: a busy machine, far off the step's own history
        pages.faults("Warnings about the figures", warned)
    sourced = [r for r in records if r.binary]
    if sourced:  # which binary each step ran, and from an env which spec of which lock
        pages.table(["step", "binary", "from"], [
            ("", [_code(r.step), _code(r.binary["path"]), _text(binary_source(r.binary))]) for r in sourced],
            "Binaries")
    layered = by_layer(records)
    if layered:  # the stack bottom up on each node list: where the lowest layer at fault is read
        pages.table(["nodes", "layer", "step", "verdict", "figure"], [
            ("", [_text(", ".join(nodes)), _text(layer), _code(f"{r.suite}/{r.step}"),
                  (r.verdict, f"<td class='{r.verdict}'>{r.verdict}</td>"), _text(figure)])
            for nodes, rows in layered for layer, r, figure in rows], "By layer, per node pair")
    noted = [r for r in records if r.notes]
    if noted:  # the launchers' and runtimes' lines each output held, by line number and source
        pages.section("Notes: known launcher and runtime lines")
        for r in noted:  # NCCL_DEBUG=INFO prints hundreds: the first ones here, every one in the record
            more = len(r.notes) - NOTES_SHOWN
            listed = r.notes[:NOTES_SHOWN] + ([f"... {more} more in {r.dirname}/record.json"] if more > 0 else [])
            pages.add([f"{md_code(r.step)}:", "", md_code("\n".join(listed), block=True), ""],
                      [f"<p><code>{html_text(r.step)}</code>:</p>"
                       f"<pre>{html_text(chr(10).join(listed), keep=chr(10))}</pre>"])
    groups: dict[tuple, list[Record]] = defaultdict(list)
    for r in records:
        if r.repeats:
            groups[(r.suite, r.benchmark, str(r.tags.get("memory", "host")))].append(r)
    names: set[str] = set()
    for (suite, bench, memory), rs in sorted(groups.items()):
        stem = file_name(f"{bench}-{memory}" if len(suites) == 1 else f"{suite}-{bench}-{memory}")
        name = next(n for n in (f"{stem}{f'-{i}' if i else ''}.png" for i in range(len(names) + 1)) if n not in names)
        names.add(name)
        png = _plot(rs, suite, refs, line_rate, date)
        if png:
            put(name, png)
        label, unit, factor = shown(rs[0].metric)  # the plot's unit, in the table too
        medians = [r.medians() for r in rs]
        sizes = [("", [_text(str(size)), *(_text(_figure(m.get(size), factor)) for m in medians)])
                 for size in sorted({s for m in medians for s in m})]
        repeats = sorted({len(r.repeats) for r in rs})
        note = (f"{label} in {unit}; one repeat per step: its figure, no spread." if repeats == [1] else
                f"{label} in {unit}; median over {'/'.join(map(str, repeats))} repeats (± standard deviation where "
                "a step has more than one).")
        pages.section(f"{bench}, {memory} memory")
        pages.add([f"![{md_text(bench)} {md_text(memory)}]({name})" if png else NO_PLOT],
                  [f"<img alt='{html_text(bench)} {html_text(memory)}' "
                   f"src='data:image/png;base64,{base64.b64encode(png).decode()}'>" if png else f"<p>{NO_PLOT}</p>"])
        pages.table(["size (B)", *(r.step for r in rs)], sizes, align="---:", html_line=True)
        pages.add([f"\n{note}"], [f"<p>{note}</p>"])
        for r in rs:
            if r.verdict != "pass" and r.detail:
                pages.add(["", md_code(r.detail, block=True)], [f"<pre>{html_text(r.detail, keep=chr(10))}</pre>"])
    put("report.md", ("\n".join(pages.md) + "\n").encode())
    put("index.html", _HTML.format(title=html_text(head), body="\n".join(pages.html)).encode())


_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }}
th, td {{ border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }}
tr.pass td:nth-child(2), td.pass {{ background: #d9f2d9; }}
tr.fail td:nth-child(2), tr.degraded td:nth-child(2), td.fail, td.degraded {{ background: #f8d0d0; }}
tr.unstable td:nth-child(2), tr.no-reference td:nth-child(2), td.unstable, td.no-reference {{ background: #fdf1c7; }}
tr.not-run td:nth-child(2), td.not-run {{ background: #e4e4e4; }}
ul.fault li {{ border-left: 4px solid #d33; padding-left: 0.5em; margin: 0.4em 0; }}
img {{ max-width: 100%; }}
pre {{ background: #f6f6f6; padding: 0.6em; overflow-x: auto; }}
</style></head><body>
{body}
</body></html>
"""
