"""md_code through a real CommonMark reader (markdown-it-py, which rich brings): whatever backticks, pipes or
newlines a text holds, report.md shows it as one code span or block, unchanged (issue 37: markup's fence and
padding were reached by no assertion that a reader would make)."""

import pytest
from markdown_it import MarkdownIt

from commstack.results.markup import md_code

MD = MarkdownIt("commonmark").enable("table")


@pytest.mark.parametrize("text", ["plain", "a`b", "x``y`z", "a``b`", "`lead", "trail`", "``"])
def test_a_code_span_holds_its_text_whatever_its_backticks(text):
    assert MD.renderInline(md_code(text)) == f"<code>{text}</code>"


def test_a_code_span_in_a_table_cell_holds_its_pipes():
    assert "<td><code>a|b</code></td>" in MD.render(f"| step |\n|---|\n| {md_code('a|b')} |\n")


@pytest.mark.parametrize("text", ["one\ntwo", "one\ntwo ``` three", "````"])
def test_a_code_block_holds_its_lines_and_backtick_runs(text):
    assert MD.render(md_code(text, block=True)) == f"<pre><code>{text}\n</code></pre>\n"


def test_a_code_block_is_fenced_by_three_backticks_as_readers_expect():
    assert md_code("one\ntwo", block=True) == "```\none\ntwo\n```"
