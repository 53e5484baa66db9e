"""What a person gets from a screen: node lines, the bad nodes and pairs, drain lines, screen.json, and
report/index.html with an N×N heatmap per pair check (docs/screen.md#what-a-person-gets).
"""

from __future__ import annotations

import html
import io
import json
import math
import shlex
from pathlib import Path

from commstack.benchmarks import METRICS
from commstack.errors import printable
from commstack.files import make_dirs, write_atomic
from commstack.results.diagnosis import size_text
from commstack.results.records import Record
from commstack.screen.verdict import Findings, check_of, figure, headline, sender_of


def node_lines(f: Findings) -> list[str]:
    width = max((len(n) for n in f.nodes), default=4)
    return [v.line(width) for v in f.nodes.values()]


def summary(f: Findings, not_run: dict[str, str]) -> list[str]:
    out = [f"bad nodes: {', '.join(f.bad_nodes) or 'none'}"]
    out += [f"down mid-screen: {', '.join(f.lost)}"] if f.lost else []
    out += [f"bad pairs: {', '.join(f'{a}-{b}' for a, b in f.bad_pairs) or 'none'}"]
    out += [f"  {a}-{b}: {'; '.join(whys)}" for (a, b), whys in f.bad_pairs.items()]
    if f.suspect_pairs:
        out.append(f"suspect pairs (one bad measurement, not called bad): "
                   f"{', '.join(f'{a}-{b}' for a, b in f.suspect_pairs)}")
    out += [f"{phase}: not run: {why}" for phase, why in not_run.items()]
    out += [f"{check}: {why}" for check, why in f.blunt.items()]
    if f.blind:
        out.append(f"not judged by {', '.join(f.blind)}: its spread hides the rule's slowdown, so no node or pair "
                   "it measured is cleared by it")
    return out


def spreads(f: Findings) -> list[dict]:
    """The peers of every check and size: median, MAD, their ratio (the healthy spread), count."""
    return [{"check": c, "size": s, "median": p.median, "mad": p.mad, "count": p.count,
             "spread": round(p.relative, 4) if math.isfinite(p.relative) else None}   # None: a median of 0
            for (c, s), p in sorted(f.peers.stats.items())]


def group_lines(records: list[Record]) -> list[str]:
    """Per leaf switch, its group check's headline figure (or why it has none): switches side by side."""
    out = []
    for r in records:
        phase = r.tags.get("screen_phase", "")
        if phase.startswith("switch "):
            size = headline(r)
            what = r.reason if size is None or r.verdict == "fail" else figure(r, size, r.medians()[size][0])
            out.append(f"{phase} ({', '.join(r.nodelist)}): {what}")
    return out


def drain_lines(f: Findings) -> list[list[str]]:
    """`scontrol update` for every bad node, the reason ours and the first bad measurement: one line with its
    controls escaped (a step's reason may quote what a node printed; Slurm keeps it, and `sinfo -R` shows it
    to whoever reads it), as it is shown here."""
    return [["scontrol", "update", f"nodename={n}", "state=drain",
             printable(f"reason=commstack screen: {f.nodes[n].reason}")[:250]] for n in f.bad_nodes]


def matrix(nodes: list[str], records: list[Record], check: str, f: Findings) -> tuple[list[list[float]], int | None]:
    """Sender (row) x receiver (column): the headline figure (largest size of a rate, smallest of a time) of
    `check` as a fraction of the peers' median (1: as the peers, 0.5: half as good); NaN where not measured, 0
    where failed. A round trip fills both cells of its pair; a one-way check the cell of its direction."""
    idx = {n: i for i, n in enumerate(nodes)}
    m = [[math.nan] * len(nodes) for _ in nodes]
    size = None
    for r in records:
        if check_of(r) != check or len(set(r.nodelist)) != 2 or r.verdict == "not-run" or set(r.nodelist) - set(idx):
            continue
        medians, higher = r.medians(), METRICS[r.metric].higher_is_better
        ratio = 0.0
        if medians and r.verdict != "fail":
            size = headline(r)
            spread = f.peers.stats.get((check, size))
            value = medians[size][0]
            ratio = (value / spread.median if higher else spread.median / value) \
                if spread and spread.median and value > 0 else math.nan
        sender = sender_of(r)
        cells = [(sender, next(n for n in r.nodelist if n != sender))] if sender else \
            [tuple(r.nodelist), tuple(reversed(r.nodelist))]
        for a, b in cells:
            m[idx[a]][idx[b]] = ratio
    return m, size


