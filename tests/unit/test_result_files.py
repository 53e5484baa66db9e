"""The report and the history plot are written like every other file: built aside and swapped in,
nothing left beside them, never written through a symlink nor over one."""

from pathlib import Path

import matplotlib.image

from commstack.cli.main import main
from commstack.paths import TOP
from commstack.results.history import add_run
from commstack.tools.osu import parse_osu
from commstack.results.records import Record
from commstack.results.report import write_report

SEED = TOP / "systems" / "references" / "seeds" / "cscs-osu-01.txt"


def run_dir(root: Path, name: str = "r1", started: float = 1000.0) -> Path:
    sweep = parse_osu(SEED.read_text())[0]
    d = root / name
    Record(run_id=name, index=0, suite="s", system="alps-gh200", step="osu_bw", benchmark=sweep.benchmark, tool="osu",
           tags={"nodes": 2, "ntasks": 2}, metric="bandwidth_MBps", unit="MB/s", verdict="pass",
           repeats=[sweep.rows], started=started).write(d)
    return d


def test_a_report_directory_of_an_older_commstack_is_swapped_out_and_removed(tmp_path):
    d = run_dir(tmp_path)
    (d / "report").mkdir()
    (d / "report" / "index.html").write_text("an older report\n")
    page = write_report(d)
    assert (d / "report").is_symlink() and "osu_bw" in page.read_text()
    assert sorted(p.name for p in d.iterdir() if p.name.startswith(".report")) == [page.resolve().parent.name]


def test_the_history_plot_refuses_a_symlink_and_does_not_write_through_it(tmp_path, capsys):
    """issue 22 item 4: an existing target that is not a regular file is refused (exit 2), not replaced."""
    db = tmp_path / "h.sqlite"
    add_run(run_dir(tmp_path, "r1", 1000.0), db)
    add_run(run_dir(tmp_path, "r2", 2000.0), db)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    png = tmp_path / "trend.png"
    png.symlink_to(victim)
    assert main(["history", "--history", str(db), "--plot", str(png)]) == 2
    assert f"{png} exists and is a symlink, not a regular file" in capsys.readouterr().err
    assert victim.read_text() == "precious\n" and png.is_symlink()
    png.unlink()
    assert main(["history", "--history", str(db), "--plot", str(png)]) == 0
    assert matplotlib.image.imread(png).shape[0] > 100
