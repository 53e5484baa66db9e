"""No module of the commstack package is over 400 lines (issue 26): a module that grows past it holds
more than one thing, and is split by what its parts are."""

from __future__ import annotations

from pathlib import Path

LIB = Path(__file__).resolve().parents[2] / "lib" / "commstack"
LIMIT = 400


def test_no_module_in_lib_is_over_400_lines():
    modules = sorted(LIB.rglob("*.py"))
    assert len(modules) > 20, f"found only {len(modules)} modules under {LIB}"
    sizes = {path.relative_to(LIB.parent).as_posix(): len(path.read_bytes().splitlines()) for path in modules}
    over = {name: n for name, n in sizes.items() if n > LIMIT}
    assert not over, f"modules over {LIMIT} lines: " + ", ".join(f"{name} ({n})" for name, n in over.items())
