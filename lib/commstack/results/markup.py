"""Text from records, plans, histories and references made safe where the report shows it: HTML, Markdown,
matplotlib's text, and file names. Every string of an input file may hold markup or control characters."""

from __future__ import annotations

import html
import re

from commstack.errors import printable


def md_text(text: str) -> str:
    """`text` as Markdown text: controls escaped visibly, then HTML (a `<script>` or an autolink stays text),
    then what Markdown would read as a link, a code span or the end of a table cell."""
    return re.sub(r"([\\`\[\]|])", r"\\\1", html.escape(printable(text), quote=False))


def html_text(text: object, keep: str = "") -> str:
    """`text` as HTML text or an attribute value: controls escaped visibly (errors.printable), then markup."""
    return html.escape(printable(str(text), keep))


def mpl_text(text: object) -> str:
    """`text` for a matplotlib label or title: controls escaped, and no `$` that would start mathtext."""
    return printable(str(text)).replace("$", r"\$")


def file_name(text: str) -> str:
    """`text` as part of a file name: what is not a letter, digit, '.', '_' or '-' becomes '_'."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", text).lstrip(".") or "_"


def md_code(text: str, block: bool = False) -> str:
    """`text` in a code span (or, `block`, a fenced block) that nothing in it can end."""
    text = printable(text, keep="\n" if block else "")
    fence = "`" * max(3 if block else 1, 1 + max((len(run) for run in re.findall("`+", text)), default=0))
    if block:
        return f"{fence}\n{text}\n{fence}"
    text = text.replace("|", "\\|")  # a GFM table cell ends at a bare pipe, even in a code span
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def spans(text: str) -> tuple[str, str]:
    """A reason as (Markdown, HTML): its `code` spans as code spans (<code>), the rest as text."""
    parts = re.split(r"`([^`]+)`", text)
    return ("".join(md_code(p) if i % 2 else md_text(p) for i, p in enumerate(parts)),
            "".join(f"<code>{html_text(p)}</code>" if i % 2 else html_text(p) for i, p in enumerate(parts)))
