"""What commstack shows of a failed concretization: our requirement's message alone, where Spack lists it
among every other error of its solver's model (issue 36 item 4; docs/environments.md#errors)."""

from pathlib import Path

from commstack.paths import TOP
from commstack.spack.envs import explain

# `spack -e envs/gh200-ompi concretize -f` on this x86_64 Debian 12 host, Spack 1.1.0: 36 lines
PLAIN = (TOP / "tests" / "data" / "spack" / "concretize-gh200-ompi-on-x86_64.txt").read_text()
LIBC = ("this host is not an Ubuntu 24.04 GH200 node (glibc 2.39): Spack takes the libc of the compiler it runs "
        "here, so a lock made here would be this host's. Concretize on the node, or lock from any host with "
        "`bin/commstack lock` (docs/environments.md#locks)")


def test_our_reason_alone_out_of_spacks_36_lines():
    assert len(PLAIN.splitlines()) == 36 and "python: conflicts with '%nvhpc'" in PLAIN
    assert explain(PLAIN, TOP, Path("envs/gh200-ompi")) == LIBC


def test_an_error_without_our_reason_keeps_spacks_lines_and_the_lines_they_name():
    other = PLAIN.replace(LIBC, "a reason of Spack's own")
    shown = explain(other, TOP, Path("envs/gh200-ompi"))
    assert "a reason of Spack's own" not in shown  # Spack's last 12 lines: the cause tree's end
    assert "required because meson depends on ninja@1.8.2" in shown and LIBC not in shown