#: nodes up to which each pair check gets its sender x receiver heatmap, n² cells (4,096 nodes: 13 s and 620 MB
#: here; the 65,536 a screen may run on would take some 160 GB): above it, the page names the bad nodes and pairs
HEATMAP_NODES = 4096


def heatmap(nodes: list[str], m: list[list[float]], title: str) -> bytes:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    n = len(nodes)
    side = min(12.0, 2.5 + 0.45 * n)
    fig, ax = plt.subplots(figsize=(side + 1.2, side))
    cmap = matplotlib.colormaps["gray"].copy()
    cmap.set_bad("#c9d7e8")  # not measured: pale blue, told apart from any grey
    im = ax.imshow([[min(v, 1.2) for v in row] for row in m], cmap=cmap, vmin=0, vmax=1.2, interpolation="nearest")
    if n <= 64:
        ax.set_xticks(range(n), nodes, rotation=90, fontsize=max(5, 10 - n // 8))
        ax.set_yticks(range(n), nodes, fontsize=max(5, 10 - n // 8))
    ax.set(xlabel="receiver", ylabel="sender")
    if n <= 24:
        for i in range(n):
            for j in range(n):
                if not math.isnan(m[i][j]):
                    ax.text(j, i, f"{m[i][j]:.2f}", ha="center", va="center", fontsize=7,
                            color="white" if m[i][j] < 0.6 else "black")
    fig.colorbar(im, ax=ax, label="fraction of the peers' median (dark: slow; pale blue: not measured)")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


def write(run_dir: Path, screen: dict, nodes: list[str], f: Findings, records: list[Record],
          not_run: dict[str, str]) -> Path:
    """screen.json, nodes.txt and report/ (index.html and one heatmap PNG per pair check)."""
    doc = {**screen,
           "nodes": {n: {"status": v.status, "reason": v.reason, "partners": v.partners, "slow_with": v.slow_with}
                     for n, v in f.nodes.items()},
           "bad_nodes": f.bad_nodes,
           "lost": f.lost,
           "bad_pairs": [{"nodes": list(p), "why": whys} for p, whys in f.bad_pairs.items()],
           "suspect_pairs": [{"nodes": list(p), "why": whys} for p, whys in f.suspect_pairs.items()],
           "not_run": not_run,
           "peers": spreads(f),
           "blunt": f.blunt,
           "blind": f.blind,
           "drain": [shlex.join(a) for a in drain_lines(f)]}
    write_atomic(run_dir / "screen.json", json.dumps(doc, indent=2) + "\n")
    write_atomic(run_dir / "nodes.txt", "\n".join(node_lines(f) + summary(f, not_run)) + "\n")
    report = make_dirs(run_dir, "report")
    pair_checks = list(dict.fromkeys(check_of(r) for r in records if r.tags.get("screen_phase") == "pairs"))
    maps = []
    for check in pair_checks if len(nodes) <= HEATMAP_NODES else []:
        m, size = matrix(nodes, records, check, f)
        if size is None:
            continue
        name = f"heatmap-{check}.png"
        title = f"{check} at {size} B, sender x receiver against the peers' median ({screen['system']}, " \
                f"{len(nodes)} nodes)"
        write_atomic(report / name, heatmap(nodes, m, title))
        maps.append((check, name))
    write_atomic(report / "index.html", page(screen, f, maps, not_run, records))
    return report / "index.html"


def page(screen: dict, f: Findings, maps: list[tuple[str, str]], not_run: dict[str, str],
         records: list[Record]) -> str:
    e = html.escape
    rows = "".join(f"<tr class='{e(v.status)}'><td>{e(n)}</td><td>{e(v.status)}</td><td>{e(v.reason)}</td>"
                   f"<td>{e(', '.join(v.partners))}</td></tr>" for n, v in f.nodes.items())
    pairs = "".join(f"<li><b>{e(a)}–{e(b)}</b>: {e('; '.join(w))}</li>" for (a, b), w in f.bad_pairs.items())
    imgs = "".join(f"<figure><img src='{e(name)}' alt='{e(check)} heatmap'><figcaption>{e(check)}</figcaption>"
                   f"</figure>" for check, name in maps)
    skipped = "".join(f"<li>{e(k)}: {e(v)}</li>" for k, v in not_run.items())
    blunt = "".join(f"<li>{e(k)}: {e(v)}</li>" for k, v in f.blunt.items())
    unit = {(check_of(r), headline(r)): r.unit for r in records}   # the size each check is judged at
    spread_rows = "".join(f"<tr><td>{e(p['check'])}</td><td>{e(size_text(p['size']))}</td>"
                          f"<td>{p['median']:.4g} {e(unit[p['check'], p['size']])}</td><td>{p['mad']:.3g}</td>"
                          f"<td>{'-' if p['spread'] is None else format(p['spread'], '.0%')}</td><td>{p['count']}</td></tr>"
                          for p in spreads(f) if (p["check"], p["size"]) in unit)
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>commstack screen {e(screen['run_id'])}</title>
<style>body{{font-family:sans-serif;margin:1.5em}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:left}} tr.bad td{{background:#f4b6b6;font-weight:bold}}
tr.suspect td{{background:#fbe7b0}} tr.down td,tr.not-run td,tr.unjudged td{{background:#ddd}}
figure{{display:inline-block;margin:0 1em}} img{{max-width:640px}}</style></head><body>
<h1>commstack screen: {e(screen['system'])}, {len(f.nodes)} nodes</h1>
<p>screen {e(screen['screen'])}, run {e(screen['run_id'])}, {screen['wall_s']:.0f} s, exit {screen['exit']}</p>
<h2>Bad nodes: {e(', '.join(f.bad_nodes) or 'none')}</h2>
{f"<h2>Down mid-screen: {e(', '.join(f.lost))}</h2>" if f.lost else ''}
<h2>Bad pairs: {len(f.bad_pairs) or 'none'}</h2><ul>{pairs}</ul>
{f"<h2>Not judged by: {e(', '.join(f.blind))} (the spread hides the rule's slowdown)</h2>" if f.blind else ''}
{f'<h3>Not run</h3><ul>{skipped}</ul>' if skipped else ''}
{f'<h3>What the spread hides</h3><ul>{blunt}</ul>' if blunt else ''}
<h2>Pairs</h2><p>{"Each heatmap: the sender's row, the receiver's column; a round trip fills both cells."
if len(f.nodes) <= HEATMAP_NODES else f"No heatmaps above {HEATMAP_NODES} nodes: the bad nodes and pairs are above."}
</p>{imgs}
<h2>Healthy spread</h2><p>Per check at the size it is judged at: the peers' median, their median absolute deviation
(MAD) and its share of the median. A slow link shows only where it lies well outside that spread.</p>
<table><tr><th>check</th><th>size</th><th>median</th><th>MAD</th><th>spread</th><th>figures</th></tr>{spread_rows}</table>
<h2>Nodes</h2><table><tr><th>node</th><th>verdict</th><th>why</th><th>partners</th></tr>{rows}</table>
</body></html>
"""
