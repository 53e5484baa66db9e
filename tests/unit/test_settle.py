"""results.settle.read_results: how far an output file is read before its verdict is settled, counted line by
line on real files. A parser here makes one result per line ("bad": a bad number, "cut": a truncated table,
no "title" line: no benchmark's output), so that each part read and each margin shows in the figures; the
user's path, `commstack parse` of a 60 MB output, is the hostile tier's (tests/hostile/test_parse_huge_outputs.py)."""

from pathlib import Path

import pytest

from commstack.errors import BadNumberError, InputFileError, NoTitleError, ParseError, TruncatedError
from commstack.results.settle import read_results

# settle's figures, written out: a test that read them from the module would move with a wrong one
FIRST_LINES, MARGIN, TITLE_WITHIN = 2048, 256, 100_000


def parse(text: str) -> list:
    lines = text.splitlines()
    if "title" not in lines:
        return [NoTitleError("no benchmark's title")]
    return [BadNumberError("bad number", line, i) if line == "bad" else TruncatedError("cut", line, i)
            if line == "cut" else line for i, line in enumerate(lines, 1)]


def error(result) -> ParseError | None:
    return result if isinstance(result, ParseError) else None


def output(tmp_path: Path, lines: int, at: dict[int, str] | None = None, title: bool = True) -> Path:
    """An output of `lines` lines: "title" first, "row" after, and `at`'s lines (by line number) in their places."""
    text = ["title" if title else "row"] + ["row"] * (lines - 1)
    for n, line in (at or {}).items():
        text[n - 1] = line
    path = tmp_path / "out"
    path.write_text("\n".join(text) + "\n")
    return path


def test_a_failure_margin_lines_before_the_first_parts_end_is_settled_there(tmp_path):
    bad = FIRST_LINES - MARGIN
    results, read = read_results(output(tmp_path, 10 * FIRST_LINES, {bad: "bad"}), parse, error)
    assert (read, len(results)) == (2048, bad) and results[-1].lineno == bad
    assert results[0] == "title" and results[-2] == "row"


def test_a_failure_fewer_lines_before_the_end_waits_for_the_next_part_four_times_as_long(tmp_path):
    bad = FIRST_LINES - MARGIN + 1
    results, read = read_results(output(tmp_path, 10 * FIRST_LINES, {bad: "bad"}), parse, error)
    assert (read, len(results)) == (8192, bad) and isinstance(results[-1], BadNumberError)


def test_the_first_failure_is_the_last_result_kept(tmp_path):
    results, read = read_results(output(tmp_path, 10 * FIRST_LINES, {5: "bad", 6: "bad"}), parse, error)
    assert (read, len(results)) == (2048, 5) and results[-1].lineno == 5


def test_a_truncated_table_is_never_settled_by_a_part(tmp_path):
    results, read = read_results(output(tmp_path, 3 * FIRST_LINES, {5: "cut"}), parse, error)
    assert read is None and len(results) == 3 * FIRST_LINES and isinstance(results[4], TruncatedError)


def test_an_output_with_no_failure_is_read_whole(tmp_path):
    results, read = read_results(output(tmp_path, 3 * FIRST_LINES), parse, error)
    assert read is None and len(results) == 3 * FIRST_LINES and not any(map(error, results))


def test_an_output_of_exactly_one_part_is_read_whole(tmp_path):
    results, read = read_results(output(tmp_path, FIRST_LINES, {5: "bad"}), parse, error)
    assert read is None and len(results) == FIRST_LINES


def test_an_output_without_a_title_is_refused_once_title_within_lines_are_read(tmp_path):
    # the parts are 2048, 8192, 32768 and 131072 lines: the first past TITLE_WITHIN settles it
    results, read = read_results(output(tmp_path, 2 * TITLE_WITHIN, title=False), parse, error)
    assert read == 131072 and [type(r) for r in results] == [NoTitleError]


def test_a_shorter_output_without_a_title_is_read_whole(tmp_path):
    results, read = read_results(output(tmp_path, TITLE_WITHIN // 2, title=False), parse, error)
    assert read is None and [type(r) for r in results] == [NoTitleError]


def test_a_file_longer_than_its_size_said_is_cut_at_the_limit():
    # /proc's files say 0 bytes when opened: only the lines read count against the limit
    size = len(Path("/proc/self/cmdline").read_bytes())
    results, read = read_results(Path("/proc/self/cmdline"), lambda text: ["title", text], error, limit=size)
    assert read is None and len(results[1].encode()) == size
    with pytest.raises(InputFileError, match=rf"/proc/self/cmdline: more than the {size - 1} bytes commstack reads"):
        read_results(Path("/proc/self/cmdline"), parse, error, limit=size - 1)


def test_a_file_that_fails_to_read_is_a_named_error():
    with pytest.raises(InputFileError, match=r"^/proc/self/mem: cannot read: Input/output error$"):
        read_results(Path("/proc/self/mem"), parse, error)
